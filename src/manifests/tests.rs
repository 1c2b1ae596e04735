//! The generated manifests, checked without a cluster.

use super::*;

#[test]
fn everything_generated_carries_the_installed_by_label() {
    for m in all(Some("img"), &RbacScope::Namespaces(vec!["a".into()])) {
        let labels = m.object.metadata.labels.clone().unwrap_or_default();
        assert_eq!(
            labels.get(INSTALLED_BY_LABEL).map(String::as_str),
            Some(INSTALLED_BY_VALUE),
            "{}",
            m.describe()
        );
    }
}

#[test]
fn namespace_scoped_rbac_has_a_role_per_namespace_and_no_cluster_role_but_the_webhooks() {
    let ms = rbac(&RbacScope::Namespaces(vec!["a".into(), "b".into()]));
    let kinds: Vec<String> = ms.iter().map(|m| m.describe()).collect();
    assert!(kinds.contains(&"Role a/runner-manager".to_string()), "{kinds:?}");
    assert!(kinds.contains(&"RoleBinding b/runner-manager".to_string()), "{kinds:?}");
    let cluster: Vec<&String> = kinds.iter().filter(|k| k.starts_with("ClusterRole")).collect();
    assert_eq!(cluster, ["ClusterRole/runner-webhook", "ClusterRoleBinding/runner-webhook"], "{kinds:?}");
    let role = ms.iter().find(|m| m.describe() == "ClusterRole/runner-webhook").unwrap();
    assert_eq!(
        role.object.data["rules"],
        serde_json::json!([
            { "apiGroups": ["apiextensions.k8s.io"], "resources": ["customresourcedefinitions"],
              "resourceNames": ["runners.lab.cloudlab.training"], "verbs": ["get", "patch"] },
            { "apiGroups": ["admissionregistration.k8s.io"], "resources": ["validatingwebhookconfigurations"],
              "resourceNames": ["runner-validation"], "verbs": ["get", "patch"] },
            // The validating webhook's index: every namespace, read only.
            { "apiGroups": ["lab.cloudlab.training"], "resources": ["runners"], "verbs": ["list", "watch"] },
            { "apiGroups": ["networking.k8s.io"], "resources": ["ingresses"], "verbs": ["list", "watch"] },
        ])
    );
}

#[test]
fn the_manager_namespace_role_holds_the_lease_and_only_the_webhook_secret() {
    let ms = rbac(&RbacScope::Cluster);
    let role = ms.iter().find(|m| m.describe() == format!("Role runner-system/{LEADER_ROLE}")).unwrap();
    let rules = role.object.data["rules"].as_array().unwrap();
    let secrets: Vec<&serde_json::Value> = rules.iter().filter(|r| r["resources"][0] == "secrets").collect();
    assert_eq!(secrets.len(), 1);
    assert_eq!(secrets[0]["resourceNames"], serde_json::json!(["runner-webhook-tls"]));
    assert_eq!(secrets[0]["verbs"], serde_json::json!(["get", "update", "watch"]));
}

#[test]
fn the_manager_serves_the_webhook_behind_its_service_and_starts_after_its_secret() {
    let ms = manager("img", &RbacScope::Cluster);
    let kinds: Vec<String> = ms.iter().map(|m| m.describe()).collect();
    assert_eq!(
        kinds,
        [
            "Secret runner-system/runner-webhook-tls",
            "Service runner-system/runner-webhook",
            "ValidatingWebhookConfiguration/runner-validation",
            "Deployment runner-system/runner-controller-manager"
        ]
    );
    let secret = &ms[0].object.data;
    assert!(secret.get("data").is_none() && secret["type"] == "Opaque", "created empty: {secret}");
    let webhook = &ms[2].object.data["webhooks"][0];
    assert_eq!(
        webhook["clientConfig"],
        serde_json::json!({ "service": { "name": "runner-webhook", "namespace": "runner-system", "path": "/validate", "port": 443 } }),
        "no caBundle: the manager's field"
    );
    let pod = &ms[3].object.data["spec"]["template"];
    assert_eq!(ms[1].object.data["spec"]["selector"], pod["metadata"]["labels"]);
    assert_eq!(ms[1].object.data["spec"]["ports"][0]["port"], 443);
    assert_eq!(ms[1].object.data["spec"]["ports"][0]["targetPort"], "webhook");
    let c = &pod["spec"]["containers"][0];
    assert!(c["args"].to_string().contains("--webhook-listen=0.0.0.0:9443"), "{}", c["args"]);
    assert!(
        c["ports"]
            .as_array()
            .unwrap()
            .contains(&serde_json::json!({ "name": "webhook", "containerPort": 9443 }))
    );
}

#[test]
fn the_cluster_role_lists_every_watched_permission() {
    let ms = rbac(&RbacScope::Cluster);
    let cr = ms.iter().find(|m| m.describe() == format!("ClusterRole/{MANAGER_ROLE}")).unwrap();
    let rules = cr.object.data["rules"].as_array().unwrap();
    assert_eq!(rules.len(), crate::rbac::permissions(Scope::Watched).count());
    assert!(
        rules.iter().any(|r| r["resources"][0] == "deployments" && r["verbs"].to_string().contains("list"))
    );
}

#[test]
fn cluster_wide_metrics_are_served_with_auth_and_namespaced_ones_on_loopback() {
    let kinds: Vec<String> = rbac(&RbacScope::Cluster).iter().map(|m| m.describe()).collect();
    for k in [
        format!("ClusterRole/{METRICS_AUTH_ROLE}"),
        format!("ClusterRoleBinding/{METRICS_AUTH_ROLE}"),
        format!("ClusterRole/{METRICS_READER_ROLE}"),
    ] {
        assert!(kinds.contains(&k), "{k} in {kinds:?}");
    }
    let args = |scope| {
        manager("img", &scope).last().unwrap().object.data["spec"]["template"]["spec"]["containers"][0]["args"].to_string()
    };
    let cluster = args(RbacScope::Cluster);
    assert!(cluster.contains("--metrics-addr=0.0.0.0:") && cluster.contains("--metrics-auth"), "{cluster}");
    let namespaced = args(RbacScope::Namespaces(vec!["a".into()]));
    assert!(
        namespaced.contains("--metrics-addr=127.0.0.1:") && !namespaced.contains("--metrics-auth"),
        "{namespaced}"
    );
}

#[test]
fn the_manager_runs_non_root_read_only_with_limits() {
    let ms = manager("img", &RbacScope::Cluster);
    let d = &ms.last().unwrap().object.data;
    let c = &d["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(c["securityContext"]["readOnlyRootFilesystem"], true);
    assert_eq!(c["securityContext"]["allowPrivilegeEscalation"], false);
    assert_eq!(d["spec"]["template"]["spec"]["securityContext"]["runAsNonRoot"], true);
    assert!(c["resources"]["limits"]["memory"].is_string());
    assert!(c["args"].to_string().contains("--leader-elect"));
}

#[test]
fn a_namespace_scoped_manager_watches_every_namespace_it_has_roles_in() {
    let scope = RbacScope::Namespaces(vec!["team-a".into(), "team-b".into()]);
    let args = manager("img", &scope).last().unwrap().object.data["spec"]["template"]["spec"]["containers"]
        [0]["args"]
        .to_string();
    assert!(args.contains("\"--watch-namespace=team-a,team-b\""), "{args}");
}
