//! Pure: what the manager keeps of a watched Runner, and of a child cached
//! as its full type (`ChildKind::View` = `ChildKind::Object`). Each loses
//! what reconcile never reads (managedFields, annotations, timestamps);
//! memory then grows with the fields we own, not with what the apiserver
//! and other controllers add. Kinds with many more fields, and many more
//! objects, are decoded into lean views instead ([`super::view`]).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use crate::api::Runner;

/// A child's metadata: identity, ownership, labels, and of managedFields
/// only the marker that says they need [`super::managed_fields::upgraded`]
/// before an apply. Harmless on a lean view, which decoded no more.
pub fn child_meta(m: &mut ObjectMeta) {
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
    r.metadata.managed_fields = None;
    owned_meta(&mut r.metadata);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kinds::served_fixture::{managed, runner as fixture, served};
    use serde_json::json;

    #[test]
    fn a_trimmed_runner_keeps_its_spec_and_finalizers() {
        let r = fixture();
        let mut live = served(&r, json!({ "metadata": managed() }));
        runner(&mut live);
        assert_eq!(live.spec, r.spec);
        assert!(live.metadata.managed_fields.is_none() && live.metadata.finalizers == r.metadata.finalizers);
        assert!(live.metadata.annotations.is_none());
    }
}
