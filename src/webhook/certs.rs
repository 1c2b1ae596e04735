//! The webhook's certificates, decided from their own validity and nothing
//! else, so every replica reaches the same verdict from the same Secret.
//!
//! [`plan`] (pure, given the time) says what to change; [`carry_out`] makes
//! the keys and certificates. The rules:
//! - nothing usable (no CA, its key lost, expired): a fresh CA and serving
//!   certificate;
//! - the signing CA has less than a third of its lifetime left: a new CA
//!   goes in front of the bundle and signs from then on; the old one stays
//!   in the bundle until it expires, so what it signed is still trusted;
//! - the serving certificate is renewed with less than a third of its
//!   lifetime left, but not by a CA younger than [`Lifetimes::propagation`]:
//!   the apiserver must trust a new CA (the CRD's caBundle) before anything
//!   it signed is served. One that cannot serve at all (missing, expired,
//!   not naming every host, signed by no CA in the bundle) is replaced now.

use std::time::Duration;

use k8s_openapi::jiff::{SignedDuration, Timestamp};

mod issue;
mod read;
pub use issue::carry_out;
pub use read::{Cert, parse_bundle, parse_pem_certs};

/// The Secret's four PEM values (its keys are in the webhook's `secret` module).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Material {
    /// Every CA the apiserver should trust, the signing one first.
    pub ca_crt: String,
    /// The key of the first CA in `ca_crt`.
    pub ca_key: String,
    pub tls_crt: String,
    pub tls_key: String,
}

/// How long certificates live, and how long a new CA waits before it signs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Lifetimes {
    pub ca: Duration,
    pub serving: Duration,
    /// A CA this young signs no serving certificate that replaces a working
    /// one: the replicas and the apiserver pick the CRD's new caBundle up
    /// within seconds; an hour leaves room for a replica that was down.
    pub propagation: Duration,
}

const DAY: u64 = 24 * 3600;

/// Three years for the CA (renewed with a year left, so a rotation comes
/// every two years), 90 days for the serving certificate (renewed every 60).
pub const LIFETIMES: Lifetimes = Lifetimes {
    ca: Duration::from_secs(3 * 365 * DAY),
    serving: Duration::from_secs(90 * DAY),
    propagation: Duration::from_secs(3600),
};

/// What happens to the CAs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CaStep {
    Keep,
    /// A new CA in front of the bundle, the old ones kept until they expire.
    Rotate,
    /// Nothing usable: a new CA, and a bundle of it alone.
    Replace(Reason),
}

/// Why a certificate is made anew.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reason {
    Missing,
    Unreadable,
    /// The key in the Secret is not the certificate's.
    KeyMismatch,
    Expired,
    NotYetValid,
    /// No CA in the bundle signed it.
    UntrustedIssuer,
    /// It lacks these names.
    NamesMissing(Vec<String>),
    /// Less than a third of its lifetime left.
    Due,
    /// A new CA replaced the one that signed it.
    NewCa,
}

/// What [`plan`] decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    pub ca: CaStep,
    /// Why the serving certificate is issued again, if it is.
    pub serving: Option<Reason>,
    /// Expired CAs dropped from the bundle.
    pub expired_cas: usize,
    /// When to look again even if nothing changes: the next renewal point,
    /// the end of a new CA's propagation, or a CA's expiry.
    pub next_check: Timestamp,
}

impl Plan {
    /// True when the Secret stays as it is.
    pub fn keeps(&self) -> bool {
        self.ca == CaStep::Keep && self.serving.is_none() && self.expired_cas == 0
    }
}

/// The point after which a certificate is due: a third of its lifetime left.
fn renew_at(c: &Cert) -> Timestamp {
    c.not_after - c.not_after.duration_since(c.not_before) / 3
}

fn delta(d: Duration) -> SignedDuration {
    SignedDuration::try_from(d).unwrap_or(SignedDuration::MAX)
}

/// Pure: what to change in `m` at `now` so the serving certificate names
/// every one of `names` and the rules above hold.
pub fn plan(now: Timestamp, m: &Material, names: &[String], life: &Lifetimes) -> Plan {
    let cas = parse_pem_certs(&m.ca_crt);
    let signing = match signing_ca(now, &cas, &m.ca_key) {
        Ok(ca) => ca,
        Err(why) => {
            let next_check = now + delta(life.serving) - delta(life.serving) / 3;
            return Plan {
                ca: CaStep::Replace(why),
                serving: Some(Reason::NewCa),
                expired_cas: 0,
                next_check,
            };
        }
    };
    let live: Vec<&Cert> = cas.iter().filter(|c| c.not_after > now && c.is_ca).collect();
    let expired_cas = cas.len() - live.len();
    let rotate = now >= renew_at(signing);
    let mut next = vec![renew_at(signing)];
    next.extend(live.iter().map(|c| c.not_after));
    let serving = match serving_problem(now, m, names, &live) {
        Err(urgent) => Some(urgent),
        Ok(cert) => {
            next.push(renew_at(&cert));
            // The CA that would sign a renewal, and when it may.
            let may_sign = if rotate { now } else { signing.not_before } + delta(life.propagation);
            if now < renew_at(&cert) {
                None
            } else if now < may_sign {
                next.push(may_sign);
                None
            } else {
                Some(Reason::Due)
            }
        }
    };
    let ca = if rotate { CaStep::Rotate } else { CaStep::Keep };
    let mut next_check = next.into_iter().filter(|t| *t > now).min().unwrap_or(now + delta(life.serving));
    if rotate || serving.is_some() {
        // After this write: the new serving certificate's (or CA's) renewal
        // comes far later; looking again soon costs one read.
        next_check = now + delta(life.propagation);
    }
    Plan { ca, serving, expired_cas, next_check }
}

/// The first CA of the bundle, if `key` is its key and it is valid now.
fn signing_ca<'a>(now: Timestamp, cas: &'a [Cert], key: &str) -> Result<&'a Cert, Reason> {
    let Some(first) = cas.first() else {
        return Err(if key.trim().is_empty() { Reason::Missing } else { Reason::Unreadable });
    };
    let key = read::key_spki(key).ok_or(Reason::Unreadable)?;
    if !first.is_ca {
        return Err(Reason::Unreadable);
    }
    if first.spki != key {
        return Err(Reason::KeyMismatch);
    }
    in_dates(now, first)?;
    Ok(first)
}

/// Ok when `c` is valid at `now`, else whether it expired or is not yet valid.
fn in_dates(now: Timestamp, c: &Cert) -> Result<(), Reason> {
    if now >= c.not_after {
        return Err(Reason::Expired);
    }
    if now < c.not_before {
        return Err(Reason::NotYetValid);
    }
    Ok(())
}

/// The serving certificate if it can serve now; else why it cannot.
fn serving_problem(now: Timestamp, m: &Material, names: &[String], cas: &[&Cert]) -> Result<Cert, Reason> {
    if m.tls_crt.trim().is_empty() {
        return Err(Reason::Missing);
    }
    let cert = parse_pem_certs(&m.tls_crt).into_iter().next().ok_or(Reason::Unreadable)?;
    if read::key_spki(&m.tls_key).as_ref() != Some(&cert.spki) {
        return Err(Reason::KeyMismatch);
    }
    in_dates(now, &cert)?;
    let missing: Vec<String> = names.iter().filter(|n| !cert.names(n)).cloned().collect();
    if !missing.is_empty() {
        return Err(Reason::NamesMissing(missing));
    }
    if !cas.iter().any(|ca| cert.is_signed_by(ca)) {
        return Err(Reason::UntrustedIssuer);
    }
    Ok(cert)
}

#[cfg(test)]
mod tests;
