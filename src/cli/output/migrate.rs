//! What `migrate` prints: one `key: value` line per fact, so a reader sees
//! the counts, the time and storedVersions before and after at a glance.
//! Version names come from the CRD (cluster data) and are [`Safe`].

use super::{Safe, table};
use crate::migrate::{Method, Prune, Summary};

/// The summary as aligned `key: value` rows.
pub fn summary(s: &Summary) -> String {
    let versions = |v: &[String]| Safe::new(if v.is_empty() { "<none>".to_string() } else { v.join(", ") });
    let storage = Safe::new(&s.storage_version);
    let method = match &s.method {
        Method::Update => "one update per Runner, guarded by its resourceVersion".to_string(),
        Method::StorageVersionMigration { name } => format!("StorageVersionMigration {}", Safe::new(name)),
    };
    let mut preflight = format!("{} Runner(s) round-tripped unchanged", s.checked);
    if !s.unchecked_versions.is_empty() {
        preflight += &format!("; not checked at {} (not served)", versions(&s.unchecked_versions));
    }
    let mut rows: Vec<(&str, Safe)> =
        vec![("storage version:", storage), ("method:", method.into()), ("preflight:", preflight.into())];
    if s.method == Method::Update && s.prune != Prune::NothingToDo {
        rows.push(("rewritten:", s.tally.rewritten.to_string().into()));
        rows.push(("skipped:", format!("{} (deleted meanwhile)", s.tally.skipped).into()));
        rows.push(("retried:", format!("{} (conflicts: someone else wrote first)", s.tally.retried).into()));
    }
    rows.push(("time:", format!("{:.1}s", s.seconds).into()));
    rows.push(("storedVersions before:", versions(&s.stored_versions_before)));
    let after = match &s.prune {
        Prune::Pruned => format!("{} (pruned)", versions(&s.stored_versions_after)),
        Prune::PrunedByMigration => {
            format!("{} (pruned by the StorageVersionMigration)", versions(&s.stored_versions_after))
        }
        Prune::NothingToDo => format!("{} (nothing to migrate)", versions(&s.stored_versions_after)),
        Prune::CrdChanged { .. } => {
            format!("{} (not pruned: the CRD changed during the run)", versions(&s.stored_versions_after))
        }
        Prune::Interrupted => format!("{} (not pruned: interrupted)", versions(&s.stored_versions_after)),
    };
    rows.push(("storedVersions after:", after.into()));
    table(None, rows.into_iter().map(|(k, v)| vec![Safe::new(k), v]))
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::migrate::{Plan, Tally};

    fn plan() -> Plan {
        Plan {
            storage: "v1beta1".into(),
            served: vec!["v1alpha1".into(), "v1beta1".into()],
            stored_before: vec!["v1alpha1".into(), "v1beta1".into()],
            crd_resource_version: "7".into(),
        }
    }

    #[test]
    fn a_complete_run_prints_the_counts_the_time_and_stored_versions_before_and_after() {
        let tally = Tally { rewritten: 998, skipped: 2, retried: 5 };
        let s =
            Summary::new(&plan(), Method::Update, 1000, tally, Duration::from_millis(12_340), Prune::Pruned);
        let text = summary(&s);
        for want in [
            "storage version:         v1beta1\n",
            "preflight:               1000 Runner(s) round-tripped unchanged\n",
            "rewritten:               998\n",
            "skipped:                 2 (deleted meanwhile)\n",
            "retried:                 5 (conflicts: someone else wrote first)\n",
            "time:                    12.3s\n",
            "storedVersions before:   v1alpha1, v1beta1\n",
            "storedVersions after:    v1beta1 (pruned)\n",
        ] {
            assert!(text.contains(want), "{want:?} in\n{text}");
        }
    }

    #[test]
    fn a_run_that_did_not_prune_says_why() {
        let changed = Prune::CrdChanged { at_start: "7".into() };
        let s = Summary::new(&plan(), Method::Update, 3, Tally::default(), Duration::ZERO, changed);
        assert!(
            summary(&s).contains("storedVersions after:    v1alpha1, v1beta1 (not pruned: the CRD changed")
        );
        let s =
            Summary::new(&plan(), Method::Update, 3, Tally::default(), Duration::ZERO, Prune::Interrupted);
        assert!(summary(&s).contains("(not pruned: interrupted)"));
    }

    #[test]
    fn a_storage_version_migration_names_itself_and_shows_no_counts() {
        let method = Method::StorageVersionMigration { name: "runners-x\u{1b}[2J".into() };
        let s = Summary::new(&plan(), method, 3, Tally::default(), Duration::ZERO, Prune::Pruned);
        let text = summary(&s);
        assert!(text.contains("StorageVersionMigration runners-x\\x1b[2J"), "{text}");
        assert!(!text.contains("rewritten:"), "{text}");
    }
}
