//! What the Runner validating webhook decides, pure: the manager's
//! `/validate` handler (`manager::webhook::admission`) reads the request
//! and its index of hosts, calls [`judge`], and answers.
//!
//! ```text
//!  AdmissionRequest<Runner> ─┐
//!  reflectors: Runners, ─────┼─► judge ─► Verdict { conflicts ─► denied,
//!  Ingresses (all namespaces)┘                      warnings  ─► kubectl's "Warning:" }
//!        via hosts::runner_claims / hosts::ingress_claims
//! ```
//!
//! Two rules, each one CEL in the CRD cannot express: a host already served
//! by another Runner or by an Ingress in any namespace is refused
//! ([`hosts`]: it needs a lookup across objects), and an image without a
//! fixed version is admitted with a warning ([`image`]).

pub mod hosts;
pub mod image;

pub use hosts::{Claim, Conflict, HolderKind, HostHolder, ingress_claims, runner_claims};

use crate::api::Runner;

/// What the webhook answers for one write.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Verdict {
    /// Hosts someone else serves: any of them refuses the write.
    pub conflicts: Vec<Conflict>,
    /// Shown by kubectl as `Warning: ...`; never refuse.
    pub warnings: Vec<String>,
}

impl Verdict {
    /// The refusal's message, naming each conflicting field and its
    /// holder; None when the write is admitted.
    pub fn denial(&self) -> Option<String> {
        if self.conflicts.is_empty() {
            return None;
        }
        let each: Vec<String> = self.conflicts.iter().map(|c| c.to_string()).collect();
        Some(format!("{}; each host may be served by one Runner or Ingress only", each.join("; ")))
    }
}

/// Judges `runner`, written as `namespace/name`, against every host held
/// in the cluster (`claims`, which may include the Runner's own: they are
/// not conflicts, so an update keeps its hosts).
pub fn judge<'a>(
    namespace: &str,
    name: &str,
    runner: &Runner,
    claims: impl IntoIterator<Item = Claim<'a>>,
) -> Verdict {
    Verdict {
        conflicts: hosts::conflicts(namespace, name, &runner.spec.expose.hosts, claims),
        warnings: image::warning(&runner.spec.image).into_iter().collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::RunnerSpec;

    #[test]
    fn a_conflict_denies_naming_the_field_and_the_holder_and_a_latest_image_only_warns() {
        let mut other = Runner::new("web", RunnerSpec::new("nginx:1.27").host("a.example"));
        other.metadata.namespace = Some("team-b".into());
        let writing = Runner::new("web", RunnerSpec::new("nginx").host("b.example").host("a.example"));
        let v = judge("team-a", "web", &writing, runner_claims(&other));
        let denial = v.denial().expect("refused");
        assert!(
            denial.starts_with(
                "spec.expose.hosts[1]: host \"a.example\" is already served by Runner team-b/web;"
            ),
            "{denial}"
        );
        assert_eq!(v.warnings.len(), 1, "{v:?}");
        assert!(v.warnings[0].starts_with("spec.image \"nginx\" has no tag"), "{v:?}");

        let fine = Runner::new("web", RunnerSpec::new("nginx:1.27").host("b.example"));
        assert_eq!(judge("team-a", "web", &fine, runner_claims(&other)), Verdict::default());
    }
}
