//! `kubectl runner install` without `--with-manager` on a cluster whose CRD
//! converts through the in-cluster webhook, against the real control plane:
//! with another version still stored it refuses naming migrate; with only
//! the storage version stored it says what it takes back, refuses without
//! a terminal or --yes (exit 2), and with --yes takes the webhooks back.
//!
//! The registrations are written here as `install --with-manager` writes
//! them (routed to a Service in the test's namespace); they and the CRD's
//! storedVersions are cluster-wide, so [`PutBackStored`] and
//! [`PutBackRegistrations`] put them back, also on a panic.

mod support;

use k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kubectl_runner::api::{CRD_NAME, Runner, RunnerSpec, VERSION};
use kubectl_runner::manifests::{conversion, runner_crd, validating_webhook_configuration};
use kubectl_runner::webhook::{Target, VALIDATING_CONFIG};
use serde_json::json;
use support::{PutBackRegistrations, TestNs, cli, ensure_crd, err, ok};

/// Sets the CRD's `status.storedVersions` (as a storage migration does).
async fn set_stored(client: &kube::Client, versions: &[&str]) {
    let crds = Api::<CustomResourceDefinition>::all(client.clone());
    let patch = Patch::Merge(json!({ "status": { "storedVersions": versions } }));
    crds.patch_status(CRD_NAME, &PatchParams::default(), &patch).await.expect("set storedVersions");
}

/// Puts `status.storedVersions` back to the storage version alone on drop.
struct PutBackStored;

impl Drop for PutBackStored {
    fn drop(&mut self) {
        let _ = std::thread::spawn(|| {
            let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
            rt.block_on(async { set_stored(&support::client().await, &[VERSION]).await });
        })
        .join();
    }
}

/// The registrations as `install --with-manager` leaves them: every
/// version served, conversion and validation routed to a Service.
async fn with_webhooks(client: &kube::Client, ns: &str) {
    let target = Target::Service { namespace: ns.into() };
    let apply = PatchParams::apply("kubectl-runner-tests").force();
    let vwcs = Api::<ValidatingWebhookConfiguration>::all(client.clone());
    let vwc = validating_webhook_configuration(&target, None);
    vwcs.patch(VALIDATING_CONFIG, &apply, &Patch::Apply(&vwc)).await.expect("apply the configuration");
    let mut crd = runner_crd();
    crd.spec.versions.iter_mut().for_each(|v| v.served = true);
    crd.spec.conversion = Some(conversion(&target, None));
    let crds = Api::<CustomResourceDefinition>::all(client.clone());
    crds.patch(CRD_NAME, &apply, &Patch::Apply(&crd)).await.expect("convert through the Service");
}

async fn live(client: &kube::Client) -> (CustomResourceDefinition, Option<ValidatingWebhookConfiguration>) {
    let crd = Api::<CustomResourceDefinition>::all(client.clone()).get(CRD_NAME).await.unwrap();
    let vwc =
        Api::<ValidatingWebhookConfiguration>::all(client.clone()).get_opt(VALIDATING_CONFIG).await.unwrap();
    (crd, vwc)
}

fn converts(crd: &CustomResourceDefinition) -> bool {
    crd.spec.conversion.as_ref().is_some_and(|c| c.strategy == "Webhook")
}

#[tokio::test]
async fn install_without_the_manager_goes_back_only_where_every_runner_is_at_the_storage_version() {
    let ns = TestNs::new("install-back").await;
    ensure_crd(&ns.client).await;
    let _registrations = PutBackRegistrations::guarded(&ns.client).await;
    let _stored = PutBackStored;
    with_webhooks(&ns.client, &ns.name).await;

    // Another version still stored: refused, naming migrate, nothing changed.
    set_stored(&ns.client, &["v1alpha1", VERSION]).await;
    let o = cli(&["install", "--yes"]).await;
    assert_eq!(o.status.code(), Some(1), "{}", err(&o));
    assert!(
        err(&o).contains("stored as v1alpha1") && err(&o).contains("kubectl runner migrate"),
        "{}",
        err(&o)
    );
    let (crd, vwc) = live(&ns.client).await;
    assert!(converts(&crd) && vwc.is_some(), "nothing changed");
    set_stored(&ns.client, &[VERSION]).await;

    // No terminal and no --yes: says what it would change, refuses with 2.
    let o = cli(&["install"]).await;
    assert_eq!(o.status.code(), Some(2), "{}", err(&o));
    let e = err(&o);
    for want in ["stops serving v1alpha1", "conversion webhook is removed", VALIDATING_CONFIG, "--yes"] {
        assert!(e.contains(want), "{want:?} in {e}");
    }
    assert!(e.contains("run-manager --local-webhooks"), "{e}");
    let (crd, vwc) = live(&ns.client).await;
    assert!(converts(&crd) && vwc.is_some(), "nothing changed");

    // --yes: back to the storage version alone, no webhooks.
    let o = cli(&["install", "--yes"]).await;
    ok(&o, "install --yes");
    let (crd, vwc) = live(&ns.client).await;
    assert!(!converts(&crd), "{:?}", crd.spec.conversion);
    assert!(crd.spec.versions.iter().all(|v| v.served == (v.name == VERSION)), "{:?}", crd.spec.versions);
    assert!(vwc.is_none(), "the configuration is deleted");
    // Runner writes need no webhook now.
    let runner = Runner::new("after", RunnerSpec::new("nginx:1.27"));
    ns.api::<Runner>().create(&PostParams::default(), &runner).await.expect("a create with no webhooks");
    // Again: nothing left to take back.
    ok(&cli(&["install"]).await, "install again");
}
