//! The conversion webhook's names as the install creates them, for the
//! conversion checks. Stands in for the webhook module's constants until
//! it lands, spelt as it spells them (`SERVICE`, `SECRET`, and `TLS_CRT`,
//! `CA_CRT` of its Secret layout), so the merge only changes the imports.

/// The namespace of the webhook's Service and Secret (the manager's).
pub use crate::manifests::MANAGER_NAMESPACE as NAMESPACE;

/// The Service in front of every manager replica's `/convert`.
pub const SERVICE: &str = "runner-webhook";

/// The Secret holding the CA and the serving certificate.
pub const SECRET: &str = "runner-webhook-tls";

/// The serving certificate (PEM) in [`SECRET`].
pub const TLS_CRT: &str = "tls.crt";

/// The CA bundle (PEM) in [`SECRET`], injected as the CRD's caBundle.
pub const CA_CRT: &str = "ca.crt";
