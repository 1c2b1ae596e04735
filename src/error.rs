//! The error pieces every layer shares, below them all: the shape of a
//! failed API call ([`ApiError`]), the readings of kube's errors
//! ([`describe_kube`], [`is_not_found`], [`is_rejection`], ...), and
//! [`Error`], what the shared client code (`client`, `service_account`)
//! fails with. Each program on top has its own error, converted at its
//! edge: `manager::Error` (with bounded metric labels), `diagnose::fix::Error`,
//! `e2e::Error`, and `cli::Error`, the only one that adds advice ("pass
//! --yes"), because only the CLI renders.

use std::borrow::Cow;

/// Result with the shared [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// An API call that failed: what was being done, to which object. Every
/// layer's error has an `Api` variant holding one, so the CLI renders an API
/// failure the same way whichever layer it came from.
#[derive(Debug, thiserror::Error)]
#[error("cannot {op} {kind}{}: {source}", object(.namespace, .name), source = describe_kube(.source))]
pub struct ApiError {
    /// The verb-phrase of the failed operation: "apply", "delete", "patch status of".
    pub op: &'static str,
    /// The object's kind; borrowed for the fixed kinds, owned for the
    /// ones `install` and `uninstall` read from their manifests.
    pub kind: Cow<'static, str>,
    pub namespace: String,
    pub name: String,
    #[source]
    pub source: Box<kube::Error>,
}

impl ApiError {
    /// True when the object moved on since it was read: a 409 Conflict, or
    /// a JSON patch whose `test` precondition failed. Worth a prompt re-read.
    pub fn is_conflict(&self) -> bool {
        matches!(self.source.as_ref(), kube::Error::Api(s) if s.is_conflict()) || is_failed_test(&self.source)
    }
}

/// `Error::api(op, kind, ns, name, e)` for every layer's error (and for
/// [`ApiError`] itself): each can be built from an [`ApiError`], and this is
/// the one constructor they share.
pub trait FromApi: From<ApiError> {
    /// The error for `op` on the named object.
    fn api(
        op: &'static str,
        kind: impl Into<Cow<'static, str>>,
        ns: &str,
        name: &str,
        source: kube::Error,
    ) -> Self {
        let (namespace, name) = (ns.to_string(), name.to_string());
        ApiError { op, kind: kind.into(), namespace, name, source: Box::new(source) }.into()
    }
}

impl<E: From<ApiError>> FromApi for E {}

/// What the client code shared by every program fails with: reads of
/// Runners and children, the wait for the CRD, and acting as a
/// ServiceAccount. No advice here: the CLI adds it when it renders.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Api(#[from] ApiError),

    #[error("the Runner CRD ({}) is not installed", crate::api::CRD_NAME)]
    CrdMissing,

    #[error("the CRD {} is not Established after {}s", crate::api::CRD_NAME, .after.as_secs())]
    CrdNotEstablished { after: std::time::Duration },

    #[error("waiting for the CRD {crd}: {0}", crd = crate::api::CRD_NAME)]
    WaitCrd(String),

    /// `--as-service-account`, refused before any request is made as it.
    #[error("{message}")]
    CannotImpersonate {
        /// `namespace/name`.
        service_account: String,
        /// Who lacks what, and the grant that fixes it.
        message: String,
    },
}

/// One readable line for an API error: RBAC "forbidden" keeps the apiserver's
/// message, which already names the user, the verb and the resource. The
/// manager writes it into Runner status and Events too, where the pointer to
/// `diagnose` serves the same reader.
pub fn describe_kube(e: &kube::Error) -> String {
    match e {
        kube::Error::Api(s) if s.is_forbidden() => {
            format!("{} (check the ServiceAccount's RBAC: `kubectl runner diagnose`)", s.message)
        }
        kube::Error::Api(s) => format!("{} ({}, HTTP {})", s.message, s.reason, s.code),
        other => other.to_string(),
    }
}

/// Which object(s) an [`ApiError`] was about: ` NS/NAME`, ` NAME` (a
/// cluster-scoped object), ` in namespace NS` or ` in all namespaces` (`*`)
/// for a list, nothing for a review; never a stray `/`.
fn object(namespace: &str, name: &str) -> String {
    match (namespace, name) {
        ("", "") => String::new(),
        ("", name) => format!(" {name}"),
        ("*", "") => " in all namespaces".into(),
        (ns, "") => format!(" in namespace {ns}"),
        (ns, name) => format!(" {ns}/{name}"),
    }
}

/// True when `e` is an apiserver 404.
pub fn is_not_found(e: &kube::Error) -> bool {
    // By code: a resource the apiserver does not serve (no CRD) answers a
    // plain-text "404 page not found", which has no reason to match.
    matches!(e, kube::Error::Api(s) if s.code == 404)
}

/// True when `e` is an apiserver 409: the object moved on since it was
/// read (a write guarded by resourceVersion lost), or it already exists.
pub fn is_conflict(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 409)
}

/// A JSON patch whose `test` operation failed. The apiserver answers 422
/// with its generic message (the failed path is only in the causes), where a
/// validation error names the object and the field.
pub fn is_failed_test(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s)
        if s.code == 422 && s.message.starts_with("the server rejected our request due to an error in our request"))
}

/// The apiserver refuses the request itself (invalid, forbidden, malformed):
/// retrying the same request cannot succeed until something else changes.
pub fn is_rejection(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if matches!(s.code, 400 | 403 | 422)) && !is_failed_test(e)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn api_errors_name_the_object_or_the_list_without_a_stray_slash() {
        let gone =
            || kube::Error::Api(Box::new(kube::core::Status::failure("gone", "NotFound").with_code(404)));
        let cases = [
            (("get", "app", "web"), "cannot get Runner app/web: gone (NotFound, HTTP 404)"),
            (("list", "app", ""), "cannot list Runner in namespace app: gone (NotFound, HTTP 404)"),
            (("list", "*", ""), "cannot list Runner in all namespaces: gone (NotFound, HTTP 404)"),
            (("get", "", "web"), "cannot get Runner web: gone (NotFound, HTTP 404)"),
            (("create", "", ""), "cannot create Runner: gone (NotFound, HTTP 404)"),
        ];
        for ((op, ns, name), want) in cases {
            assert_eq!(Error::api(op, "Runner", ns, name, gone()).to_string(), want);
        }
    }

    #[test]
    fn a_conflict_or_a_failed_test_is_a_conflict_and_a_rejection_is_not() {
        let status = |code, reason: &str, message: &str| {
            kube::Error::Api(Box::new(kube::core::Status::failure(message, reason).with_code(code)))
        };
        let failed_test = "the server rejected our request due to an error in our request";
        let conflict = ApiError::api("patch", "Runner", "app", "web", status(409, "Conflict", "changed"));
        let test = ApiError::api("patch", "Runner", "app", "web", status(422, "Invalid", failed_test));
        let invalid = ApiError::api("patch", "Runner", "app", "web", status(422, "Invalid", "spec.x: bad"));
        assert!(conflict.is_conflict() && test.is_conflict() && !invalid.is_conflict());
        assert!(is_rejection(&invalid.source) && !is_rejection(&test.source));
    }

    #[test]
    fn the_shared_errors_state_the_fact_and_leave_the_advice_to_the_cli() {
        assert_eq!(
            Error::CrdNotEstablished { after: Duration::from_secs(30) }.to_string(),
            "the CRD runners.lab.cloudlab.training is not Established after 30s"
        );
        assert_eq!(
            Error::CrdMissing.to_string(),
            "the Runner CRD (runners.lab.cloudlab.training) is not installed"
        );
    }
}
