//! Fights found without watching: the manager records each field it puts
//! back as a `Reverted` Warning Event on the Runner, naming the field and
//! the other field manager ([`crate::revert`]), and the Event recorder
//! counts repeats. [`FIGHT`] or more reverts of one field by the same
//! other manager within `--since` are a `write-fight`; fewer are a note
//! (someone ran `kubectl scale` once).

use std::collections::BTreeMap;

use crate::api::{FIELD_MANAGER, condition};
use crate::diagnose::finding::{Code, FieldCount, Finding, WriteCounts};
use crate::diagnose::snapshot::{RunnerState, Snapshot};
use crate::revert::Revert;

use super::{age, human, observed, runner_ref};

/// Reverts of one field, by one other manager, that make a fight.
pub const FIGHT: i32 = 3;

/// The Runner's recent `Reverted` Events, as findings.
pub fn check(s: &Snapshot, rs: &RunnerState) -> Vec<Finding> {
    let mut reverts: BTreeMap<(String, String, String, Option<String>), i32> = BTreeMap::new();
    for e in rs.events.iter().filter(|e| e.reason.as_deref() == Some(condition::REASON_REVERTED)) {
        let recent = super::status::event_time(e).is_some_and(|t| age(s.now, t) <= s.thresholds.since);
        let Some(r) = e.message.as_deref().and_then(Revert::parse).filter(|_| recent) else { continue };
        *reverts.entry((r.kind, r.name, r.field, r.by)).or_default() += super::status::event_count(e);
    }
    reverts
        .into_iter()
        .map(|((kind, name, field, by), count)| {
            let who = by.clone().unwrap_or_else(|| "a writer that holds no entry for it".into());
            let text = format!(
                "{field} of {kind} {name} was put back {count} time{} by {FIELD_MANAGER} in the last {}: changed by {who}",
                if count == 1 { "" } else { "s" },
                human(s.thresholds.since),
            );
            if count < FIGHT {
                return Finding::info(Code::WarningEvent, runner_ref(rs), text);
            }
            let sides = [FIELD_MANAGER.to_string(), who.clone()];
            let fields = [field.clone()];
            let fix = observed::fix_for(rs, &kind, &fields, &field, by.as_deref().or(Some(&who)), &sides);
            Finding::error(Code::WriteFight, runner_ref(rs), text)
                .evidence("from the manager's Reverted Events; watch it happen with diagnose --observe 20s")
                .fix(fix)
                .writes(WriteCounts {
                    kind,
                    name,
                    window_seconds: s.thresholds.since.as_secs_f64(),
                    writes: usize::try_from(count).unwrap_or_default(),
                    per_minute: 0.0,
                    handovers: Some(usize::try_from(count).unwrap_or_default()),
                    fields: vec![FieldCount { field, writes: None }],
                    managers: vec![],
                })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::fixtures;
    use super::*;

    fn reverted(note: &str, count: i32, secs_ago: i64) -> k8s_openapi::api::core::v1::Event {
        fixtures::from(json!({
            "metadata": { "name": format!("e{count}{secs_ago}") }, "involvedObject": {}, "type": "Warning",
            "reason": "Reverted", "message": note,
            "series": { "count": count, "lastObservedTime": fixtures::ago(secs_ago) } }))
    }

    const SCALED: &str = "Reverted spec.replicas on Deployment web: changed by kubectl";

    #[test]
    fn repeated_reverts_of_one_field_are_a_fight_with_the_fix_for_replicas() {
        let mut s = fixtures::healthy();
        s.runners[0].events = vec![reverted(SCALED, 7, 60)];
        let f = check(&s, &s.runners[0]);
        assert_eq!(f.len(), 1);
        assert_eq!(f[0].code, Code::WriteFight);
        assert!(
            f[0].message.contains("spec.replicas of Deployment web was put back 7 times"),
            "{}",
            f[0].message
        );
        assert!(f[0].message.contains("changed by kubectl"));
        assert!(
            f[0].fix.as_deref().is_some_and(|x| x.contains("kubectl scale runner/web")),
            "{:?}",
            f[0].fix
        );
    }

    #[test]
    fn one_revert_is_a_note_and_old_or_foreign_events_are_ignored() {
        let mut s = fixtures::healthy();
        s.runners[0].events = vec![
            reverted(SCALED, 1, 60),
            reverted("Reverted spec.selector on Service web: changed by ops", 9, 7200),
            reverted("not a note of ours", 9, 60),
        ];
        let f = check(&s, &s.runners[0]);
        assert_eq!(f.iter().map(|f| f.code).collect::<Vec<_>>(), [Code::WarningEvent]);
        assert!(f[0].message.contains("put back 1 time by"), "{}", f[0].message);
    }
}
