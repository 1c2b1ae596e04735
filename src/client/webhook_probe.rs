//! Whether our webhook registrations work, asked of the apiserver itself: a
//! server-side dry-run create (`dryRun=All`) of a Runner at one version.
//! At the storage version the apiserver calls the validating webhook
//! ([`VALIDATING_CONFIG`]; it declares no side effects, so dry runs
//! call it); at a version served through conversion, the conversion webhook
//! too. Nothing is stored. A Service with a ready endpoint proves nothing
//! (a wrong caBundle, a wrong path, a proxy in the way): the apiserver's
//! answer does, and its message says why.
//!
//! ```text
//!  dry_run (the call) ─► judge (pure: answer ─► Outcome: which registration,
//!                               the cause, what it breaks, the fix)
//! ```
//!
//! diagnose, `install --with-manager --wait`, e2e and a local manager's
//! start all ask through here.

use std::time::{Duration, Instant};

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, PostParams};

use crate::api::{GROUP, VERSION};
use crate::manifests::{MANAGER_NAME, MANAGER_NAMESPACE};
use crate::webhook::{PATH, SECRET, VALIDATE_PATH, VALIDATING_CONFIG};

/// Which of our registrations the apiserver could not call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Registration {
    /// The CRD's `spec.conversion` webhook.
    Conversion,
    /// The ValidatingWebhookConfiguration [`VALIDATING_CONFIG`].
    Validation,
}

impl Registration {
    /// `the CRD's conversion webhook`, for messages.
    pub fn display(self) -> String {
        match self {
            Registration::Conversion => "the Runner CRD's conversion webhook".into(),
            Registration::Validation => format!("the validating webhook {VALIDATING_CONFIG}"),
        }
    }

    /// What the failure breaks, for someone deciding how urgent it is.
    pub fn effect(self, version: &str) -> String {
        match self {
            Registration::Conversion => format!(
                "every read and write of Runners at {version} fails (clients still on {version}), and so does every \
                 read of a Runner stored at a version other than the one asked for"
            ),
            Registration::Validation => {
                "every Runner create and update is refused (failurePolicy Fail); deletes still go through"
                    .into()
            }
        }
    }

    fn path(self) -> &'static str {
        match self {
            Registration::Conversion => PATH,
            Registration::Validation => VALIDATE_PATH,
        }
    }
}

/// Why the apiserver could not call it, read from its own message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cause {
    /// The serving certificate does not verify against the caBundle.
    Tls,
    /// The Service has no ready endpoint.
    NoEndpoints,
    /// The Service does not exist.
    NoService,
    /// Nothing listens at the address.
    ConnectionRefused,
    /// No answer in time.
    Timeout,
    /// Something answered, but not at the registration's path (404).
    PathNotFound,
    /// The webhook answered that it is starting (its index not synced).
    Starting,
    /// Anything else: the apiserver's message says it.
    Other,
}

impl Cause {
    /// Pure: the cause the apiserver's message names.
    pub fn of(message: &str) -> Cause {
        let m = message.to_ascii_lowercase();
        let has = |needles: &[&str]| needles.iter().any(|n| m.contains(n));
        if has(&["x509:", "tls:", "certificate"]) {
            Cause::Tls
        } else if has(&["no endpoints available"]) {
            Cause::NoEndpoints
        } else if m.contains("service \"") && m.contains("not found") {
            Cause::NoService
        } else if has(&["connection refused"]) {
            Cause::ConnectionRefused
        } else if has(&["deadline exceeded", "timeout", "timed out"]) {
            Cause::Timeout
        } else if has(&["could not find the requested resource", "404"]) {
            Cause::PathNotFound
        } else if has(&["starting"]) {
            Cause::Starting
        } else {
            Cause::Other
        }
    }

    /// A few words for the message.
    pub fn display(self) -> &'static str {
        match self {
            Cause::Tls => "its certificate does not verify against the registration's caBundle",
            Cause::NoEndpoints => "its Service has no ready endpoint",
            Cause::NoService => "its Service does not exist",
            Cause::ConnectionRefused => "nothing listens where it points",
            Cause::Timeout => "it did not answer in time",
            Cause::PathNotFound => "what answers there does not serve its path (404)",
            Cause::Starting => "it is starting",
            Cause::Other => "the apiserver could not call it",
        }
    }
}

/// One registration the apiserver could not call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    pub registration: Registration,
    /// The version the dry run was made at.
    pub version: String,
    pub cause: Cause,
    /// The apiserver's own message.
    pub message: String,
}

impl Failure {
    /// One sentence: which registration, why, what it breaks.
    pub fn describe(&self) -> String {
        format!(
            "{} fails ({}): {}",
            self.registration.display(),
            self.cause.display(),
            self.registration.effect(&self.version)
        )
    }

    /// The fix: see [`fix`].
    pub fn fix(&self, url: Option<&str>) -> String {
        fix(self.registration, self.cause, url)
    }
}

/// Pure: how to make `registration` answer again, by `cause`. `url` is
/// where it points when that is a URL (a manager running as a process),
/// `None` for the in-cluster Service. The alternatives are always the
/// same two: serve them from this machine, or go back to no webhooks.
pub fn fix(registration: Registration, cause: Cause, url: Option<&str>) -> String {
    let ns = MANAGER_NAMESPACE;
    let back = "or serve only the storage version, with no webhooks: kubectl runner install";
    if let Some(url) = url {
        return format!(
            "start the local manager that serves {url} again (kubectl runner run-manager --local-webhooks \
             --take-over), or put the registrations back: kubectl runner diagnose --fix; {back}"
        );
    }
    let first = match cause {
        Cause::Tls => format!(
            "the in-cluster manager's keeper writes the caBundle from Secret {ns}/{SECRET}: see why it does not \
             (kubectl -n {ns} logs deployment/{MANAGER_NAME})"
        ),
        Cause::PathNotFound => format!(
            "the manager behind the Service does not serve {}: install a current image (kubectl runner install \
             --with-manager --image IMAGE)",
            registration.path()
        ),
        _ => format!(
            "make the in-cluster manager ready (kubectl -n {ns} rollout status deployment/{MANAGER_NAME}; every \
             replica serves {PATH} and {VALIDATE_PATH})"
        ),
    };
    format!(
        "{first}; or serve them from this machine: kubectl runner run-manager --local-webhooks --take-over; {back}"
    )
}

/// What one dry run says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Through every webhook it needed.
    Passed,
    /// The apiserver could not call one of ours.
    Failed(Failure),
    /// The apiserver does not serve Runners at this version (yet: a version
    /// the CRD has just begun to serve answers 404 for a moment).
    Unserved,
    /// Refused for a reason that says nothing about the webhooks (no
    /// permission to create Runners there, no such namespace): why.
    NotChecked(String),
}

/// Pure: the outcome of a dry-run create at `version`, from the
/// apiserver's answer (`None`: it went through).
pub fn judge(version: &str, answer: Option<(u16, &str)>) -> Outcome {
    let Some((code, message)) = answer else { return Outcome::Passed };
    let registration = if code >= 500 && message.contains("conversion webhook for") {
        Some(Registration::Conversion)
    } else if code >= 500 && message.contains("webhook") {
        Some(Registration::Validation)
    } else {
        None
    };
    match registration {
        Some(registration) => Outcome::Failed(Failure {
            registration,
            version: version.into(),
            cause: Cause::of(message),
            message: message.into(),
        }),
        None if code == 404 && !message.contains("namespaces") => Outcome::Unserved,
        None if code == 403 => Outcome::NotChecked(format!(
            "may not create Runners, even as a dry run, so whether the webhooks answer was not checked ({message})"
        )),
        None => Outcome::NotChecked(format!("the dry run was refused for another reason: {message}")),
    }
}

/// Pure: the versions to dry-run against `crd`: the storage version, then
/// each other served one when the CRD converts through a webhook.
pub fn versions(crd: Option<&CustomResourceDefinition>) -> Vec<String> {
    let Some(crd) = crd else { return vec![VERSION.into()] };
    let storage = crd.spec.versions.iter().find(|v| v.storage).map_or(VERSION, |v| v.name.as_str());
    let converts = crd.spec.conversion.as_ref().is_some_and(|c| c.strategy == "Webhook");
    let others = crd.spec.versions.iter().filter(|v| converts && v.served && v.name != storage);
    std::iter::once(storage.to_string()).chain(others.map(|v| v.name.clone())).collect()
}

/// The call: a dry-run create in `namespace` of a Runner at `version` that
/// every version can hold (no host, so our webhook has nothing to refuse).
pub async fn dry_run(client: &kube::Client, namespace: &str, version: &str) -> kube::Result<()> {
    let gvk = GroupVersionKind::gvk(GROUP, version, "Runner");
    let api: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), namespace, &ApiResource::from_gvk_with_plural(&gvk, "runners"));
    let runner: DynamicObject = serde_json::from_value(serde_json::json!({
        "apiVersion": format!("{GROUP}/{version}"),
        "kind": "Runner",
        "metadata": { "generateName": "webhook-probe-" },
        "spec": { "image": "probe:1", "replicas": 1, "port": 8080 },
    }))
    .expect("the probe Runner is an object");
    let params = PostParams { dry_run: true, ..Default::default() };
    api.create(&params, &runner).await.map(drop)
}

/// One dry run, judged. An error reaching the apiserver at all is "not checked".
pub async fn probe(client: &kube::Client, namespace: &str, version: &str) -> Outcome {
    match dry_run(client, namespace, version).await {
        Ok(()) => judge(version, None),
        Err(kube::Error::Api(s)) => judge(version, Some((s.code, &s.message))),
        Err(e) => Outcome::NotChecked(crate::error::describe_kube(&e)),
    }
}

/// Probes each of `versions` until none fails or is unserved, or `timeout`
/// passes: a registration just written, or a manager just Ready, takes
/// effect in the apiserver a moment later. Returns the last outcomes.
pub async fn until_answered(
    client: &kube::Client,
    namespace: &str,
    versions: &[String],
    timeout: Duration,
) -> Vec<Outcome> {
    let deadline = Instant::now() + timeout;
    loop {
        let mut outcomes = vec![];
        for v in versions {
            outcomes.push(probe(client, namespace, v).await);
        }
        let settled = outcomes.iter().all(|o| matches!(o, Outcome::Passed | Outcome::NotChecked(_)));
        if settled || Instant::now() >= deadline {
            return outcomes;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

#[cfg(test)]
#[path = "webhook_probe_tests.rs"]
mod tests;
