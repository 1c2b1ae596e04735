//! `describe` as text: sections like `kubectl describe`, from a
//! [`Description`] that `cli::describe` gathered.

use k8s_openapi::api::core::v1::Event;
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;

use super::{age_of, table};
use crate::api::Runner;
use crate::cli::child_summary::ChildSummary;

/// Everything `describe` shows, as data.
#[derive(Debug, Clone)]
pub struct Description {
    pub runner: Runner,
    pub children: Vec<ChildSummary>,
    /// Events of the Runner, its children and their Pods, oldest first.
    pub events: Vec<Event>,
}

/// Renders every section; empty ones say `<none>` so the shape is stable.
pub fn describe(d: &Description, now: Timestamp) -> String {
    let r = &d.runner;
    let st = r.status.clone().unwrap_or_default();
    let mut o = String::new();
    let none = || "<none>".to_string();
    let kv = |o: &mut String, indent: usize, k: &str, v: String| {
        let label = format!("{:indent$}{k}:", "");
        o.push_str(&format!("{label:<24}{v}\n"));
    };
    kv(&mut o, 0, "Name", r.name_any());
    kv(&mut o, 0, "Namespace", r.namespace().unwrap_or_default());
    kv(&mut o, 0, "Labels", map_or_none(r.metadata.labels.as_ref()));
    let created = r.metadata.creation_timestamp.as_ref().map(|t| &t.0);
    kv(
        &mut o,
        0,
        "Created",
        created.map(|t| format!("{t} ({} ago)", age_of(Some(t), now))).unwrap_or_else(none),
    );
    if let Some(t) = &r.metadata.deletion_timestamp {
        kv(&mut o, 0, "Deleting since", format!("{} ({} ago)", t.0, age_of(Some(&t.0), now)));
    }
    let finalizers = r.metadata.finalizers.clone().unwrap_or_default().join(", ");
    kv(&mut o, 0, "Finalizers", if finalizers.is_empty() { none() } else { finalizers });
    o.push_str("Spec:\n");
    kv(&mut o, 2, "Image", r.spec.image.clone());
    kv(&mut o, 2, "Replicas", r.spec.replicas.to_string());
    kv(&mut o, 2, "Port", r.spec.port.to_string());
    kv(&mut o, 2, "Host", r.spec.host.clone().unwrap_or_else(none));
    o.push_str("Status:\n");
    if r.status.is_none() {
        o.push_str("  <none> (no manager has reconciled this Runner yet; see `kubectl runner diagnose`)\n");
    } else {
        kv(&mut o, 2, "Phase", st.phase.to_string());
        kv(&mut o, 2, "Ready", format!("{}/{}", st.ready_replicas, r.spec.replicas));
        kv(&mut o, 2, "URL", st.url.clone().unwrap_or_else(none));
        kv(&mut o, 2, "Message", st.message.clone().unwrap_or_else(none));
        let generation = r.metadata.generation.map(|g| g.to_string()).unwrap_or_else(|| "?".into());
        let observed = st.observed_generation.map(|g| g.to_string()).unwrap_or_else(|| "<none>".into());
        kv(&mut o, 2, "Observed generation", format!("{observed} (spec generation {generation})"));
    }
    o.push_str("Conditions:\n");
    if st.conditions.is_empty() {
        o.push_str("  <none>\n");
    } else {
        let rows = st.conditions.iter().map(|c| {
            vec![
                c.type_.clone(),
                c.status.clone(),
                c.reason.clone(),
                age_of(Some(&c.last_transition_time.0), now),
                c.message.clone(),
            ]
        });
        o.push_str(&indent(&table(Some(vec!["TYPE", "STATUS", "REASON", "AGE", "MESSAGE"]), rows)));
    }
    o.push_str("Children:\n");
    let rows = d.children.iter().map(|c| {
        vec![
            c.kind.to_string(),
            c.name.clone(),
            if c.owned { "yes".into() } else { "no".into() },
            c.state.clone(),
        ]
    });
    o.push_str(&indent(&table(Some(vec!["KIND", "NAME", "OWNED", "STATE"]), rows)));
    o.push_str("Events:\n");
    if d.events.is_empty() {
        o.push_str("  <none>\n");
    } else {
        let rows = d.events.iter().map(|e| event_row(e, now));
        o.push_str(&indent(&table(Some(vec!["TYPE", "REASON", "AGE", "FROM", "OBJECT", "MESSAGE"]), rows)));
    }
    o
}

fn event_row(e: &Event, now: Timestamp) -> Vec<String> {
    let count = e.count.filter(|c| *c > 1).map(|c| format!(" (x{c})")).unwrap_or_default();
    let from = e
        .reporting_component
        .clone()
        .filter(|s| !s.is_empty())
        .or_else(|| e.source.as_ref().and_then(|s| s.component.clone()))
        .unwrap_or_default();
    let obj = &e.involved_object;
    vec![
        e.type_.clone().unwrap_or_default(),
        e.reason.clone().unwrap_or_default(),
        age_of(event_time(e).as_ref(), now) + &count,
        from,
        format!("{}/{}", obj.kind.clone().unwrap_or_default(), obj.name.clone().unwrap_or_default()),
        e.message.clone().unwrap_or_default().trim().replace('\n', " "),
    ]
}

/// When an Event last happened: lastTimestamp, else eventTime (events.k8s.io
/// writers), else firstTimestamp, else creation.
pub fn event_time(e: &Event) -> Option<Timestamp> {
    e.last_timestamp
        .as_ref()
        .map(|t| t.0)
        .or_else(|| e.event_time.as_ref().map(|t| t.0))
        .or_else(|| e.first_timestamp.as_ref().map(|t| t.0))
        .or_else(|| e.metadata.creation_timestamp.as_ref().map(|t| t.0))
}

fn indent(s: &str) -> String {
    s.lines().map(|l| format!("  {l}\n")).collect()
}

fn map_or_none(m: Option<&std::collections::BTreeMap<String, String>>) -> String {
    match m {
        Some(m) if !m.is_empty() => m.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(","),
        _ => "<none>".into(),
    }
}
