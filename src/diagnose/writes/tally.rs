//! Pure: what the writes to a Runner's objects add up to.
//!
//! - A **fight**: a field that changes hands between field managers again
//!   and again (A sets it, B sets it back, A again). A field set by one
//!   manager and put back once by another is drift being repaired, not a
//!   fight: it takes [`Limits::min_handovers`] hand-overs.
//! - A **storm**: an object written more than [`Limits::storm_per_minute`]
//!   times a minute, over the whole window, by writes nothing explains. A
//!   spec change explains what follows it for [`Limits::settle`]: the
//!   status writes of the controllers that act on it (a rollout), and the
//!   children's writes after the Runner's own spec changed (the manager
//!   passing the change on). A status write that moves
//!   `status.observedGeneration` reports a spec change, made in the window
//!   or just before it, and is explained too. An object in a fight is
//!   reported as the fight.

use std::collections::BTreeMap;
use std::time::Duration;

use super::{ObjectWrites, Observed, Write, Writer};

/// The thresholds; [`LIMITS`] are the ones `diagnose` uses.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Limits {
    /// More unexplained writes a minute than this is a storm.
    pub storm_per_minute: f64,
    /// Fewer unexplained writes than this is never a storm (a short window
    /// with a few writes has a high rate and means nothing).
    pub min_storm_writes: usize,
    /// A field that changed hands at least this often is fought over.
    pub min_handovers: usize,
    /// How long a spec change explains the writes that follow it.
    pub settle: Duration,
}

/// One write a second is far above what a settled Runner sees (none) and
/// what a rollout makes, and far below a write loop (hundreds a minute).
pub const LIMITS: Limits = Limits {
    storm_per_minute: 60.0,
    min_storm_writes: 10,
    min_handovers: 3,
    settle: Duration::from_secs(10),
};

/// The field a controller writes when it has acted on a spec change: a
/// write of it is explained even when the change came before the window
/// (a Deployment's generation also moves with its annotations).
const OBSERVED_GENERATION: &str = "status.observedGeneration";

/// A writer and how many of the counted writes it made.
#[derive(Debug, Clone, PartialEq)]
pub struct Side {
    /// `None`: writes `managedFields` did not attribute.
    pub writer: Option<Writer>,
    pub writes: usize,
}

/// Fields of one object that two managers keep taking from each other.
#[derive(Debug, Clone, PartialEq)]
pub struct Fight<'a> {
    pub object: &'a ObjectWrites,
    /// The fields fought over, sorted.
    pub fields: Vec<String>,
    /// The two managers that set them most, most first, with how often
    /// each set them.
    pub sides: [Side; 2],
    /// How often the fields changed hands (the most for any one field).
    pub handovers: usize,
    /// Every write to the object a minute, over the window.
    pub per_minute: f64,
}

/// An object written too often for nothing that explains it.
#[derive(Debug, Clone, PartialEq)]
pub struct Storm<'a> {
    pub object: &'a ObjectWrites,
    /// The unexplained writes.
    pub writes: usize,
    pub per_minute: f64,
    /// Who made them, most first.
    pub writers: Vec<Side>,
    /// The fields they changed and how often, most first; empty: the
    /// writes changed nothing anyone reads.
    pub fields: Vec<(String, usize)>,
}

#[derive(Debug, Clone, PartialEq, Default)]
pub struct Tally<'a> {
    pub fights: Vec<Fight<'a>>,
    pub storms: Vec<Storm<'a>>,
    /// The Runner's spec changed during the window.
    pub runner_generation_changed: bool,
}

pub fn tally<'a>(observed: &'a Observed, limits: &Limits) -> Tally<'a> {
    let minutes = observed.window.as_secs_f64().max(1e-3) / 60.0;
    let spec_changes = |runner_only: bool| -> Vec<Duration> {
        let objects = observed.objects.iter().filter(|o| !runner_only || o.kind == "Runner");
        objects.flat_map(|o| &o.writes).filter(|w| w.generation_changed).map(|w| w.at).collect()
    };
    let (any_spec, runner_spec) = (spec_changes(false), spec_changes(true));
    let follows =
        |changes: &[Duration], w: &Write| changes.iter().any(|c| *c <= w.at && w.at - *c <= limits.settle);
    let mut out = Tally { runner_generation_changed: !runner_spec.is_empty(), ..Tally::default() };
    for o in &observed.objects {
        let fights = fights(o, limits, o.writes.len() as f64 / minutes);
        if !fights.is_empty() {
            out.fights.extend(fights);
            continue;
        }
        let explained = |w: &Write| {
            (w.status_only && (follows(&any_spec, w) || w.fields.iter().any(|f| f == OBSERVED_GENERATION)))
                || (o.kind != "Runner" && follows(&runner_spec, w))
        };
        let counted: Vec<&Write> = o.writes.iter().filter(|w| !explained(w)).collect();
        let per_minute = counted.len() as f64 / minutes;
        if counted.len() >= limits.min_storm_writes && per_minute > limits.storm_per_minute {
            out.storms.push(Storm {
                object: o,
                writes: counted.len(),
                per_minute,
                writers: most_first(counted.iter().map(|w| w.writer.clone())),
                fields: most_first(counted.iter().flat_map(|w| w.fields.iter().cloned())),
            });
        }
    }
    out
}

/// Counts, most first (ties in order of the key).
fn most_first<K: Ord + Clone, S: From<(K, usize)>>(keys: impl Iterator<Item = K>) -> Vec<S> {
    let mut counts: BTreeMap<K, usize> = BTreeMap::new();
    for k in keys {
        *counts.entry(k).or_default() += 1;
    }
    let mut v: Vec<(K, usize)> = counts.into_iter().collect();
    v.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    v.into_iter().map(S::from).collect()
}

impl From<(Option<Writer>, usize)> for Side {
    fn from((writer, writes): (Option<Writer>, usize)) -> Side {
        Side { writer, writes }
    }
}

/// The fields of `o` that changed hands often enough, one fight per pair of
/// managers.
fn fights<'a>(o: &'a ObjectWrites, limits: &Limits, per_minute: f64) -> Vec<Fight<'a>> {
    let mut setters: BTreeMap<&str, Vec<&Writer>> = BTreeMap::new();
    for w in &o.writes {
        if let Some(writer) = &w.writer {
            for f in &w.fields {
                setters.entry(f).or_default().push(writer);
            }
        }
    }
    let mut by_pair: BTreeMap<(String, String), Fight<'a>> = BTreeMap::new();
    for (field, seq) in setters {
        let handovers = seq.windows(2).filter(|p| p[0].manager != p[1].manager).count();
        if handovers < limits.min_handovers.max(1) {
            continue;
        }
        // One side per manager name, shown with the entry it first wrote by.
        let mut first: BTreeMap<&str, &Writer> = BTreeMap::new();
        for w in &seq {
            first.entry(w.manager.as_str()).or_insert(w);
        }
        let sides: Vec<(&str, usize)> = most_first(seq.iter().map(|w| w.manager.as_str()));
        let side =
            |(name, writes): (&str, usize)| Side { writer: first.get(name).map(|w| (*w).clone()), writes };
        let (a, b) = (side(sides[0]), side(sides[1]));
        let key = {
            let mut k = [sides[0].0.to_string(), sides[1].0.to_string()];
            k.sort();
            (k[0].clone(), k[1].clone())
        };
        let fight = by_pair.entry(key).or_insert_with(|| Fight {
            object: o,
            fields: vec![],
            sides: [a.clone(), b.clone()],
            handovers: 0,
            per_minute,
        });
        fight.fields.push(field.to_string());
        if handovers > fight.handovers {
            fight.handovers = handovers;
            fight.sides = [a, b];
        }
    }
    by_pair.into_values().collect()
}

#[cfg(test)]
#[path = "tally_tests.rs"]
mod tests;
