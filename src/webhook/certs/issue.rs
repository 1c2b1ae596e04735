//! Making what a [`Plan`] asks for: ECDSA P-256 keys, a CA that may sign
//! only leaf certificates, and a serving certificate for the given names.
//! Both start a few minutes in the past, so an apiserver whose clock is
//! a little behind still accepts them.

use k8s_openapi::jiff::{SignedDuration, Timestamp};
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};

use super::{CaStep, Lifetimes, Material, Plan, delta, parse_pem_certs};

/// How far back certificates start (clock skew between the nodes).
const BACKDATE: SignedDuration = SignedDuration::from_mins(5);

fn at(t: Timestamp) -> time::OffsetDateTime {
    time::OffsetDateTime::from_unix_timestamp(t.as_second()).unwrap_or(time::OffsetDateTime::UNIX_EPOCH)
}

/// The material after `plan`, made at `now`: new keys where it says so,
/// the rest of `m` kept. Err only when a key or certificate cannot be made.
pub fn carry_out(
    plan: &Plan,
    now: Timestamp,
    m: &Material,
    names: &[String],
    life: &Lifetimes,
) -> Result<Material, rcgen::Error> {
    let mut out = m.clone();
    let live = |pem: &str| -> String {
        parse_pem_certs(pem)
            .iter()
            .filter(|c| c.not_after > now && c.is_ca)
            .map(|c| pem_of(&c.der))
            .collect::<String>()
    };
    match &plan.ca {
        CaStep::Keep if plan.expired_cas > 0 => out.ca_crt = live(&m.ca_crt),
        CaStep::Keep => {}
        CaStep::Rotate | CaStep::Replace(_) => {
            let (cert, key) = new_ca(now, life)?;
            let kept = if plan.ca == CaStep::Rotate { live(&m.ca_crt) } else { String::new() };
            out.ca_crt = cert + &kept;
            out.ca_key = key;
        }
    }
    if plan.serving.is_some() {
        let first_ca =
            parse_pem_certs(&out.ca_crt).into_iter().next().ok_or(rcgen::Error::CouldNotParseCertificate)?;
        let ca_key = KeyPair::from_pem(&out.ca_key)?;
        let issuer = Issuer::from_ca_cert_der(&first_ca.der.as_slice().into(), ca_key)?;
        let key = KeyPair::generate()?;
        let mut params = CertificateParams::new(names.to_vec())?;
        params
            .distinguished_name
            .push(DnType::CommonName, names.first().map_or("runner-webhook", |n| n.as_str()));
        params.is_ca = IsCa::ExplicitNoCa;
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        params.use_authority_key_identifier_extension = true;
        params.not_before = at(now - BACKDATE);
        // Never past the CA that signs it.
        params.not_after = at((now + delta(life.serving)).min(first_ca.not_after));
        out.tls_crt = params.signed_by(&key, &issuer)?.pem();
        out.tls_key = key.serialize_pem();
    }
    Ok(out)
}

/// A CA certificate and its key, both PEM.
fn new_ca(now: Timestamp, life: &Lifetimes) -> Result<(String, String), rcgen::Error> {
    let key = KeyPair::generate()?;
    let mut params = CertificateParams::default();
    params.distinguished_name = rcgen::DistinguishedName::new();
    params.distinguished_name.push(DnType::CommonName, "kubectl-runner conversion webhook CA");
    // Signs leaf certificates only.
    params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    params.not_before = at(now - BACKDATE);
    params.not_after = at(now + delta(life.ca));
    Ok((params.self_signed(&key)?.pem(), key.serialize_pem()))
}

/// A DER certificate as one PEM block.
fn pem_of(der: &[u8]) -> String {
    let lf = pem::EncodeConfig::new().set_line_ending(pem::LineEnding::LF);
    pem::encode_config(&pem::Pem::new("CERTIFICATE", der.to_vec()), lf)
}
