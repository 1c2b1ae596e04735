//! `diagnose` as the e2e oracle: after each step, the namespace must show no
//! error findings. With an in-process manager the installation checks
//! (manager Deployment, its ServiceAccount's RBAC) do not apply, so only the
//! Runner-level rules count; with `--use-running-manager` every rule counts,
//! permissions included.

use std::time::Duration;

use crate::diagnose::{self, Severity};

/// Error findings in `ns`, as "code: message" lines; empty means healthy.
pub async fn errors(client: &kube::Client, ns: &str, running_manager: bool) -> Vec<String> {
    let req = diagnose::Request {
        namespaces: vec![ns.to_string()],
        name: None,
        service_account: None,
        thresholds: Default::default(),
        churn_window: Duration::ZERO,
        observe: Duration::ZERO,
    };
    let (_, report) = diagnose::diagnose(client, &req).await;
    report
        .findings
        .iter()
        .filter(|f| f.severity == Severity::Error && (running_manager || !f.code.group().is_installation()))
        .map(|f| format!("{}: {}", f.code.as_str(), f.message))
        .collect()
}
