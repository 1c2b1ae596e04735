//! Pure: the conversion webhook's certificates as the apiserver's TLS
//! client judges them. A certificate bundle is PEM (the Secret's `tls.crt`
//! and `ca.crt`, the CRD's caBundle); the chain is verified with
//! rustls-webpki (a TLS client's path building, server-auth usage), the
//! dates and names are read with x509-parser.

use std::time::Duration;

use k8s_openapi::jiff::Timestamp;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, UnixTime};

/// One certificate of a bundle, as evidence names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cert {
    pub der: CertificateDer<'static>,
    /// `CN=runner-webhook-ca`.
    pub subject: String,
    pub issuer: String,
    pub not_before: Timestamp,
    pub not_after: Timestamp,
}

/// Every certificate in a PEM bundle, in order; an error names what could
/// not be read. An empty bundle is an error too: nothing can verify.
pub fn parse(pem: &[u8]) -> Result<Vec<Cert>, String> {
    let ders = CertificateDer::pem_slice_iter(pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("not PEM: {e}"))?;
    if ders.is_empty() {
        return Err("no PEM certificate in it".into());
    }
    ders.into_iter().map(cert).collect()
}

fn cert(der: CertificateDer<'static>) -> Result<Cert, String> {
    let (_, c) =
        x509_parser::parse_x509_certificate(&der).map_err(|e| format!("not an X.509 certificate: {e}"))?;
    let time = |t: x509_parser::time::ASN1Time| {
        Timestamp::from_second(t.timestamp()).map_err(|e| format!("a date out of range: {e}"))
    };
    Ok(Cert {
        subject: c.subject().to_string(),
        issuer: c.issuer().to_string(),
        not_before: time(c.validity().not_before)?,
        not_after: time(c.validity().not_after)?,
        der: der.clone(),
    })
}

/// Why `serving` does not chain to a CA of `bundle`, judged at `now` as
/// the apiserver would; `Ok` when it does. A chain that is only out of its
/// dates is judged again inside the serving certificate's validity, so a
/// certificate that expired is reported by its dates and not as a mismatch.
pub fn verify(serving: &[Cert], bundle: &[Cert], now: Timestamp) -> Result<(), String> {
    let Some((leaf, intermediates)) = serving.split_first() else {
        return Err("no serving certificate".into());
    };
    let anchors = bundle
        .iter()
        .map(|c| webpki::anchor_from_trusted_cert(&c.der).map(|a| a.to_owned()))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("a caBundle certificate is no CA webpki accepts: {e}"))?;
    let ee = webpki::EndEntityCert::try_from(&leaf.der).map_err(|e| format!("tls.crt: {e}"))?;
    let chain: Vec<CertificateDer<'_>> = intermediates.iter().map(|c| c.der.clone()).collect();
    let at =
        |t: Timestamp| UnixTime::since_unix_epoch(Duration::from_secs(t.as_second().max(0).unsigned_abs()));
    let judge = |t: Timestamp| {
        ee.verify_for_usage(
            webpki::ALL_VERIFICATION_ALGS,
            &anchors,
            &chain,
            at(t),
            webpki::KeyUsage::server_auth(),
            None,
            None,
        )
        .map(|_| ())
    };
    match judge(now) {
        Ok(()) => Ok(()),
        Err(webpki::Error::CertExpired { .. } | webpki::Error::CertNotValidYet { .. }) => {
            let inside = leaf.not_before.checked_add(k8s_openapi::jiff::SignedDuration::from_secs(1));
            judge(inside.unwrap_or(leaf.not_before)).map_err(|e| describe(&e))
        }
        Err(e) => Err(describe(&e)),
    }
}

/// webpki's error in words a user can act on.
fn describe(e: &webpki::Error) -> String {
    match e {
        webpki::Error::UnknownIssuer => "its issuer is not a CA of the bundle (UnknownIssuer)".into(),
        webpki::Error::InvalidSignatureForPublicKey => {
            "a CA of the bundle has its issuer's name but not its key (bad signature)".into()
        }
        other => format!("{other:?}"),
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// The PEM files of `testdata/` (made by `testdata/make_certs.py`).
    pub const CA: &[u8] = include_bytes!("testdata/ca.pem");
    pub const CA_SOON: &[u8] = include_bytes!("testdata/ca_soon.pem");
    pub const OTHER_CA: &[u8] = include_bytes!("testdata/other_ca.pem");
    pub const SERVING: &[u8] = include_bytes!("testdata/serving.pem");
    pub const SERVING_SOON: &[u8] = include_bytes!("testdata/serving_soon.pem");
    pub const SERVING_EXPIRED: &[u8] = include_bytes!("testdata/serving_expired.pem");
    pub const SERVING_UNDER_CA_SOON: &[u8] = include_bytes!("testdata/serving_under_ca_soon.pem");

    fn now() -> Timestamp {
        crate::diagnose::checks::fixtures::now()
    }

    fn judge(serving: &[u8], bundle: &[u8]) -> Result<(), String> {
        verify(&parse(serving).unwrap(), &parse(bundle).unwrap(), now())
    }

    #[test]
    fn a_serving_certificate_verifies_against_its_own_ca_only() {
        assert_eq!(judge(SERVING, CA), Ok(()));
        assert_eq!(judge(SERVING_UNDER_CA_SOON, CA_SOON), Ok(()));
        let other = judge(SERVING, OTHER_CA).unwrap_err();
        assert!(other.contains("UnknownIssuer"), "{other}");
        // Same name as the CA that signed it, another key: a regenerated CA.
        let renamed = judge(SERVING, CA_SOON).unwrap_err();
        assert!(renamed.contains("bad signature") || renamed.contains("UnknownIssuer"), "{renamed}");
    }

    #[test]
    fn a_bundle_with_the_right_ca_among_others_verifies() {
        let bundle = [OTHER_CA, CA].concat();
        assert_eq!(judge(SERVING, &bundle), Ok(()));
    }

    #[test]
    fn an_expired_serving_certificate_is_judged_by_its_issuer_not_its_dates() {
        assert_eq!(judge(SERVING_EXPIRED, CA), Ok(()));
        assert!(judge(SERVING_EXPIRED, OTHER_CA).is_err());
    }

    #[test]
    fn dates_and_names_are_read_from_the_certificate() {
        let c = &parse(SERVING_SOON).unwrap()[0];
        assert_eq!(c.subject, "CN=runner-webhook.runner-system.svc");
        assert_eq!(c.issuer, "CN=runner-webhook-ca");
        assert_eq!(c.not_after.to_string(), "2026-01-10T12:00:00Z");
    }

    #[test]
    fn what_is_not_a_pem_certificate_says_so() {
        assert!(parse(b"").unwrap_err().contains("no PEM certificate"));
        assert!(parse(b"hello").unwrap_err().contains("no PEM certificate"));
        let broken = b"-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n";
        assert!(parse(broken).unwrap_err().contains("not an X.509 certificate"));
    }
}
