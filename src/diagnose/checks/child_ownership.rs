//! The children: each child the spec wants (of every kind in
//! [`crate::kinds::all`]: an Ingress only with `spec.host`, a
//! PodDisruptionBudget only from 2 replicas) exists and is controlled by
//! this Runner's UID. A missing child comes with its likely cause; a same-name object
//! controlled by someone else is what the manager refuses to adopt.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::ResourceExt;

use super::super::finding::{Code, Finding};
use super::super::snapshot::{RunnerState, Snapshot};
use super::{controlled_by, controller, ns_flag, runner_age, runner_ref};
use crate::api::{FINALIZER, RUNNER_UID_LABEL, condition};
use crate::diagnose::view::manager::{self as manager_view, View};

/// One child kind: the resource the manager writes it through, whether
/// the spec wants it, whether it could be read, and the same-name object
/// found, if any.
struct Slot<'a> {
    kind: &'static str,
    resource: &'static str,
    expected: bool,
    readable: bool,
    found: Option<&'a ObjectMeta>,
}

fn slots(rs: &RunnerState) -> Vec<Slot<'_>> {
    crate::kinds::all()
        .iter()
        .map(|k| Slot {
            kind: k.kind(),
            resource: k.plural(),
            expected: k.wanted(&rs.runner),
            readable: rs.children.is_readable(k.kind()),
            found: rs.children.get(k.kind()).map(|o| &o.metadata),
        })
        .collect()
}

/// Kinds of the expected children that are missing (of those that could be
/// read), unless the Runner is being deleted or its children are
/// [`still_being_made`].
pub fn missing(s: &Snapshot, rs: &RunnerState) -> Vec<&'static str> {
    if rs.runner.metadata.deletion_timestamp.is_some() || still_being_made(s, rs) {
        return vec![];
    }
    slots(rs)
        .into_iter()
        .filter(|sl| sl.expected && sl.readable && sl.found.is_none())
        .map(|sl| sl.kind)
        .collect()
}

/// True while a manager may still be making the Runner's children: the
/// Runner is younger than the grace period, a manager may be running, and
/// its status does not say the children were made for this generation.
/// Otherwise nothing is coming, and waiting only hides a missing child.
fn still_being_made(s: &Snapshot, rs: &RunnerState) -> bool {
    runner_age(s, rs) < s.thresholds.grace
        && !manager_view::view(s).none_running()
        && !made_for_this_generation(rs)
}

/// The status was written for the Runner's current generation: the manager
/// writes it after a pass that brought the children to that spec.
fn made_for_this_generation(rs: &RunnerState) -> bool {
    let generation = rs.runner.metadata.generation;
    generation.is_some() && rs.runner.status.as_ref().and_then(|st| st.observed_generation) >= generation
}

pub fn check(s: &Snapshot, rs: &RunnerState) -> Vec<Finding> {
    if rs.runner.metadata.deletion_timestamp.is_some() {
        return vec![];
    }
    let mut out = vec![];
    let missing = missing(s, rs);
    for sl in slots(rs) {
        if missing.contains(&sl.kind) {
            out.push(missing_finding(s, rs, sl.kind, sl.resource));
            continue;
        }
        let Some(meta) = sl.found else { continue };
        if !controlled_by(meta, rs) {
            if sl.expected {
                out.push(foreign_finding(rs, sl.kind, meta));
            }
            continue;
        }
        if sl.kind == "Ingress" {
            out.extend(ingress_finding(rs));
        }
    }
    out
}

fn missing_finding(s: &Snapshot, rs: &RunnerState, kind: &str, resource: &str) -> Finding {
    let ns = rs.runner.namespace().unwrap_or_default();
    let name = rs.runner.name_any();
    let mut f = Finding::error(Code::ChildMissing, runner_ref(rs), format!("{kind} {ns}/{name} is missing"));
    let v = manager_view::view(s);
    let mut explained = false;
    if v.absent() {
        f = f.evidence(View::ABSENT_SHORT);
        explained = true;
    }
    if v.ignores(&ns) {
        f = f.evidence(format!(
            "the in-cluster manager watches only {}, not {ns}",
            v.watched.clone().unwrap_or_default().join(", ")
        ));
        explained = true;
    }
    for a in s.access.iter().filter(|a| {
        !a.allowed
            && a.verb == "create"
            && a.permission.resource == resource
            && (a.namespace == ns || a.namespace.is_empty())
    }) {
        f = f.evidence(format!("{} can't create {} in {ns}", s.service_account, a.permission.resource_ref()));
        explained = true;
    }
    if !rs.runner.finalizers().iter().any(|x| x == FINALIZER) {
        f = f.evidence(format!("the Runner has no {FINALIZER} finalizer: no manager has reconciled it yet"));
    }
    if let Some(c) = runner_condition(rs, condition::CHILDREN_OWNED).filter(|c| c.status == "False") {
        f = f.evidence(format!("ChildrenOwned=False ({}): {}", c.reason, c.message));
    }
    if explained {
        f
    } else {
        f.evidence("the manager appears to run and be allowed to create it; its logs say why it did not").fix(
            format!(
                "kubectl -n {} logs deployment/{}",
                crate::manifests::MANAGER_NAMESPACE,
                crate::manifests::MANAGER_NAME
            ),
        )
    }
}

fn foreign_finding(rs: &RunnerState, kind: &str, meta: &ObjectMeta) -> Finding {
    let ns = rs.runner.namespace().unwrap_or_default();
    let name = rs.runner.name_any();
    let uid = rs.runner.metadata.uid.clone().unwrap_or_default();
    let delete = format!("kubectl {} delete {} {name}", ns_flag(rs), kind.to_lowercase());
    let mut f = match controller(meta) {
        Some(o) if o.kind == "Runner" && o.name == name => Finding::error(
            Code::ChildStaleOwner,
            runner_ref(rs),
            format!("{kind} {ns}/{name} belongs to an earlier Runner of the same name; the manager will not adopt it"),
        )
        .evidence(format!("its controller is Runner {name} uid {}, this Runner is uid {uid}", o.uid))
        .fix(format!("{delete}   # a leftover of the deleted Runner; the manager then creates a fresh one")),
        Some(o) => Finding::error(
            Code::ChildForeign,
            runner_ref(rs),
            format!("{kind} {ns}/{name} is controlled by {} {}; the manager refuses to adopt it", o.kind, o.name),
        )
        .fix(format!("rename the Runner, or {delete} if it is not needed")),
        None => Finding::error(
            Code::ChildForeign,
            runner_ref(rs),
            format!("{kind} {ns}/{name} exists without an owner; the manager refuses to adopt it"),
        )
        .fix(format!("rename the Runner, or {delete} if it is not needed")),
    };
    let writers = spec_writers(meta);
    if !writers.is_empty() {
        f = f.evidence(format!("written by field manager {}", writers.join(", ")));
    }
    match meta.labels.as_ref().and_then(|l| l.get(RUNNER_UID_LABEL)) {
        Some(v) if *v == uid => {}
        Some(v) => f = f.evidence(format!("label {RUNNER_UID_LABEL}={v}, not this Runner's UID")),
        None => f = f.evidence(format!("no {RUNNER_UID_LABEL} label")),
    }
    if let Some(c) = runner_condition(rs, condition::CHILDREN_OWNED).filter(|c| c.status == "False") {
        f = f.evidence(format!("ChildrenOwned=False ({}): {}", c.reason, c.message));
    }
    let refused =
        rs.events.iter().rev().find(|e| e.reason.as_deref() == Some(condition::REASON_ADOPTION_REFUSED));
    if let Some(e) = refused {
        f = f.evidence(format!("Event AdoptionRefused: {}", e.message.clone().unwrap_or_default()));
    }
    f
}

/// Field managers that wrote the object itself (not its status), quoted:
/// who made it, e.g. `"kubectl-create"` or `"helm"`.
fn spec_writers(meta: &ObjectMeta) -> Vec<String> {
    let mut out: Vec<String> = meta
        .managed_fields
        .iter()
        .flatten()
        .filter(|m| m.subresource.as_deref().unwrap_or("").is_empty())
        .filter_map(|m| m.manager.as_ref().map(|n| format!("{n:?}")))
        .collect();
    out.dedup();
    out
}

fn ingress_finding(rs: &RunnerState) -> Option<Finding> {
    let ing = rs.children.typed::<k8s_openapi::api::networking::v1::Ingress>()?;
    let hosts = crate::kinds::ingress::hosts(&ing).unwrap_or_default();
    let ns = rs.runner.namespace().unwrap_or_default();
    let name = rs.runner.name_any();
    let want = &rs.runner.spec.expose.hosts;
    if want.is_empty() {
        return Some(
            Finding::warning(
                Code::IngressWithoutHost,
                runner_ref(rs),
                format!("Ingress {ns}/{name} still exists although spec.expose.hosts is unset"),
            )
            .evidence("the manager deletes the Ingress when the hosts are removed; it has not (yet)"),
        );
    }
    let routed: Vec<&str> = hosts.split(',').filter(|h| !h.is_empty()).collect();
    if routed != *want {
        return Some(
            Finding::warning(
                Code::IngressHostMismatch,
                runner_ref(rs),
                format!(
                    "Ingress {ns}/{name} routes {}, not spec.expose.hosts {}",
                    if routed.is_empty() { "no host".into() } else { routed.join(", ") },
                    want.join(", ")
                ),
            )
            .evidence("the manager has not applied the latest hosts"),
        );
    }
    None
}

fn runner_condition<'a>(
    rs: &'a RunnerState,
    type_: &str,
) -> Option<&'a k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition> {
    rs.runner.status.as_ref()?.conditions.iter().find(|c| c.type_ == type_)
}

#[cfg(test)]
#[path = "child_ownership_tests.rs"]
mod tests;
