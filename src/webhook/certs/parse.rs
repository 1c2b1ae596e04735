//! Reading certificates and keys back from PEM: what [`super::plan`] needs
//! of each (validity, names, key, issuer), owned, so no parser lifetime
//! leaks out. Also what diagnose needs to compare a caBundle with the
//! serving certificate, or to see one near expiry.

use std::net::IpAddr;

use chrono::{DateTime, Utc};
use rcgen::PublicKeyData;
use x509_parser::extensions::GeneralName;
use x509_parser::pem::Pem;
use x509_parser::prelude::FromDer;
use x509_parser::x509::SubjectPublicKeyInfo;

/// One certificate, as much of it as the decisions read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CertInfo {
    pub der: Vec<u8>,
    pub not_before: DateTime<Utc>,
    pub not_after: DateTime<Utc>,
    pub is_ca: bool,
    /// The public key's bits (what a key pair is compared by).
    pub spki: Vec<u8>,
    /// The whole SubjectPublicKeyInfo, to check signatures with.
    spki_der: Vec<u8>,
    pub dns_names: Vec<String>,
    pub ips: Vec<IpAddr>,
}

impl CertInfo {
    fn from_der(der: &[u8]) -> Option<CertInfo> {
        let (_, x) = x509_parser::parse_x509_certificate(der).ok()?;
        let time = |t: &x509_parser::time::ASN1Time| DateTime::from_timestamp(t.timestamp(), 0);
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
        Some(CertInfo {
            der: der.to_vec(),
            not_before: time(&x.validity().not_before)?,
            not_after: time(&x.validity().not_after)?,
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
    pub fn is_signed_by(&self, ca: &CertInfo) -> bool {
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
/// unreadable certificates are skipped (a bundle is cluster data).
pub fn parse_pem_certs(pem: &str) -> Vec<CertInfo> {
    Pem::iter_from_buffer(pem.as_bytes())
        .filter_map(Result::ok)
        .filter(|p| p.label == "CERTIFICATE")
        .filter_map(|p| CertInfo::from_der(&p.contents))
        .collect()
}

/// The public key's bits of a PEM private key (compared with
/// [`CertInfo::spki`]); None when it is not a key rcgen reads.
pub fn key_spki(pem: &str) -> Option<Vec<u8>> {
    let key = rcgen::KeyPair::from_pem(pem).ok()?;
    Some(key.der_bytes().to_vec())
}
