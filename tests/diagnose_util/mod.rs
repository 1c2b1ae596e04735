//! Helpers for the diagnose tests: run the real binary with `-o json`, and
//! never leave a Runner holding its finalizer in a namespace being deleted
//! (without a manager that namespace would stay Terminating forever, which is
//! exactly what diagnose reports).
#![allow(dead_code)]

use k8s_openapi::api::rbac::v1::{PolicyRule, Role, RoleBinding};
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use kubectl_runner::api::{FINALIZER, Runner, RunnerSpec};
use serde_json::{Value, json};

use crate::support::TestNs;

/// Exit code and parsed JSON of `kubectl runner diagnose ARGS`, run
/// in-process against the cluster in $KUBECONFIG. (Not the binary: the
/// shared target directory's binary may be another branch's build.)
pub async fn diagnose(args: &[&str]) -> (u8, Value) {
    match try_diagnose(args).await {
        Ok(v) => v,
        Err(e) => panic!("diagnose {args:?} failed: {e}"),
    }
}

/// Like [`diagnose`], but returns the error that would exit 1 (or 2).
pub async fn try_diagnose(args: &[&str]) -> kubectl_runner::cli::Result<(u8, Value)> {
    use clap::Parser;
    use kubectl_runner::cli::{Cli, Command, diagnose::execute};
    let argv = ["kubectl-runner", "diagnose"].into_iter().chain(args.iter().copied());
    let cli = Cli::try_parse_from(argv).map_err(|e| kubectl_runner::cli::Error::Invalid(e.to_string()))?;
    let Command::Diagnose(a) = cli.command else { unreachable!("parsed as diagnose") };
    let ctx = cli.globals.connect().await?;
    let outcome = execute(&ctx, &a).await?;
    let text = kubectl_runner::cli::output::diagnose::json(&outcome.report);
    let json = serde_json::from_str(&text).expect("the report is JSON");
    Ok((outcome.exit_code(), json))
}

/// The findings with this code.
pub fn with_code<'a>(report: &'a Value, code: &str) -> Vec<&'a Value> {
    report["findings"].as_array().unwrap().iter().filter(|f| f["code"] == code).collect()
}

/// Errors and warnings (what "no findings" means; notes are allowed).
pub fn problems(report: &Value) -> Vec<&Value> {
    report["findings"].as_array().unwrap().iter().filter(|f| f["severity"] != "info").collect()
}

/// Message plus evidence, for `contains` assertions.
pub fn text(f: &Value) -> String {
    let mut s = f["message"].as_str().unwrap_or_default().to_string();
    for e in f["evidence"].as_array().into_iter().flatten() {
        s.push('\n');
        s.push_str(e.as_str().unwrap_or_default());
    }
    s
}

/// Creates a Runner, optionally already carrying our finalizer (as if a
/// manager had seen it once).
pub async fn create_runner(ns: &TestNs, name: &str, spec: RunnerSpec, finalizer: bool) -> Runner {
    let mut r = Runner::new(name, spec);
    if finalizer {
        r.metadata.finalizers = Some(vec![FINALIZER.into()]);
    }
    ns.api::<Runner>().create(&PostParams::default(), &r).await.expect("create Runner")
}

pub fn spec(image: &str) -> RunnerSpec {
    RunnerSpec::new(image)
}

/// A ServiceAccount `name` in the test namespace, bound to a Role with
/// exactly `rules` there.
pub async fn service_account_with(ns: &TestNs, name: &str, rules: Vec<PolicyRule>) {
    let pp = PostParams::default();
    let sa: k8s_openapi::api::core::v1::ServiceAccount =
        serde_json::from_value(json!({ "metadata": { "name": name } })).unwrap();
    ns.api::<k8s_openapi::api::core::v1::ServiceAccount>().create(&pp, &sa).await.expect("create SA");
    let role = Role { metadata: meta(name), rules: Some(rules) };
    ns.api::<Role>().create(&pp, &role).await.expect("create Role");
    let rb: RoleBinding = serde_json::from_value(json!({
        "metadata": { "name": name },
        "roleRef": { "apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name },
        "subjects": [{ "kind": "ServiceAccount", "name": name, "namespace": ns.name }],
    }))
    .unwrap();
    ns.api::<RoleBinding>().create(&pp, &rb).await.expect("create RoleBinding");
}

fn meta(name: &str) -> k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
    k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
        name: Some(name.into()),
        ..Default::default()
    }
}

/// Every rule the manager needs, in whatever namespace it is bound: the
/// watched ones and the Lease ones (a manager's Lease lives in its own
/// ServiceAccount's namespace).
pub fn manager_rules() -> Vec<PolicyRule> {
    use kubectl_runner::rbac::{Scope, policy_rules};
    let mut rules = policy_rules(Scope::Watched);
    rules.extend(policy_rules(Scope::ManagerNamespace));
    rules
}

/// Declared after the [`TestNs`], so it drops first: removes our finalizer
/// from every Runner left in the namespace, so the namespace can go.
pub struct ReleaseFinalizers(pub String);

impl Drop for ReleaseFinalizers {
    fn drop(&mut self) {
        let ns = self.0.clone();
        let _ = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
            rt.block_on(async move {
                let client = crate::support::client().await;
                let api: Api<Runner> = Api::namespaced(client, &ns);
                let Ok(list) = api.list(&ListParams::default()).await else { return };
                for r in list.items {
                    let name = r.metadata.name.clone().unwrap_or_default();
                    let patch = json!({ "metadata": { "finalizers": null } });
                    let _ = api.patch(&name, &PatchParams::default(), &Patch::Merge(&patch)).await;
                }
            });
        })
        .join();
    }
}

/// Waits until the RBAC authorizer answers "allowed" for `verb resource` as
/// the ServiceAccount (new Roles reach its cache within moments).
pub async fn wait_rbac(ns: &TestNs, sa: &str, verb: &str, resource: &str) {
    use k8s_openapi::api::authorization::v1::SubjectAccessReview;
    let api: Api<SubjectAccessReview> = Api::all(ns.client.clone());
    let review: SubjectAccessReview = serde_json::from_value(json!({ "spec": {
        "user": format!("system:serviceaccount:{}:{sa}", ns.name),
        "groups": ["system:serviceaccounts", format!("system:serviceaccounts:{}", ns.name)],
        "resourceAttributes": { "namespace": ns.name, "verb": verb, "resource": resource } } }))
    .unwrap();
    crate::support::wait_for("the Role to take effect", std::time::Duration::from_secs(30), || {
        let (api, review) = (api.clone(), review.clone());
        async move {
            let r = api.create(&PostParams::default(), &review).await.ok()?;
            r.status.filter(|s| s.allowed).map(|_| ())
        }
    })
    .await;
}
