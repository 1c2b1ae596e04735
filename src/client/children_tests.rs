//! The joins of [`super::list`] and [`super::index`], without a cluster.

use std::collections::BTreeSet;

use kube::api::{DynamicObject, ObjectMeta};
use kube::core::PartialObjectMeta;

use super::*;

fn kind(name: &str) -> &'static dyn Kind {
    kinds::by_name(name).expect("a child kind")
}

fn object(
    kind_name: &str,
    ns: &str,
    name: &str,
    uid_label: Option<&str>,
) -> (&'static dyn Kind, DynamicObject) {
    let k = kind(kind_name);
    let mut o = DynamicObject::new(name, &k.api_resource()).within(ns);
    if let Some(uid) = uid_label {
        o.metadata.labels = Some([(RUNNER_UID_LABEL.to_string(), uid.to_string())].into());
    }
    (k, o)
}

fn key(ns: &str, name: &str) -> Key {
    (ns.into(), name.into())
}

fn runners(keys: &[(&str, &str)]) -> BTreeSet<Key> {
    keys.iter().map(|(ns, n)| key(ns, n)).collect()
}

#[test]
fn a_same_name_object_without_our_label_is_the_runners_child() {
    let wanted = runners(&[("a", "web")]);
    let joined = join([object("Deployment", "a", "web", None)], Some(&wanted));
    let kids = &joined[&key("a", "web")];
    assert!(kids.get("Deployment").is_some(), "the foreign Deployment is found: {kids:?}");
}

#[test]
fn children_of_other_runners_and_namespaces_are_not_mixed_up() {
    let wanted = runners(&[("a", "web"), ("a", "api"), ("b", "web")]);
    let listed = [
        object("Deployment", "a", "web", Some("u1")),
        object("Service", "a", "api", Some("u2")),
        object("Deployment", "b", "web", Some("u3")),
        object("Service", "a", "unrelated", None),
    ];
    let joined = join(listed, Some(&wanted));
    assert_eq!(joined.len(), 3, "one entry per Runner, none for the unrelated Service");
    let names = |ns, n| joined[&key(ns, n)].names(|_| true);
    assert_eq!(names("a", "web"), ["Deployment web"]);
    assert_eq!(names("a", "api"), ["Service api"]);
    assert_eq!(names("b", "web"), ["Deployment web"]);
    let b = joined[&key("b", "web")].get("Deployment").unwrap();
    assert_eq!(b.metadata.namespace.as_deref(), Some("b"), "b's web is b's own Deployment");
}

#[test]
fn a_runner_with_no_children_has_an_empty_entry() {
    let wanted = runners(&[("a", "lonely")]);
    let joined = join([object("Deployment", "a", "web", Some("u1"))], Some(&wanted));
    assert!(joined[&key("a", "lonely")].is_empty());
    assert!(!joined.contains_key(&key("a", "web")), "a Runner not asked about is left out");
}

#[test]
fn children_of_one_runner_keep_the_kinds_order() {
    let wanted = runners(&[("a", "web")]);
    let listed = [object("Service", "a", "web", Some("u")), object("Deployment", "a", "web", Some("u"))];
    let joined = join(listed, Some(&wanted));
    assert_eq!(joined[&key("a", "web")].names(|_| true), ["Deployment web", "Service web"]);
}

#[test]
fn the_index_keeps_every_key_found() {
    let joined =
        join([object("Deployment", "a", "web", Some("u")), object("Service", "b", "x", Some("v"))], None);
    assert_eq!(joined.keys().cloned().collect::<Vec<_>>(), [key("a", "web"), key("b", "x")]);
}

#[test]
fn only_unlabelled_objects_named_like_a_runner_are_read_in_full() {
    let wanted = runners(&[("a", "web")]);
    let meta = |ns: &str, name: &str| PartialObjectMeta::<DynamicObject> {
        metadata: ObjectMeta { namespace: Some(ns.into()), name: Some(name.into()), ..Default::default() },
        types: None,
        _phantom: std::marker::PhantomData,
    };
    let listed = [meta("a", "web"), meta("a", "coredns"), meta("b", "web")];
    let found = foreign(listed.iter().map(|m| (kind("Service"), m)), &wanted);
    let found: Vec<_> = found.into_iter().map(|(k, key)| (k.kind(), key)).collect();
    assert_eq!(found, [("Service", key("a", "web"))]);
}

#[test]
fn a_refused_kind_is_named_as_can_i_spells_it_once_and_is_not_absent() {
    let mut c = Children::default();
    for k in kinds::all() {
        assert!(c.is_readable(k.kind()));
    }
    c.mark_unreadable(NotReadable::of(kind("PodDisruptionBudget"), "get"));
    c.mark_unreadable(NotReadable::of(kind("Service"), "get"));
    c.mark_unreadable(NotReadable::of(kind("PodDisruptionBudget"), "get"));
    let resources: Vec<&str> = c.unreadable().iter().map(|n| n.resource.as_str()).collect();
    assert_eq!(resources, ["poddisruptionbudgets.policy", "services"]);
    assert!(!c.is_readable("PodDisruptionBudget") && !c.is_readable("Service"));
    assert!(c.is_readable("Deployment"));
    assert!(c.is_empty(), "nothing was found");
}
