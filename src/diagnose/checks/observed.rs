//! What `--observe` saw, as findings: field managers fighting over a field
//! of the Runner's objects (`write-fight`) and objects written in a loop
//! (`write-storm`). Both are errors: each write costs the apiserver and
//! etcd, wakes every watcher, and a fight keeps the object flapping. The
//! rules are [`crate::diagnose::writes::tally`]'s; this module words them
//! and says what to do.

use kube::ResourceExt;

use crate::api::FIELD_MANAGER;
use crate::diagnose::finding::{Code, FieldCount, Finding, ManagerCount, WriteCounts};
use crate::diagnose::snapshot::RunnerState;
use crate::diagnose::writes::tally::{self, Fight, LIMITS, Side, Storm, Tally};
use crate::diagnose::writes::{ObjectWrites, Observed, Writer};

use super::{human, ns_flag, runner_ref};

/// Fields a storm finding lists before "and N more".
const FIELDS_SHOWN: usize = 5;

pub fn check(rs: &RunnerState) -> Vec<Finding> {
    let Some(observed) = &rs.observed else { return vec![] };
    let t = tally::tally(observed, &LIMITS);
    let mut out: Vec<Finding> = t.fights.iter().map(|f| fight(rs, observed, f)).collect();
    out.extend(t.storms.iter().map(|s| storm(rs, observed, &t, s)));
    out
}

fn fight(rs: &RunnerState, o: &Observed, f: &Fight) -> Finding {
    let [a, b] = &f.sides;
    let (fields, verb) = match f.fields.as_slice() {
        [one] => (one.clone(), "is"),
        many => (many.join(", "), "are"),
    };
    let mut finding = Finding::error(
        Code::WriteFight,
        runner_ref(rs),
        format!(
            "{fields} of {} {verb} set by turns by {} and {}: {} hand-overs in {}",
            f.object.display(),
            name(a),
            name(b),
            f.handovers,
            human(o.window)
        ),
    )
    .evidence(format!("{} set it {} times, {} {} times", shown(a), a.writes, shown(b), b.writes))
    .evidence(format!("{} was written {:.0} times a minute", f.object.display(), f.per_minute));
    let other = [a, b].into_iter().find(|s| name(s) != FIELD_MANAGER).filter(|_| is_ours(a) || is_ours(b));
    if other.is_some() {
        finding = finding.evidence(format!(
            "{FIELD_MANAGER} is the Runner's manager: it sets {fields} from the Runner's spec and puts {} back",
            if verb == "is" { "it" } else { "them" }
        ));
    }
    finding.fix(fight_fix(rs, f, &fields, other)).writes(WriteCounts {
        handovers: Some(f.handovers),
        fields: f.fields.iter().map(|field| FieldCount { field: field.clone(), writes: None }).collect(),
        ..counts(o, f.object, [a, b].into_iter(), f.per_minute, a.writes + b.writes)
    })
}

fn fight_fix(rs: &RunnerState, f: &Fight, fields: &str, other: Option<&Side>) -> String {
    let sides = [name(&f.sides[0]), name(&f.sides[1])];
    fix_for(rs, &f.object.kind, &f.fields, fields, other.map(name).as_deref(), &sides)
}

/// What to do about a fight over `fields` (shown as `shown`) of the
/// Runner's `kind` child between `sides`; `other` is the side that is not
/// the Runner's manager, when one side is.
pub(super) fn fix_for(
    rs: &RunnerState,
    kind: &str,
    fields: &[String],
    shown: &str,
    other: Option<&str>,
    sides: &[String; 2],
) -> String {
    let runner = rs.runner.name_any();
    match other {
        Some(_) if kind == "Deployment" && fields == ["spec.replicas"] => format!(
            "point the autoscaler or the script at the Runner's scale subresource, not its Deployment: \
             kubectl scale runner/{runner} --replicas=N {ns} (a HorizontalPodAutoscaler: scaleTargetRef \
             apiVersion {api}, kind Runner, name {runner})",
            ns = ns_flag(rs),
            api = format_args!("{}/{}", crate::api::GROUP, crate::api::VERSION),
        ),
        Some(other) => format!(
            "stop {other} from writing {shown}, and change the Runner's spec instead: the manager passes it on"
        ),
        None => {
            format!("stop {} or {} from writing {shown}, or leave the field to the other", sides[0], sides[1])
        }
    }
}

fn storm(rs: &RunnerState, o: &Observed, t: &Tally, s: &Storm) -> Finding {
    let steady = match (t.runner_generation_changed, rs.runner.metadata.generation) {
        (false, Some(g)) => format!(" while the Runner's generation stayed {g}"),
        _ => String::new(),
    };
    let mut f = Finding::error(
        Code::WriteStorm,
        runner_ref(rs),
        format!(
            "{} was written {:.0} times a minute ({} writes in {}){steady}",
            s.object.display(),
            s.per_minute,
            s.writes,
            human(o.window)
        ),
    );
    for w in &s.writers {
        f = f.evidence(format!("by {}: {} writes", shown(w), w.writes));
    }
    let loop_in = s.writers.first().map(name).unwrap_or_default();
    f = if s.fields.is_empty() {
        f.evidence("writes that change nothing: only resourceVersion and managedFields moved").fix(format!(
            "find the loop in {loop_in}: it sends the object unchanged; compare with the live object and \
             skip the write when nothing differs"
        ))
    } else {
        let mut changed: Vec<String> =
            s.fields.iter().take(FIELDS_SHOWN).map(|(field, n)| format!("{field} ({n})")).collect();
        if s.fields.len() > FIELDS_SHOWN {
            changed.push(format!("and {} more", s.fields.len() - FIELDS_SHOWN));
        }
        f.evidence(format!("changed: {}", changed.join(", "))).fix(format!(
            "find the loop in {loop_in}: write only when what it wants differs from the live object, and keep \
             values nobody reads (counters, timestamps) out of the object"
        ))
    };
    let fields = s.fields.iter().map(|(field, n)| FieldCount { field: field.clone(), writes: Some(*n) });
    f.writes(WriteCounts {
        fields: fields.collect(),
        ..counts(o, s.object, s.writers.iter(), s.per_minute, s.writes)
    })
}

fn counts<'a>(
    o: &Observed,
    object: &ObjectWrites,
    sides: impl Iterator<Item = &'a Side>,
    per_minute: f64,
    writes: usize,
) -> WriteCounts {
    WriteCounts {
        kind: object.kind.clone(),
        name: object.name.clone(),
        window_seconds: o.window.as_secs_f64(),
        writes,
        per_minute: (per_minute * 10.0).round() / 10.0,
        handovers: None,
        fields: vec![],
        managers: sides
            .map(|s| {
                let w = s.writer.clone().unwrap_or_default();
                ManagerCount {
                    manager: w.manager,
                    operation: w.operation,
                    subresource: w.subresource,
                    writes: s.writes,
                }
            })
            .collect(),
    }
}

fn is_ours(s: &Side) -> bool {
    name(s) == FIELD_MANAGER
}

/// The manager's name (`kubectl`).
fn name(s: &Side) -> String {
    s.writer.as_ref().map(|w| w.manager.clone()).unwrap_or_else(|| "an unnamed writer".into())
}

/// `kubectl (Update)`.
fn shown(s: &Side) -> String {
    s.writer.as_ref().map(Writer::to_string).unwrap_or_else(|| "an unnamed writer".into())
}

#[cfg(test)]
#[path = "observed_tests.rs"]
mod tests;
