//! Pure: the Pod template's fields that come from `spec.resources` and
//! `spec.podSecurity`, as typed k8s-openapi values. The Deployment's
//! desired object uses them; its view keeps them, so drift is judged on
//! them.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    Capabilities, PodSecurityContext, ResourceRequirements, SeccompProfile, SecurityContext,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use crate::api::{Amounts, PodSecurity, Resources};

/// The container's requests and limits; an empty side is left out.
pub fn resources(r: &Resources) -> ResourceRequirements {
    ResourceRequirements {
        requests: r.requests.as_ref().and_then(amounts),
        limits: r.limits.as_ref().and_then(amounts),
        ..Default::default()
    }
}

fn amounts(a: &Amounts) -> Option<BTreeMap<String, Quantity>> {
    let m: BTreeMap<String, Quantity> = [("cpu", &a.cpu), ("memory", &a.memory)]
        .into_iter()
        .filter_map(|(k, v)| v.as_ref().map(|v| (k.to_string(), Quantity(v.clone()))))
        .collect();
    (!m.is_empty()).then_some(m)
}

/// The container's part of the profile. The restricted standard checks
/// these on every container, so they are set on ours.
pub fn container_security(profile: PodSecurity) -> SecurityContext {
    match profile {
        PodSecurity::Restricted => SecurityContext {
            allow_privilege_escalation: Some(false),
            capabilities: Some(Capabilities { drop: Some(vec!["ALL".into()]), ..Default::default() }),
            run_as_non_root: Some(true),
            seccomp_profile: Some(runtime_default()),
            ..Default::default()
        },
    }
}

/// The Pod's part of the profile: it also covers containers others add.
pub fn pod_security(profile: PodSecurity) -> PodSecurityContext {
    match profile {
        PodSecurity::Restricted => PodSecurityContext {
            run_as_non_root: Some(true),
            seccomp_profile: Some(runtime_default()),
            ..Default::default()
        },
    }
}

fn runtime_default() -> SeccompProfile {
    SeccompProfile { type_: "RuntimeDefault".into(), ..Default::default() }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn the_restricted_profile_sets_what_the_standard_checks() {
        let c = serde_json::to_value(container_security(PodSecurity::Restricted)).unwrap();
        assert_eq!(
            c,
            json!({ "allowPrivilegeEscalation": false, "capabilities": { "drop": ["ALL"] },
                    "runAsNonRoot": true, "seccompProfile": { "type": "RuntimeDefault" } })
        );
        let p = serde_json::to_value(pod_security(PodSecurity::Restricted)).unwrap();
        assert_eq!(p, json!({ "runAsNonRoot": true, "seccompProfile": { "type": "RuntimeDefault" } }));
    }

    #[test]
    fn only_the_amounts_given_are_set() {
        let r = Resources { requests: None, limits: Some(Amounts { cpu: Some("1".into()), memory: None }) };
        assert_eq!(serde_json::to_value(resources(&r)).unwrap(), json!({ "limits": { "cpu": "1" } }));
        let empty = Resources { requests: Some(Amounts::default()), limits: None };
        assert_eq!(serde_json::to_value(resources(&empty)).unwrap(), json!({}));
    }
}
