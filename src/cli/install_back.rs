//! `install` without `--with-manager` on a cluster that had the webhooks:
//! the way back to the local loop. Nothing converts without the manager, so
//! the CRD may serve the storage version alone; where every Runner is
//! stored at it (`status.storedVersions`), going back loses nothing, and
//! install says what it changes and does it once confirmed. Where another
//! version is still stored, `kubectl runner migrate` has to move them first.
//!
//! ```text
//!  live CRD, configuration ─► plan (pure) ─► Apply | Refuse(why) | Back(changes)
//!  Back ─► confirm (--yes, or a prompt) ─► go_back: the CRD by a guarded write,
//!                                          then the configuration deleted
//! ```

use k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceConversion, CustomResourceDefinition,
};
use kube::api::{Api, DeleteParams, PostParams};

use super::error::{Error, Result};
use crate::api::{CRD_NAME, VERSION};
use crate::client::guarded::{self, Step};
use crate::error::{FromApi, is_not_found};
use crate::webhook::VALIDATING_CONFIG;
use crate::webhook::local::SAVED_ANNOTATION;

/// What install without the manager does to what it finds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Plan {
    /// Nothing of the webhooks to take back: apply as planned.
    Apply,
    /// Take the webhooks back first: these changes, in words.
    Back(Vec<String>),
    /// Not now: why, and what to run first.
    Refuse(String),
}

/// How the local loop runs with webhooks, named wherever install goes back.
const LOCAL_LOOP: &str = "for the local loop with both webhooks served from this machine: kubectl runner run-manager \
                          --local-webhooks";

/// Pure: what install without the manager does, given the live CRD and
/// whether the ValidatingWebhookConfiguration exists.
pub fn plan(live: Option<&CustomResourceDefinition>, validating: bool) -> Plan {
    let Some(live) = live else {
        return if validating { Plan::Back(vec![removed_validating()]) } else { Plan::Apply };
    };
    if live.metadata.annotations.as_ref().is_some_and(|a| a.contains_key(SAVED_ANNOTATION)) {
        return Plan::Refuse(
            "a local manager (run-manager --local-webhooks) serves the Runner webhooks and puts them back when it \
             stops: stop it first (Ctrl-C), or, if it is gone, kubectl runner diagnose --fix; then install again"
                .into(),
        );
    }
    let converts = live.spec.conversion.as_ref().is_some_and(|c| c.strategy == "Webhook");
    let stored = live.status.as_ref().and_then(|s| s.stored_versions.clone()).unwrap_or_default();
    let old: Vec<&str> = stored.iter().map(String::as_str).filter(|v| *v != VERSION).collect();
    if !old.is_empty() {
        let old = old.join(", ");
        let with_manager = "kubectl runner install --with-manager --image IMAGE";
        return Plan::Refuse(if converts {
            format!(
                "Runners may still be stored as {old} (status.storedVersions), which only the conversion webhook \
                 can serve as {VERSION}; install without the manager would remove it and leave them unreadable. \
                 First: kubectl runner migrate (rewrites every Runner as {VERSION} and prunes storedVersions), \
                 then install again; or keep the webhook: {with_manager}"
            )
        } else {
            format!(
                "Runners are stored as {old}, which only a conversion can serve as {VERSION}; install without the \
                 manager serves {VERSION} alone and would leave them unreadable. Missing: the conversion webhook: \
                 `{with_manager}` (then `kubectl runner migrate` moves them to {VERSION})"
            )
        });
    }
    let mut changes = vec![];
    let others: Vec<&str> = live
        .spec
        .versions
        .iter()
        .filter(|v| v.served && v.name != VERSION)
        .map(|v| v.name.as_str())
        .collect();
    if !others.is_empty() {
        changes.push(format!(
            "the Runner CRD stops serving {} (clients still asking for it get 404)",
            others.join(", ")
        ));
    }
    if converts {
        changes.push(format!(
            "the Runner CRD's conversion webhook is removed (every Runner is stored as {VERSION})"
        ));
    }
    if validating {
        changes.push(removed_validating());
    }
    if changes.is_empty() { Plan::Apply } else { Plan::Back(changes) }
}

fn removed_validating() -> String {
    format!(
        "the ValidatingWebhookConfiguration {VALIDATING_CONFIG} is deleted (a host another Runner holds is no \
         longer refused at write time)"
    )
}

/// The text shown before asking: each change, then how to keep them.
pub fn describe(changes: &[String]) -> String {
    let mut out = String::from("install without --with-manager takes back the in-cluster webhooks:\n");
    for c in changes {
        out.push_str(&format!("  - {c}\n"));
    }
    out.push_str(&format!(
        "The in-cluster manager, if installed, keeps running, and nothing calls its webhooks. To keep them: \
         kubectl runner install --with-manager --image IMAGE; {LOCAL_LOOP}.\n"
    ));
    out
}

/// The question asked (or answered by `--yes`).
pub const QUESTION: &str = "take back the Runner webhooks (see above)?";

/// Pure: the CRD without its webhooks: the storage version served alone,
/// no conversion. None when it already is.
pub fn without_webhooks(mut crd: CustomResourceDefinition) -> Option<CustomResourceDefinition> {
    let converts = crd.spec.conversion.as_ref().is_some_and(|c| c.strategy != "None");
    let others_served = crd.spec.versions.iter().any(|v| v.served && v.name != VERSION);
    if !converts && !others_served {
        return None;
    }
    crd.spec.conversion = Some(CustomResourceConversion { strategy: "None".into(), webhook: None });
    crd.spec.versions.iter_mut().for_each(|v| v.served = v.name == VERSION);
    Some(crd)
}

/// Carries out [`Plan::Back`]: the CRD rewritten by a guarded write (a
/// Runner written meanwhile is judged again), then the configuration
/// deleted (gone already is fine).
pub async fn go_back(client: &kube::Client) -> Result<()> {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let err = |op, e| Error::api(op, "CustomResourceDefinition", "", CRD_NAME, e);
    let written = guarded::write(
        || crds.get_opt(CRD_NAME),
        |live| {
            Ok(match live.and_then(without_webhooks) {
                Some(crd) => Step::Write(crd),
                None => Step::Done(()),
            })
        },
        |crd| {
            let crds = crds.clone();
            async move { crds.replace(CRD_NAME, &PostParams::default(), &crd).await.map(drop) }
        },
    )
    .await;
    match written {
        Ok(()) => {}
        Err(guarded::Failed::Before(e)) => return Err(err("get", e)),
        Err(guarded::Failed::Write(e)) => return Err(err("update", e)),
        Err(guarded::Failed::KeptChanging) => {
            return Err(Error::InstallRefused(format!(
                "the CRD {CRD_NAME} kept changing under {} writes; run install again",
                guarded::ATTEMPTS
            )));
        }
    }
    let vwcs: Api<ValidatingWebhookConfiguration> = Api::all(client.clone());
    match vwcs.delete(VALIDATING_CONFIG, &DeleteParams::default()).await {
        Ok(_) => Ok(()),
        Err(e) if is_not_found(&e) => Ok(()),
        Err(e) => Err(Error::api("delete", "ValidatingWebhookConfiguration", "", VALIDATING_CONFIG, e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn live(stored: &[&str], strategy: &str) -> CustomResourceDefinition {
        let mut crd = crate::manifests::crd_with_webhook();
        crd.spec.conversion.as_mut().unwrap().strategy = strategy.into();
        if strategy == "None" {
            crd = crate::manifests::crd();
        }
        crd.status = Some(Default::default());
        crd.status.as_mut().unwrap().stored_versions = Some(stored.iter().map(|s| s.to_string()).collect());
        crd
    }

    #[test]
    fn nothing_of_the_webhooks_there_applies_as_planned() {
        assert_eq!(plan(None, false), Plan::Apply, "no CRD yet");
        assert_eq!(plan(Some(&live(&[VERSION], "None")), false), Plan::Apply);
    }

    #[test]
    fn with_every_runner_at_the_storage_version_it_goes_back_saying_what_changes() {
        let Plan::Back(changes) = plan(Some(&live(&[VERSION], "Webhook")), true) else { panic!() };
        assert_eq!(changes.len(), 3, "{changes:?}");
        assert!(changes[0].contains("stops serving v1alpha1"), "{changes:?}");
        assert!(changes[1].contains("conversion webhook is removed"), "{changes:?}");
        assert!(changes[2].contains(VALIDATING_CONFIG), "{changes:?}");
        let text = describe(&changes);
        assert!(text.contains("run-manager --local-webhooks"), "{text}");
        assert_eq!(plan(None, true), Plan::Back(vec![removed_validating()]), "a configuration alone");
    }

    #[test]
    fn with_another_version_stored_it_refuses_naming_migrate_first() {
        let Plan::Refuse(why) = plan(Some(&live(&["v1alpha1", VERSION], "Webhook")), true) else { panic!() };
        assert!(why.contains("stored as v1alpha1") && why.contains("First: kubectl runner migrate"), "{why}");
        let Plan::Refuse(why) = plan(Some(&live(&["v1alpha1", VERSION], "None")), false) else { panic!() };
        assert!(
            why.starts_with("Runners are stored as v1alpha1,") && why.contains("install --with-manager"),
            "{why}"
        );
    }

    #[test]
    fn a_crd_a_local_manager_holds_is_refused_until_it_lets_go() {
        let mut crd = live(&[VERSION], "Webhook");
        crd.metadata.annotations = Some([(SAVED_ANNOTATION.to_string(), "{}".to_string())].into());
        let Plan::Refuse(why) = plan(Some(&crd), true) else { panic!() };
        assert!(why.contains("stop it first"), "{why}");
    }

    #[test]
    fn the_crd_without_webhooks_serves_the_storage_version_alone_with_no_conversion() {
        let crd = without_webhooks(crate::manifests::crd_with_webhook()).expect("a write");
        assert_eq!(crd.spec.conversion.as_ref().unwrap().strategy, "None");
        assert!(crd.spec.conversion.as_ref().unwrap().webhook.is_none());
        assert!(crd.spec.versions.iter().all(|v| v.served == (v.name == VERSION)));
        assert_eq!(without_webhooks(crd), None, "nothing left to change");
    }
}
