//! The status: the manager has not caught up with the latest spec;
//! the Runner is not Ready; the Runner churns (its resourceVersion moves while
//! its spec and children stand still: a reconcile hot loop), and who writes.
//! Also the Runner's recent Warning Events, as context.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::Event;
use k8s_openapi::jiff::Timestamp;

use super::super::finding::{Code, Finding};
use super::super::snapshot::{Resample, RunnerState, Snapshot};
use super::super::writes::attribute::attribute;
use super::{age, human, runner_age, runner_ref};
use crate::api::condition;

/// When the spec (anything but status) was last written, from managedFields;
/// the creation time when they say nothing.
fn last_spec_change(rs: &RunnerState) -> Option<Timestamp> {
    let m = &rs.runner.metadata;
    let from_fields = m
        .managed_fields
        .iter()
        .flatten()
        .filter(|e| e.subresource.as_deref().unwrap_or("").is_empty())
        .filter_map(|e| e.time.as_ref().map(|t| t.0))
        .max();
    from_fields.or(m.creation_timestamp.as_ref().map(|t| t.0))
}

/// How long the latest generation has gone unobserved, once past the grace
/// period. `None` when caught up (or deleting: the finalizer check covers it).
pub fn generation_behind(s: &Snapshot, rs: &RunnerState) -> Option<(i64, Option<i64>, Duration)> {
    let m = &rs.runner.metadata;
    if m.deletion_timestamp.is_some() {
        return None;
    }
    let generation = m.generation?;
    let observed = rs.runner.status.as_ref().and_then(|st| st.observed_generation);
    if observed.is_some_and(|o| o >= generation) {
        return None;
    }
    let behind = last_spec_change(rs).map(|t| age(s.now, t)).unwrap_or_else(|| runner_age(s, rs));
    (behind >= s.thresholds.grace).then_some((generation, observed, behind))
}

pub fn check(s: &Snapshot, rs: &RunnerState) -> Vec<Finding> {
    let mut out = vec![];
    if let Some((generation, observed, behind)) = generation_behind(s, rs) {
        let seen =
            observed.map(|o| format!("observedGeneration is {o}")).unwrap_or("no observedGeneration".into());
        out.push(
            Finding::warning(
                Code::GenerationBehind,
                runner_ref(rs),
                format!(
                    "the manager has not observed generation {generation} for {} ({seen})",
                    human(behind)
                ),
            )
            .evidence("status describes an older spec; see the manager and children findings for why"),
        );
    }
    if rs.runner.metadata.deletion_timestamp.is_none() {
        out.extend(not_ready(s, rs));
    }
    if let Some(r) = &rs.resample {
        out.extend(churn(rs, r));
    }
    out.extend(warning_events(s, rs));
    out
}

fn not_ready(s: &Snapshot, rs: &RunnerState) -> Option<Finding> {
    let c = rs.runner.status.as_ref()?.conditions.iter().find(|c| c.type_ == condition::READY)?;
    if c.status == "True" || age(s.now, c.last_transition_time.0) < s.thresholds.grace {
        return None;
    }
    Some(Finding::warning(
        Code::RunnerNotReady,
        runner_ref(rs),
        format!(
            "not Ready for {} ({}): {}",
            human(age(s.now, c.last_transition_time.0)),
            c.reason,
            c.message
        ),
    ))
}

/// A changed resourceVersion with the same generation, spec and children.
fn churn(rs: &RunnerState, r: &Resample) -> Option<Finding> {
    let after = r.runner.as_ref()?;
    let before = &rs.runner;
    let rv = |x: &Option<String>| x.clone().unwrap_or_default();
    if rv(&before.metadata.resource_version) == rv(&after.metadata.resource_version)
        || before.metadata.generation != after.metadata.generation
        || before.spec != after.spec
    {
        return None;
    }
    if rs.versions() != r.children_after {
        return None;
    }
    let mut f = Finding::warning(
        Code::StatusChurn,
        runner_ref(rs),
        format!(
            "the Runner changed (resourceVersion {} -> {}) within {:.1}s while its spec and children did not: a hot loop",
            rv(&before.metadata.resource_version),
            rv(&after.metadata.resource_version),
            r.elapsed.as_secs_f64()
        ),
    );
    // The one rule for who made a write, shared with `--observe`.
    let json = |r: &crate::api::Runner| serde_json::to_value(r).unwrap_or_default();
    let write = attribute(&json(before), &json(after), r.elapsed);
    if let Some(w) = &write.writer {
        f = f.evidence(format!(
            "written by field manager {:?} ({}{})",
            w.manager,
            w.operation,
            if w.subresource.is_empty() { String::new() } else { format!(", subresource {}", w.subresource) }
        ));
    }
    if !write.fields.is_empty() {
        f = f.evidence(format!("changed: {}", write.fields.join(", ")));
    }
    Some(f.evidence("a status write that changes nothing but a timestamp triggers the next reconcile; compare before writing"))
}

/// When an Event last happened.
pub(super) fn event_time(e: &Event) -> Option<Timestamp> {
    let series = e.series.as_ref().and_then(|x| x.last_observed_time.as_ref()).map(|t| t.0);
    series.or(e.last_timestamp.as_ref().map(|t| t.0)).or(e.event_time.as_ref().map(|t| t.0)).or(e
        .metadata
        .creation_timestamp
        .as_ref()
        .map(|t| t.0))
}

/// How many times an Event happened: its series' count (the whole series,
/// as the events API keeps it), else its count, else once.
pub(super) fn event_count(e: &Event) -> i32 {
    e.series.as_ref().and_then(|x| x.count).or(e.count).unwrap_or(1).max(1)
}

/// Warning Events about the Runner within `--since`, one per reason
/// (latest). `Reverted` Events are read as fights elsewhere.
fn warning_events(s: &Snapshot, rs: &RunnerState) -> Vec<Finding> {
    let mut latest: BTreeMap<String, (Timestamp, String, i32)> = BTreeMap::new();
    for e in rs.events.iter().filter(|e| e.type_.as_deref() == Some("Warning")) {
        let Some(t) = event_time(e).filter(|t| age(s.now, *t) <= s.thresholds.since) else { continue };
        let reason = e.reason.clone().unwrap_or_default();
        if reason == condition::REASON_REVERTED {
            continue;
        }
        let count = event_count(e);
        if latest.get(&reason).is_none_or(|(lt, _, _)| t > *lt) {
            latest.insert(reason, (t, e.message.clone().unwrap_or_default(), count));
        }
    }
    latest
        .into_iter()
        .map(|(reason, (t, msg, count))| {
            let times = if count > 1 { format!(" (x{count})") } else { String::new() };
            Finding::info(
                Code::WarningEvent,
                runner_ref(rs),
                format!("Event {reason}{times}, {} ago: {msg}", human(age(s.now, t))),
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::super::fixtures;
    use super::*;
    use crate::diagnose::snapshot::Snapshot;
    use serde_json::json;

    fn codes(s: &Snapshot) -> Vec<Code> {
        check(s, &s.runners[0]).iter().map(|f| f.code).collect()
    }

    fn resampled(s: &mut Snapshot, change: fn(&mut crate::api::Runner)) {
        let rs = &s.runners[0];
        let mut after = rs.runner.clone();
        change(&mut after);
        s.runners[0].resample = Some(Resample {
            elapsed: Duration::from_secs(1),
            runner: Some(after),
            children_after: rs.versions(),
        });
    }

    #[test]
    fn status_rules() {
        type Case = (&'static str, fn(&mut Snapshot), &'static [Code]);
        let cases: &[Case] = &[
            ("healthy", |_| {}, &[]),
            (
                "spec changed long ago, never observed",
                |s| s.runners[0].runner.metadata.generation = Some(2),
                &[Code::GenerationBehind],
            ),
            (
                "spec changed a moment ago",
                |s| {
                    let m = &mut s.runners[0].runner.metadata;
                    m.generation = Some(2);
                    m.managed_fields =
                        Some(vec![fixtures::from(json!({ "manager": "kubectl", "operation": "Update",
                        "time": fixtures::ago(3) }))]);
                },
                &[],
            ),
            (
                "not Ready for a while",
                |s| {
                    let c = &mut s.runners[0].runner.status.as_mut().unwrap().conditions[0];
                    c.status = "False".into();
                },
                &[Code::RunnerNotReady],
            ),
            (
                "status rewritten with only a new message",
                |s| {
                    resampled(s, |r| {
                        r.metadata.resource_version = Some("11".into());
                        r.status.as_mut().unwrap().message = Some("x".into());
                    })
                },
                &[Code::StatusChurn],
            ),
            ("nothing changed", |s| resampled(s, |_| {}), &[]),
            (
                "spec changed too: not churn",
                |s| {
                    resampled(s, |r| {
                        r.metadata.resource_version = Some("11".into());
                        r.metadata.generation = Some(2);
                        r.spec.replicas = 2;
                    })
                },
                &[],
            ),
            (
                "a warning Event",
                |s| {
                    s.runners[0].events = vec![fixtures::from(json!({
                    "metadata": { "name": "e1", "namespace": "app" }, "involvedObject": {},
                    "type": "Warning", "reason": "AdoptionRefused", "message": "Service app/web is not ours",
                    "lastTimestamp": fixtures::ago(30), "count": 3 }))]
                },
                &[Code::WarningEvent],
            ),
        ];
        for (name, break_it, want) in cases {
            let mut s = fixtures::healthy();
            break_it(&mut s);
            assert_eq!(codes(&s), *want, "{name}");
        }
    }

    #[test]
    fn churn_names_the_field_manager_that_writes() {
        let mut s = fixtures::healthy();
        s.runners[0].runner.metadata.managed_fields = Some(vec![
            fixtures::from(
                json!({ "manager": "kubectl-runner", "operation": "Apply", "subresource": "status", "time": fixtures::ago(10) }),
            ),
            fixtures::from(
                json!({ "manager": "kubectl", "operation": "Update", "time": fixtures::ago(3000) }),
            ),
        ]);
        resampled(&mut s, |r| {
            r.metadata.resource_version = Some("99".into());
            r.metadata.managed_fields.as_mut().unwrap()[0].time =
                Some(fixtures::from(fixtures::ago(0).into()));
            r.status.as_mut().unwrap().conditions[0].message = "now".into();
        });
        let f = check(&s, &s.runners[0]);
        let ev = &f[0].evidence;
        assert!(ev.iter().any(|e| e.contains("\"kubectl-runner\" (Apply, subresource status)")), "{ev:#?}");
        assert!(ev.iter().any(|e| e == "changed: status.conditions[type=Ready].message"), "{ev:#?}");
    }

    /// `managedFields` times are to the second: a writer looping faster
    /// may show the same time in both looks, and another entry (the
    /// creator's) may be as new. The entry that owns what changed wrote it.
    #[test]
    fn churn_within_one_second_names_the_owner_of_the_change_not_the_newest_entry() {
        let mut s = fixtures::healthy();
        let now = fixtures::ago(0);
        s.runners[0].runner.metadata.managed_fields = Some(vec![
            fixtures::from(json!({ "manager": "hot-looper", "operation": "Update", "subresource": "status",
                "time": now, "fieldsV1": { "f:status": { "f:message": {} } } })),
            fixtures::from(json!({ "manager": "unknown", "operation": "Update", "time": now,
                "fieldsV1": { "f:spec": { "f:image": {} } } })),
        ]);
        resampled(&mut s, |r| {
            r.metadata.resource_version = Some("99".into());
            r.status.as_mut().unwrap().message = Some("reconciled 7 times".into());
        });
        let f = check(&s, &s.runners[0]);
        let ev = &f[0].evidence;
        assert!(ev.iter().any(|e| e.contains("\"hot-looper\" (Update, subresource status)")), "{ev:#?}");
        assert!(ev.iter().any(|e| e == "changed: status.message"), "{ev:#?}");
    }

    #[test]
    fn old_warning_events_are_ignored() {
        let mut s = fixtures::healthy();
        s.runners[0].events = vec![fixtures::from(json!({
            "metadata": { "name": "e1" }, "involvedObject": {}, "type": "Warning", "reason": "X",
            "lastTimestamp": fixtures::ago(7200) }))];
        assert!(codes(&s).is_empty());
    }
}
