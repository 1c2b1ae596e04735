//! The one certificate reader: PEM to [`Cert`], owned, so no parser
//! lifetime leaks out. The webhook's renewal rules read their own Secret
//! with [`parse_pem_certs`] (what cannot be read is skipped: the plan then
//! replaces it); diagnose reads cluster data with [`parse_bundle`], which
//! says what could not be read, because that is the finding.

use std::net::IpAddr;

use k8s_openapi::jiff::Timestamp;
use rcgen::PublicKeyData;
use rustls_pki_types::CertificateDer;
use rustls_pki_types::pem::PemObject;
use x509_parser::extensions::GeneralName;
use x509_parser::prelude::FromDer;
use x509_parser::x509::SubjectPublicKeyInfo;

/// One certificate, as much of it as the renewal rules and diagnose read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cert {
    pub der: Vec<u8>,
    /// `CN=runner-webhook-ca`.
    pub subject: String,
    pub issuer: String,
    pub not_before: Timestamp,
    pub not_after: Timestamp,
    pub is_ca: bool,
    /// The public key's bits (what a key pair is compared by).
    pub spki: Vec<u8>,
    /// The whole SubjectPublicKeyInfo, to check signatures with.
    spki_der: Vec<u8>,
    pub dns_names: Vec<String>,
    pub ips: Vec<IpAddr>,
}

impl Cert {
    fn from_der(der: &[u8]) -> Result<Cert, String> {
        let (_, x) =
            x509_parser::parse_x509_certificate(der).map_err(|e| format!("not an X.509 certificate: {e}"))?;
        let time = |t: x509_parser::time::ASN1Time| {
            Timestamp::from_second(t.timestamp()).map_err(|e| format!("a date out of range: {e}"))
        };
        let (mut dns_names, mut ips) = (vec![], vec![]);
        if let Ok(Some(san)) = x.subject_alternative_name() {
            for name in &san.value.general_names {
                match name {
                    GeneralName::DNSName(n) => dns_names.push(n.to_string()),
                    GeneralName::IPAddress(b) => ips.extend(ip(b)),
                    _ => {}
                }
            }
        }
        Ok(Cert {
            der: der.to_vec(),
            subject: x.subject().to_string(),
            issuer: x.issuer().to_string(),
            not_before: time(x.validity().not_before)?,
            not_after: time(x.validity().not_after)?,
            is_ca: x.is_ca(),
            spki: x.public_key().subject_public_key.data.to_vec(),
            spki_der: x.public_key().raw.to_vec(),
            dns_names,
            ips,
        })
    }

    /// True when the certificate names `host` (an IP or a DNS name, exactly,
    /// as the apiserver dials it; no wildcards are issued here).
    pub fn names(&self, host: &str) -> bool {
        match host.parse::<IpAddr>() {
            Ok(addr) => self.ips.contains(&addr),
            Err(_) => self.dns_names.iter().any(|n| n.eq_ignore_ascii_case(host)),
        }
    }

    /// True when `ca`'s key signed this certificate.
    pub fn is_signed_by(&self, ca: &Cert) -> bool {
        let Ok((_, key)) = SubjectPublicKeyInfo::from_der(&ca.spki_der) else { return false };
        let Ok((_, me)) = x509_parser::parse_x509_certificate(&self.der) else { return false };
        me.verify_signature(Some(&key)).is_ok()
    }
}

fn ip(bytes: &[u8]) -> Option<IpAddr> {
    match bytes.len() {
        4 => Some(IpAddr::from(<[u8; 4]>::try_from(bytes).ok()?)),
        16 => Some(IpAddr::from(<[u8; 16]>::try_from(bytes).ok()?)),
        _ => None,
    }
}

/// Every readable certificate in a PEM bundle, in order; other blocks and
/// unreadable certificates are skipped.
pub fn parse_pem_certs(pem: &str) -> Vec<Cert> {
    CertificateDer::pem_slice_iter(pem.as_bytes())
        .filter_map(Result::ok)
        .filter_map(|der| Cert::from_der(&der).ok())
        .collect()
}

/// Every certificate in a PEM bundle, in order; an error names what could
/// not be read. An empty bundle is an error too: nothing can verify.
pub fn parse_bundle(pem: &[u8]) -> Result<Vec<Cert>, String> {
    let ders = CertificateDer::pem_slice_iter(pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("not PEM: {e}"))?;
    if ders.is_empty() {
        return Err("no PEM certificate in it".into());
    }
    ders.iter().map(|der| Cert::from_der(der)).collect()
}

/// The public key's bits of a PEM private key (compared with
/// [`Cert::spki`]); None when it is not a key rcgen reads.
pub fn key_spki(pem: &str) -> Option<Vec<u8>> {
    let key = rcgen::KeyPair::from_pem(pem).ok()?;
    Some(key.der_bytes().to_vec())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Made by diagnose's `testdata/make_certs.py`.
    const SERVING_SOON: &[u8] = include_bytes!("../../diagnose/checks/testdata/serving_soon.pem");

    #[test]
    fn dates_and_names_are_read_from_the_certificate() {
        let c = &parse_bundle(SERVING_SOON).unwrap()[0];
        assert_eq!(c.subject, "CN=runner-webhook.runner-system.svc");
        assert_eq!(c.issuer, "CN=runner-webhook-ca");
        assert_eq!(c.not_after.to_string(), "2026-01-10T12:00:00Z");
        assert_eq!(parse_pem_certs(std::str::from_utf8(SERVING_SOON).unwrap()), vec![c.clone()]);
    }

    #[test]
    fn what_is_not_a_pem_certificate_says_so() {
        assert!(parse_bundle(b"").unwrap_err().contains("no PEM certificate"));
        assert!(parse_bundle(b"hello").unwrap_err().contains("no PEM certificate"));
        let broken = b"-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n";
        assert!(parse_bundle(broken).unwrap_err().contains("not an X.509 certificate"));
        assert!(parse_pem_certs(std::str::from_utf8(broken).unwrap()).is_empty(), "skipped when lenient");
    }
}
