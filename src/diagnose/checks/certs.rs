//! Pure: the webhooks' certificates as the apiserver's TLS
//! client judges them. A certificate bundle is PEM (the Secret's `tls.crt`
//! and `ca.crt`, the CRD's caBundle), read by the webhook's own reader
//! (`crate::webhook::certs`, so diagnose and the renewal rules read the
//! same dates); the chain is verified with rustls-webpki (a TLS client's
//! path building, server-auth usage).

use std::time::Duration;

use k8s_openapi::jiff::Timestamp;
use rustls_pki_types::{CertificateDer, UnixTime};

use crate::webhook::certs::Cert;

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
        .map(|c| {
            webpki::anchor_from_trusted_cert(&CertificateDer::from(c.der.as_slice())).map(|a| a.to_owned())
        })
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("a caBundle certificate is no CA webpki accepts: {e}"))?;
    let leaf_der = CertificateDer::from(leaf.der.as_slice());
    let ee = webpki::EndEntityCert::try_from(&leaf_der).map_err(|e| format!("tls.crt: {e}"))?;
    let chain: Vec<CertificateDer<'_>> =
        intermediates.iter().map(|c| CertificateDer::from(c.der.as_slice())).collect();
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
    use crate::webhook::certs::parse_bundle;

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
        verify(&parse_bundle(serving).unwrap(), &parse_bundle(bundle).unwrap(), now())
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
}
