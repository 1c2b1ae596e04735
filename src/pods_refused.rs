//! Pure: Pods that can never be created. When admission refuses a Pod
//! (PodSecurity, a ResourceQuota, a LimitRange, a webhook or a
//! ValidatingAdmissionPolicy), no Pod exists whose state the Pod checks
//! could read: the only trace is the Deployment's `ReplicaFailure`
//! condition (reason `FailedCreate`) with the apiserver's message. The
//! rollout (`rollout::of`) reads it with [`refusal`]; the
//! manager's status (reason [`REASON`], phase Failed) and `diagnose` (an
//! error naming what refused the Pods and the fix) both read the rollout,
//! so they cannot disagree.

use k8s_openapi::api::apps::v1::DeploymentCondition;

/// The Ready condition's reason on a Runner whose Pods are refused.
pub const REASON: &str = "PodsRefused";

/// What refused the Pods, judged from the apiserver's message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RefusedBy {
    /// The namespace's `pod-security.kubernetes.io/enforce` level.
    PodSecurity,
    /// A ResourceQuota on cpu or memory that needs requests or limits set.
    QuotaNeedsResources,
    /// A ResourceQuota that is used up.
    QuotaExceeded,
    /// A LimitRange's minimum, maximum or ratio.
    LimitRange,
    /// A validating admission webhook.
    Webhook,
    /// A ValidatingAdmissionPolicy.
    AdmissionPolicy,
    /// Anything else (a missing ServiceAccount, ...): the message says.
    Other,
}

/// The Deployment controller could not create the Runner's Pods.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodsRefused {
    pub by: RefusedBy,
    /// The apiserver's message, as the Deployment carries it.
    pub message: String,
}

impl RefusedBy {
    /// Classifies an apiserver refusal by the words each admission step
    /// writes. Order matters: a webhook's message may quote anything.
    pub fn of(message: &str) -> RefusedBy {
        let m = message.to_ascii_lowercase();
        if m.contains("admission webhook") && m.contains("denied the request") {
            RefusedBy::Webhook
        } else if m.contains("validatingadmissionpolicy") {
            RefusedBy::AdmissionPolicy
        } else if m.contains("violates podsecurity") {
            RefusedBy::PodSecurity
        } else if m.contains("must specify limits") || m.contains("must specify requests") {
            RefusedBy::QuotaNeedsResources
        } else if m.contains("exceeded quota") {
            RefusedBy::QuotaExceeded
        } else if m.contains("usage per container")
            || m.contains("usage per pod")
            || m.contains("to request ratio")
        {
            RefusedBy::LimitRange
        } else {
            RefusedBy::Other
        }
    }

    /// Who refused, for a sentence: "PodSecurity admission refused ...".
    pub fn name(self) -> &'static str {
        match self {
            RefusedBy::PodSecurity => "PodSecurity admission",
            RefusedBy::QuotaNeedsResources | RefusedBy::QuotaExceeded => "a ResourceQuota",
            RefusedBy::LimitRange => "a LimitRange",
            RefusedBy::Webhook => "an admission webhook",
            RefusedBy::AdmissionPolicy => "a ValidatingAdmissionPolicy",
            RefusedBy::Other => "the apiserver",
        }
    }

    /// What makes the Pods admissible, naming the Runner's fields and the
    /// `create` flags that set them, or the namespace's policy.
    pub fn fix(self) -> &'static str {
        match self {
            RefusedBy::PodSecurity => {
                "set spec.podSecurity: restricted (create --pod-security restricted; the image must run \
                 as a non-root user), or relax the namespace's pod-security.kubernetes.io/enforce label"
            }
            RefusedBy::QuotaNeedsResources => {
                "set spec.resources requests and limits for cpu and memory (create --requests \
                 cpu=100m,memory=64Mi --limits cpu=500m,memory=128Mi)"
            }
            RefusedBy::QuotaExceeded => {
                "lower spec.replicas or spec.resources, or raise the namespace's ResourceQuota \
                 (kubectl describe resourcequota)"
            }
            RefusedBy::LimitRange => {
                "set spec.resources within the namespace's LimitRange (kubectl describe limitrange; \
                 create --requests ... --limits ...)"
            }
            RefusedBy::Webhook | RefusedBy::AdmissionPolicy => {
                "change the Runner to satisfy the policy the message names (spec.resources, \
                 spec.podSecurity), or ask its owner for an exception"
            }
            RefusedBy::Other => "read the message; kubectl describe replicaset shows the same",
        }
    }
}

impl PodsRefused {
    /// "PodSecurity admission refused the Pods: pods \"web-...\" is forbidden: ...".
    pub fn sentence(&self) -> String {
        format!("{} refused the Pods: {}", self.by.name(), self.message)
    }
}

/// The refusal a Deployment reports: its `ReplicaFailure` condition, true
/// with reason `FailedCreate`. The Deployment controller copies it from the
/// new ReplicaSet and removes it once a create succeeds, so it is current.
pub fn refusal<'a>(conditions: impl IntoIterator<Item = &'a DeploymentCondition>) -> Option<PodsRefused> {
    conditions
        .into_iter()
        .find(|c| {
            c.type_.as_deref() == Some("ReplicaFailure")
                && c.status.as_deref() == Some("True")
                && c.reason.as_deref() == Some("FailedCreate")
        })
        .map(|c| {
            let message = c.message.clone().unwrap_or_default();
            PodsRefused { by: RefusedBy::of(&message), message }
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_admission_step_is_named_from_its_own_words() {
        let cases = [
            (
                r#"pods "web-5d9-x" is forbidden: violates PodSecurity "restricted:latest": allowPrivilegeEscalation != false (container "runner" must set securityContext.allowPrivilegeEscalation=false)"#,
                RefusedBy::PodSecurity,
            ),
            (
                r#"pods "web-5d9-x" is forbidden: failed quota: compute: must specify limits.cpu for: runner; limits.memory for: runner"#,
                RefusedBy::QuotaNeedsResources,
            ),
            (
                r#"pods "web-x" is forbidden: failed quota: q: must specify requests.memory"#,
                RefusedBy::QuotaNeedsResources,
            ),
            (
                r#"pods "web-x" is forbidden: exceeded quota: compute, requested: pods=1, used: pods=2, limited: pods=2"#,
                RefusedBy::QuotaExceeded,
            ),
            (
                r#"pods "web-x" is forbidden: maximum cpu usage per Container is 500m, but limit is 1"#,
                RefusedBy::LimitRange,
            ),
            (
                r#"pods "web-x" is forbidden: [minimum memory usage per Pod is 64Mi, but request is 32Mi]"#,
                RefusedBy::LimitRange,
            ),
            (
                r#"pods "web-x" is forbidden: cpu max limit to request ratio per Container is 2, but provided ratio is 4"#,
                RefusedBy::LimitRange,
            ),
            (
                r#"admission webhook "pods.policy.example.com" denied the request: violates PodSecurity in our words"#,
                RefusedBy::Webhook,
            ),
            (
                r#"pods "web-x" is forbidden: ValidatingAdmissionPolicy 'no-latest' with binding 'b' denied request: failed expression"#,
                RefusedBy::AdmissionPolicy,
            ),
            (r#"pods "web-x" is forbidden: error looking up service account team/web"#, RefusedBy::Other),
        ];
        for (message, want) in cases {
            assert_eq!(RefusedBy::of(message), want, "{message}");
        }
    }

    #[test]
    fn the_fix_names_the_runners_fields_or_the_namespaces_policy() {
        assert!(RefusedBy::PodSecurity.fix().contains("spec.podSecurity: restricted"));
        assert!(RefusedBy::PodSecurity.fix().contains("--pod-security restricted"));
        assert!(RefusedBy::QuotaNeedsResources.fix().contains("spec.resources"));
        assert!(RefusedBy::QuotaNeedsResources.fix().contains("--limits"));
        assert!(RefusedBy::LimitRange.fix().contains("LimitRange"));
    }

    fn condition(type_: &str, status: &str, reason: &str) -> DeploymentCondition {
        DeploymentCondition {
            type_: Some(type_.into()),
            status: Some(status.into()),
            reason: Some(reason.into()),
            message: Some(r#"pods "web-x" is forbidden: violates PodSecurity "restricted:latest""#.into()),
            ..Default::default()
        }
    }

    #[test]
    fn only_a_true_replica_failure_with_failed_create_is_a_refusal() {
        let refused = refusal(&[
            condition("Progressing", "True", "ReplicaSetUpdated"),
            condition("ReplicaFailure", "True", "FailedCreate"),
        ])
        .unwrap();
        assert_eq!(refused.by, RefusedBy::PodSecurity);
        assert!(refused.sentence().starts_with("PodSecurity admission refused the Pods: pods \"web-x\""));
        assert_eq!(refusal(&[condition("ReplicaFailure", "False", "FailedCreate")]), None);
        assert_eq!(refusal(&[condition("ReplicaFailure", "True", "FailedDelete")]), None);
        assert_eq!(refusal(&[condition("Progressing", "False", "ProgressDeadlineExceeded")]), None);
    }
}
