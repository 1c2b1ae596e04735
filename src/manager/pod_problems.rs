//! The manager's only view of Pods: for each Runner (by UID), the Pods that
//! are stuck, why, and their ReplicaSet's template hash. A healthy Pod takes
//! no memory here, and a Pod event triggers a reconcile only when it changes
//! a problem its Runner could report, so a thousand Pods becoming Ready
//! cost a thousand small parses and no passes.
//!
//! Which stuck Pod the Runner reports depends on its Deployment
//! ([`crate::rollout::CurrentPods`]): a pass asks with the rollout it just
//! read, so a Pod of a ReplicaSet being replaced fails nothing.
//!
//! ```text
//! watch Pods (UID label) ─► PodProblems::apply (pure PodView::problem) ─► changed? ─► ObjectRef<Runner>
//! ```

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

use kube::ResourceExt;
use kube::runtime::reflector::ObjectRef;
use kube::runtime::watcher::Event;

use super::pod_view::PodView as Pod;
use crate::api::{RUNNER_UID_LABEL, Runner};
use crate::rollout::CurrentPods;

/// (reason, message) of one stuck Pod.
pub type Problem = (String, String);

/// One stuck Pod: its problem, and which template it runs.
#[derive(Debug, Clone, PartialEq)]
struct Stuck {
    template_hash: Option<String>,
    problem: Problem,
}

/// A Runner's stuck Pods by name (sorted: the first current one is the one
/// reported).
#[derive(Debug, Default, Clone, PartialEq)]
struct Entry {
    /// Where to send the trigger: the Runner's namespace and name.
    namespace: String,
    runner: String,
    pods: BTreeMap<String, Stuck>,
}

#[derive(Debug, Default)]
struct State {
    by_runner: HashMap<String, Entry>,
    /// Filled between `Init` and `InitDone` of a relist, per watched
    /// namespace (`None`: all), then swapped in for that namespace's entries.
    relists: HashMap<Option<String>, HashMap<String, Entry>>,
}

/// Cheap to clone; shared by the Pod watch and reconcile.
#[derive(Clone, Default)]
pub struct PodProblems(Arc<Mutex<State>>);

impl PodProblems {
    /// The problem the Runner with this UID reports: that of its first
    /// stuck Pod among the `current` ones.
    pub fn first(&self, namespace: &str, runner_uid: &str, current: &CurrentPods) -> Option<Problem> {
        let state = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let pods = &state.by_runner.get(&key(namespace, runner_uid))?.pods;
        pods.values().find(|s| current.includes(s.template_hash.as_deref())).map(|s| s.problem.clone())
    }

    /// Folds one watch event in; returns the Runners whose reported problem
    /// changed (they need a pass).
    pub fn apply(&self, event: Event<Pod>) -> Vec<ObjectRef<Runner>> {
        self.apply_in(None, event)
    }

    /// [`PodProblems::apply`] for the watch of one namespace (`None`: all):
    /// its relist replaces only that namespace's entries.
    pub fn apply_in(&self, namespace: Option<&str>, event: Event<Pod>) -> Vec<ObjectRef<Runner>> {
        let mut state = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let scope = namespace.map(String::from);
        match event {
            Event::Apply(pod) => set(&mut state.by_runner, &pod, pod.problem()),
            Event::Delete(pod) => set(&mut state.by_runner, &pod, None),
            Event::Init => {
                state.relists.insert(scope, HashMap::new());
                vec![]
            }
            Event::InitApply(pod) => {
                set(state.relists.entry(scope).or_default(), &pod, pod.problem());
                vec![]
            }
            Event::InitDone => {
                let new = state.relists.remove(&scope).unwrap_or_default();
                let old: HashMap<String, Entry> =
                    state.by_runner.extract_if(|_, e| namespace.is_none_or(|ns| e.namespace == ns)).collect();
                let changed = changed_between(&old, &new);
                state.by_runner.extend(new);
                changed
            }
        }
    }
}

/// Entries are keyed by namespace and Runner UID: a label is only a
/// string, and one copied into another namespace must not mix Runners.
fn key(namespace: &str, runner_uid: &str) -> String {
    format!("{namespace}/{runner_uid}")
}

/// What a Runner could report, whichever Pods are current: the first stuck
/// Pod of each template, in name order (so the first of all comes first).
fn reportable(entry: Option<&Entry>) -> Vec<&Stuck> {
    let mut out: Vec<&Stuck> = vec![];
    for s in entry.iter().flat_map(|e| e.pods.values()) {
        if !out.iter().any(|o| o.template_hash == s.template_hash) {
            out.push(s);
        }
    }
    out
}

/// Records (or clears) one Pod's problem; returns its Runner when a
/// problem it could report changed.
fn set(map: &mut HashMap<String, Entry>, pod: &Pod, problem: Option<Problem>) -> Vec<ObjectRef<Runner>> {
    let (Some(uid), Some(ns)) = (pod.labels().get(RUNNER_UID_LABEL), pod.namespace()) else {
        return vec![];
    };
    let uid = &key(&ns, uid);
    let Some(runner) = pod.labels().get(crate::ownership::INSTANCE_LABEL) else { return vec![] };
    let before: Vec<Stuck> = reportable(map.get(uid)).into_iter().cloned().collect();
    match problem {
        Some(problem) => {
            let entry = map.entry(uid.clone()).or_insert_with(|| Entry {
                namespace: ns.clone(),
                runner: runner.clone(),
                pods: BTreeMap::new(),
            });
            let template_hash = pod.template_hash().map(String::from);
            entry.pods.insert(pod.name_any(), Stuck { template_hash, problem });
        }
        None => {
            if let Some(entry) = map.get_mut(uid) {
                entry.pods.remove(&pod.name_any());
                if entry.pods.is_empty() {
                    map.remove(uid);
                }
            }
        }
    }
    let after = reportable(map.get(uid));
    if after.into_iter().eq(before.iter()) { vec![] } else { vec![ObjectRef::new(runner).within(&ns)] }
}

/// Runners with a problem they could report that differs between two snapshots.
fn changed_between(old: &HashMap<String, Entry>, new: &HashMap<String, Entry>) -> Vec<ObjectRef<Runner>> {
    old.iter()
        .chain(new.iter())
        .filter(|(uid, _)| reportable(old.get(*uid)) != reportable(new.get(*uid)))
        .map(|(_, e)| ObjectRef::new(&e.runner).within(&e.namespace))
        .collect::<std::collections::HashSet<_>>()
        .into_iter()
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const ALL: &CurrentPods = &CurrentPods::All;

    fn pod(name: &str, uid: &str, waiting: Option<&str>) -> Pod {
        of_template(name, uid, "h1", waiting)
    }

    fn of_template(name: &str, uid: &str, hash: &str, waiting: Option<&str>) -> Pod {
        let state = match waiting {
            Some(r) => json!({ "waiting": { "reason": r, "message": "m" } }),
            None => json!({ "running": {} }),
        };
        serde_json::from_value(json!({
            "metadata": { "name": name, "namespace": "team",
                          "labels": { RUNNER_UID_LABEL: uid, crate::ownership::INSTANCE_LABEL: format!("r-{uid}"),
                                      crate::rollout::POD_TEMPLATE_HASH_LABEL: hash } },
            "status": { "containerStatuses": [{ "name": "runner", "image": "x", "imageID": "", "ready": false,
                                                "restartCount": 0, "state": state }] },
        }))
        .unwrap()
    }

    #[test]
    fn a_stuck_pod_triggers_its_runner_once_and_is_reported() {
        let p = PodProblems::default();
        let hit = p.apply(Event::Apply(pod("web-a", "u1", Some("ImagePullBackOff"))));
        assert_eq!(hit, vec![ObjectRef::new("r-u1").within("team")]);
        assert_eq!(p.first("team", "u1", ALL).map(|x| x.0).as_deref(), Some("ImagePullBackOff"));
        // The same problem again: no pass.
        assert!(p.apply(Event::Apply(pod("web-a", "u1", Some("ImagePullBackOff")))).is_empty());
    }

    #[test]
    fn healthy_pods_take_no_entry_and_trigger_nothing() {
        let p = PodProblems::default();
        assert!(p.apply(Event::Apply(pod("web-a", "u1", None))).is_empty());
        assert!(p.apply(Event::Apply(pod("web-a", "u1", Some("ContainerCreating")))).is_empty());
        assert!(p.0.lock().unwrap().by_runner.is_empty());
    }

    #[test]
    fn recovery_or_deletion_of_the_stuck_pod_clears_the_problem_and_triggers() {
        let p = PodProblems::default();
        p.apply(Event::Apply(pod("web-a", "u1", Some("CrashLoopBackOff"))));
        assert_eq!(p.apply(Event::Apply(pod("web-a", "u1", None))).len(), 1);
        assert_eq!(p.first("team", "u1", ALL), None);
        p.apply(Event::Apply(pod("web-b", "u1", Some("ErrImagePull"))));
        assert_eq!(p.apply(Event::Delete(pod("web-b", "u1", None))).len(), 1);
        assert!(p.0.lock().unwrap().by_runner.is_empty());
    }

    #[test]
    fn the_first_pod_by_name_is_reported() {
        let p = PodProblems::default();
        p.apply(Event::Apply(pod("web-b", "u1", Some("CrashLoopBackOff"))));
        assert_eq!(p.apply(Event::Apply(pod("web-a", "u1", Some("ImagePullBackOff")))).len(), 1);
        assert_eq!(p.first("team", "u1", ALL).map(|x| x.0).as_deref(), Some("ImagePullBackOff"));
    }

    #[test]
    fn a_relist_replaces_the_view_and_triggers_only_what_changed() {
        let p = PodProblems::default();
        p.apply(Event::Apply(pod("web-a", "u1", Some("CrashLoopBackOff"))));
        p.apply(Event::Apply(pod("web-c", "u3", Some("ErrImagePull"))));
        assert!(p.apply(Event::Init).is_empty());
        // u1's Pod is gone during the disconnect; u3 unchanged; u2 is new.
        assert!(p.apply(Event::InitApply(pod("web-c", "u3", Some("ErrImagePull")))).is_empty());
        assert!(p.apply(Event::InitApply(pod("web-b", "u2", Some("ImagePullBackOff")))).is_empty());
        let mut hit: Vec<String> = p.apply(Event::InitDone).into_iter().map(|r| r.name).collect();
        hit.sort();
        assert_eq!(hit, ["r-u1", "r-u2"]);
        assert_eq!(p.first("team", "u1", ALL), None);
        assert!(p.first("team", "u2", ALL).is_some() && p.first("team", "u3", ALL).is_some());
    }

    #[test]
    fn a_relist_of_one_watched_namespace_leaves_the_others_problems_alone() {
        let p = PodProblems::default();
        let mut other = pod("web-a", "u9", Some("CrashLoopBackOff"));
        other.metadata.namespace = Some("elsewhere".into());
        p.apply_in(Some("elsewhere"), Event::Apply(other));
        p.apply_in(Some("team"), Event::Apply(pod("web-b", "u1", Some("ErrImagePull"))));
        p.apply_in(Some("team"), Event::Init);
        let hit: Vec<String> =
            p.apply_in(Some("team"), Event::InitDone).into_iter().map(|r| r.name).collect();
        assert_eq!(hit, ["r-u1"], "team's Pod went away during the relist");
        assert!(p.first("elsewhere", "u9", ALL).is_some(), "the other namespace's problem is kept");
    }

    #[test]
    fn a_stuck_pod_of_a_replica_set_being_replaced_is_not_reported() {
        let p = PodProblems::default();
        p.apply(Event::Apply(of_template("web-old", "u1", "h0", Some("ImagePullBackOff"))));
        p.apply(Event::Apply(of_template("web-new", "u1", "h1", None)));
        let reported = |current: CurrentPods| p.first("team", "u1", &current).map(|x| x.0);
        assert_eq!(reported(CurrentPods::Template("h1".into())), None, "the new template's Pods are fine");
        assert_eq!(reported(CurrentPods::Unknown), None, "rolling out: no Pod speaks");
        assert_eq!(reported(CurrentPods::Template("h0".into())).as_deref(), Some("ImagePullBackOff"));
        assert_eq!(reported(CurrentPods::All).as_deref(), Some("ImagePullBackOff"));
    }

    #[test]
    fn a_stuck_pod_of_another_template_triggers_even_behind_an_earlier_stuck_pod() {
        let p = PodProblems::default();
        p.apply(Event::Apply(of_template("web-a", "u1", "h0", Some("ImagePullBackOff"))));
        let hit = p.apply(Event::Apply(of_template("web-b", "u1", "h1", Some("CrashLoopBackOff"))));
        assert_eq!(hit.len(), 1, "web-b is the first stuck Pod of its template");
        assert_eq!(
            p.first("team", "u1", &CurrentPods::Template("h1".into())).map(|x| x.0).as_deref(),
            Some("CrashLoopBackOff")
        );
        // A second stuck Pod of a template, after the first by name: nothing new to report.
        assert!(p.apply(Event::Apply(of_template("web-c", "u1", "h1", Some("ErrImagePull")))).is_empty());
        // Its first one recovers: the second becomes what the template reports.
        assert_eq!(p.apply(Event::Apply(of_template("web-b", "u1", "h1", None))).len(), 1);
    }
}
