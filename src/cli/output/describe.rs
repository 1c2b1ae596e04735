//! `describe` as text: sections like `kubectl describe`, from a
//! [`Description`] that `cli::describe` gathered.

use k8s_openapi::api::core::v1::Event;
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;

use super::{Safe, age_of, table};
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

/// The text `describe` builds. Only literal lines, [`Safe`] values and
/// rendered tables go in, so nothing from the cluster lands raw.
struct Doc(String);

impl Doc {
    fn line(&mut self, text: &'static str) {
        self.0.push_str(text);
        self.0.push('\n');
    }

    /// `Key:` padded to 24 columns (after `indent` spaces), then the value.
    fn kv(&mut self, indent: usize, key: &'static str, value: impl Into<Safe>) {
        let label = format!("{:indent$}{key}:", "");
        self.0.push_str(&format!("{label:<24}{}\n", value.into()));
    }

    /// A table indented by two spaces.
    fn table(&mut self, header: &[&str], rows: impl IntoIterator<Item = Vec<Safe>>) {
        for l in table(Some(header), rows).lines() {
            self.0.push_str(&format!("  {l}\n"));
        }
    }
}

/// Renders every section; empty ones say `<none>` so the shape is stable.
pub fn describe(d: &Description, now: Timestamp) -> String {
    let r = &d.runner;
    let st = r.status.clone().unwrap_or_default();
    let mut o = Doc(String::new());
    let none = || "<none>".to_string();
    o.kv(0, "Name", r.name_any());
    o.kv(0, "Namespace", r.namespace().unwrap_or_default());
    o.kv(0, "Labels", map_or_none(r.metadata.labels.as_ref()));
    let created = r.metadata.creation_timestamp.as_ref().map(|t| &t.0);
    o.kv(0, "Created", created.map(|t| format!("{t} ({} ago)", age_of(Some(t), now))).unwrap_or_else(none));
    if let Some(t) = &r.metadata.deletion_timestamp {
        o.kv(0, "Deleting since", format!("{} ({} ago)", t.0, age_of(Some(&t.0), now)));
    }
    let finalizers = r.metadata.finalizers.clone().unwrap_or_default().join(", ");
    o.kv(0, "Finalizers", if finalizers.is_empty() { none() } else { finalizers });
    o.line("Spec:");
    o.kv(2, "Image", &r.spec.image);
    o.kv(2, "Replicas", r.spec.replicas.to_string());
    o.kv(2, "Port", r.spec.expose.port.to_string());
    let hosts = r.spec.expose.hosts.join(", ");
    o.kv(2, "Hosts", if hosts.is_empty() { none() } else { hosts });
    o.line("Status:");
    if r.status.is_none() {
        o.line("  <none> (no manager has reconciled this Runner yet; see `kubectl runner diagnose`)");
    } else {
        o.kv(2, "Phase", st.phase.to_string());
        o.kv(2, "Ready", format!("{}/{}", st.ready_replicas, r.spec.replicas));
        o.kv(2, "URL", st.url.clone().unwrap_or_else(none));
        o.kv(2, "Message", st.message.clone().unwrap_or_else(none));
        let generation = r.metadata.generation.map(|g| g.to_string()).unwrap_or_else(|| "?".into());
        let observed = st.observed_generation.map(|g| g.to_string()).unwrap_or_else(|| "<none>".into());
        o.kv(2, "Observed generation", format!("{observed} (spec generation {generation})"));
    }
    o.line("Conditions:");
    if st.conditions.is_empty() {
        o.line("  <none>");
    } else {
        let rows = st.conditions.iter().map(|c| {
            vec![
                Safe::new(&c.type_),
                Safe::new(&c.status),
                Safe::new(&c.reason),
                age_of(Some(&c.last_transition_time.0), now).into(),
                Safe::new(&c.message),
            ]
        });
        o.table(&["TYPE", "STATUS", "REASON", "AGE", "MESSAGE"], rows);
    }
    o.line("Children:");
    let rows = d.children.iter().map(|c| {
        vec![
            c.kind.to_string().into(),
            Safe::new(&c.name),
            if c.owned { "yes" } else { "no" }.into(),
            Safe::new(&c.state),
        ]
    });
    o.table(&["KIND", "NAME", "OWNED", "STATE"], rows);
    o.line("Events:");
    if d.events.is_empty() {
        o.line("  <none>");
    } else {
        let rows = d.events.iter().map(|e| event_row(e, now));
        o.table(&["TYPE", "REASON", "AGE", "FROM", "OBJECT", "MESSAGE"], rows);
    }
    o.0
}

fn event_row(e: &Event, now: Timestamp) -> Vec<Safe> {
    let count = e.count.filter(|c| *c > 1).map(|c| format!(" (x{c})")).unwrap_or_default();
    let from = e
        .reporting_component
        .clone()
        .filter(|s| !s.is_empty())
        .or_else(|| e.source.as_ref().and_then(|s| s.component.clone()))
        .unwrap_or_default();
    let obj = &e.involved_object;
    vec![
        e.type_.clone().unwrap_or_default().into(),
        e.reason.clone().unwrap_or_default().into(),
        (age_of(event_time(e).as_ref(), now) + &count).into(),
        from.into(),
        format!("{}/{}", obj.kind.clone().unwrap_or_default(), obj.name.clone().unwrap_or_default()).into(),
        e.message.clone().unwrap_or_default().trim().replace('\n', " ").into(),
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

fn map_or_none(m: Option<&std::collections::BTreeMap<String, String>>) -> String {
    match m {
        Some(m) if !m.is_empty() => m.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(","),
        _ => "<none>".into(),
    }
}
