//! Pure: what the manager keeps of a watched Runner or Ingress. Each loses
//! what reconcile never reads (managedFields, annotations, timestamps,
//! the load balancer status); memory then grows with the fields we own,
//! not with what the apiserver and other controllers add. Deployments and
//! Services, many more fields and many more of them, are decoded into
//! views instead ([`super::child_view`]).
//!
//! The contract that keeps drift detection right: a trimmed live Ingress
//! still holds every field [`super::desired`] sets. The tests check it.

use k8s_openapi::api::networking::v1::Ingress;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use crate::api::Runner;

/// Keeps identity, ownership and the fields reconcile reads.
fn meta(m: &mut ObjectMeta) {
    m.managed_fields = None;
    owned_meta(m);
}

/// A child's metadata: as [`meta`], but keeps the marker that says its
/// managedFields need [`super::managed_fields::upgraded`] before an apply.
fn child_meta(m: &mut ObjectMeta) {
    super::managed_fields::keep_marker(m);
    owned_meta(m);
}

fn owned_meta(m: &mut ObjectMeta) {
    m.annotations = None;
    m.creation_timestamp = None;
    m.generate_name = None;
}

/// A Runner as the Controller caches it: spec, status and metadata without
/// managedFields or annotations (`kubectl apply` puts the whole object in one).
pub fn runner(r: &mut Runner) {
    meta(&mut r.metadata);
}

/// An Ingress: its spec (all ours); the load balancer status is not read.
pub fn ingress(i: &mut Ingress) {
    child_meta(&mut i.metadata);
    i.status = None;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::manager::desired;
    use crate::manager::served_fixture::{is_subset, managed, runner, served};
    use serde_json::json;

    #[test]
    fn a_trimmed_ingress_and_runner_keep_their_spec() {
        let r = runner();
        let mut i = served(&desired::ingress(&r).unwrap(), json!({ "metadata": managed() }));
        ingress(&mut i);
        let want = serde_json::to_value(desired::ingress(&r).unwrap()).unwrap();
        assert!(is_subset(&want, &serde_json::to_value(&i).unwrap()));
        let mut live = served(&r, json!({ "metadata": managed() }));
        super::runner(&mut live);
        assert_eq!(live.spec, r.spec);
        assert!(live.metadata.managed_fields.is_none() && live.metadata.finalizers == r.metadata.finalizers);
    }
}
