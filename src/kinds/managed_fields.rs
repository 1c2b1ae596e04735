//! Pure: one owner for what we write to a child.
//!
//! Server-side apply can remove a list entry or a map key only when our
//! *Apply* entry in `managedFields` owns it. A child created with POST is
//! owned by our name under operation *Update*, which the apiserver treats as
//! another manager: an apply that drops the old port leaves it there, next
//! to the new one. Children are created by a create-only apply now, but
//! earlier versions created them with POST: before the first apply that
//! must remove such a field, the Update entry is folded into our Apply
//! entry, as `kubectl apply --server-side` does when it takes over from
//! client-side apply (`manager::child_step`'s `TakeOver`). The take-over
//! patch that puts back an entry someone renamed is itself recorded as our
//! Update entry, folded in the same way by the next take-over.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{FieldsV1, ManagedFieldsEntry, ObjectMeta};
use serde_json::Value;

use crate::api::FIELD_MANAGER;

fn is_ours(e: &ManagedFieldsEntry, operation: &str) -> bool {
    e.manager.as_deref() == Some(FIELD_MANAGER)
        && e.operation.as_deref() == Some(operation)
        && e.subresource.as_deref().unwrap_or_default().is_empty()
}

/// True when the child has fields recorded under our name as Update.
pub fn needs_upgrade(meta: &ObjectMeta) -> bool {
    meta.managed_fields.iter().flatten().any(|e| is_ours(e, "Update"))
}

/// What the cache keeps of `managedFields`: only the marker that says an
/// upgrade is due (our Update entry, without its fields).
pub fn keep_marker(meta: &mut ObjectMeta) {
    meta.managed_fields = meta.managed_fields.take().and_then(|entries| {
        let marker: Vec<_> = entries
            .into_iter()
            .filter(|e| is_ours(e, "Update"))
            .map(|e| ManagedFieldsEntry { manager: e.manager, operation: e.operation, ..Default::default() })
            .collect();
        (!marker.is_empty()).then_some(marker)
    });
}

/// `managedFields` with our Update entry folded into our Apply entry (the
/// union of both field sets, operation Apply); every other entry as it was.
/// None when there is no Update entry of ours.
pub fn upgraded(entries: &[ManagedFieldsEntry]) -> Option<Vec<ManagedFieldsEntry>> {
    let update = entries.iter().find(|e| is_ours(e, "Update"))?;
    let apply = entries.iter().find(|e| is_ours(e, "Apply"));
    let mut fields =
        update.fields_v1.as_ref().map(|f| f.0.clone()).unwrap_or(Value::Object(Default::default()));
    if let Some(FieldsV1(more)) = apply.and_then(|a| a.fields_v1.as_ref()) {
        union(&mut fields, more);
    }
    let merged = ManagedFieldsEntry {
        manager: Some(FIELD_MANAGER.into()),
        operation: Some("Apply".into()),
        api_version: apply.and_then(|a| a.api_version.clone()).or_else(|| update.api_version.clone()),
        fields_type: Some("FieldsV1".into()),
        fields_v1: Some(FieldsV1(fields)),
        subresource: None,
        time: update.time.clone(),
    };
    let mut out: Vec<_> =
        entries.iter().filter(|e| !is_ours(e, "Update") && !is_ours(e, "Apply")).cloned().collect();
    out.push(merged);
    Some(out)
}

/// The fields our Apply entry owns (an empty trie without one).
pub fn applied_fields(entries: &[ManagedFieldsEntry]) -> Value {
    entries
        .iter()
        .find(|e| is_ours(e, "Apply"))
        .and_then(|e| e.fields_v1.as_ref())
        .map_or(Value::Object(Default::default()), |f| f.0.clone())
}

/// The field manager, other than us, whose entry holds the field at
/// `path`: who set the value we found there (`kubectl scale` writes
/// through the scale subresource, and its entry says so).
pub fn owner_of(entries: &[ManagedFieldsEntry], path: &[String]) -> Option<String> {
    entries
        .iter()
        .filter(|e| e.manager.as_deref() != Some(FIELD_MANAGER))
        .find(|e| e.fields_v1.as_ref().is_some_and(|f| contains(&f.0, path)))
        .and_then(|e| e.manager.clone())
}

/// True when the trie holds the field at `path` (`f:spec`, `k:{...}`, ...).
pub fn contains(trie: &Value, path: &[String]) -> bool {
    path.iter().try_fold(trie, |node, step| node.get(step)).is_some()
}

/// Set union of two `FieldsV1` tries (objects whose leaves are `{}`).
fn union(into: &mut Value, from: &Value) {
    if let (Value::Object(a), Value::Object(b)) = (into, from) {
        for (k, v) in b {
            match a.get_mut(k) {
                Some(existing) => union(existing, v),
                None => {
                    a.insert(k.clone(), v.clone());
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn entry(manager: &str, op: &str, fields: Value) -> ManagedFieldsEntry {
        ManagedFieldsEntry {
            manager: Some(manager.into()),
            operation: Some(op.into()),
            api_version: Some("v1".into()),
            fields_type: Some("FieldsV1".into()),
            fields_v1: Some(FieldsV1(fields)),
            ..Default::default()
        }
    }

    #[test]
    fn the_owner_of_a_field_is_the_other_manager_whose_entry_holds_it() {
        let replicas = json!({ "f:spec": { "f:replicas": {} } });
        let entries = vec![
            entry(FIELD_MANAGER, "Apply", replicas.clone()),
            entry("kube-controller-manager", "Update", json!({ "f:metadata": { "f:annotations": {} } })),
            entry("kubectl", "Update", replicas),
        ];
        let path = ["f:spec".to_string(), "f:replicas".to_string()];
        assert_eq!(owner_of(&entries, &path).as_deref(), Some("kubectl"));
        assert_eq!(owner_of(&entries[..2], &path), None, "only ours holds it");
    }

    #[test]
    fn a_posted_child_has_its_update_entry_folded_into_an_apply_entry() {
        let ports =
            json!({ "f:spec": { "f:ports": { "k:{\"port\":80,\"protocol\":\"TCP\"}": { ".": {} } } } });
        let entries = vec![
            entry(FIELD_MANAGER, "Update", ports.clone()),
            entry("kube-controller-manager", "Update", json!({ "f:status": {} })),
        ];
        let out = upgraded(&entries).unwrap();
        assert_eq!(out.len(), 2);
        assert_eq!(out[0].manager.as_deref(), Some("kube-controller-manager"), "others untouched");
        let ours = &out[1];
        assert_eq!(
            (ours.operation.as_deref(), ours.fields_v1.as_ref().map(|f| &f.0)),
            (Some("Apply"), Some(&ports))
        );
    }

    #[test]
    fn an_existing_apply_entry_gets_the_union_of_both_sets() {
        let entries = vec![
            entry(FIELD_MANAGER, "Apply", json!({ "f:spec": { "f:replicas": {} } })),
            entry(FIELD_MANAGER, "Update", json!({ "f:spec": { "f:selector": {} }, "f:metadata": {} })),
        ];
        let out = upgraded(&entries).unwrap();
        assert_eq!(out.len(), 1);
        assert_eq!(
            out[0].fields_v1.as_ref().unwrap().0,
            json!({ "f:spec": { "f:replicas": {}, "f:selector": {} }, "f:metadata": {} })
        );
    }

    #[test]
    fn nothing_to_do_without_an_update_entry_of_ours() {
        let entries =
            vec![entry(FIELD_MANAGER, "Apply", json!({})), entry("kubectl-edit", "Update", json!({}))];
        assert!(upgraded(&entries).is_none());
        let meta = ObjectMeta { managed_fields: Some(entries), ..Default::default() };
        assert!(!needs_upgrade(&meta));
    }

    #[test]
    fn a_field_path_is_found_in_our_apply_entry_only() {
        let port = r#"k:{"port":80,"protocol":"TCP"}"#;
        let entries = vec![
            entry(FIELD_MANAGER, "Apply", json!({ "f:spec": { "f:ports": { port: { ".": {} } } } })),
            entry("kubectl-edit", "Update", json!({ "f:spec": { "f:ports": { "k:{\"port\":81}": {} } } })),
        ];
        let ours = applied_fields(&entries);
        let path = |k: &str| vec!["f:spec".to_string(), "f:ports".into(), k.into()];
        assert!(contains(&ours, &path(port)));
        assert!(!contains(&ours, &path(r#"k:{"port":81}"#)));
    }

    #[test]
    fn the_cache_keeps_only_the_marker() {
        let mut meta = ObjectMeta {
            managed_fields: Some(vec![
                entry(FIELD_MANAGER, "Update", json!({ "f:spec": {} })),
                entry("kubectl-edit", "Update", json!({})),
            ]),
            ..Default::default()
        };
        keep_marker(&mut meta);
        let kept = meta.managed_fields.as_ref().unwrap();
        assert_eq!(kept.len(), 1);
        assert!(kept[0].fields_v1.is_none());
        assert!(needs_upgrade(&meta));
        let mut clean =
            ObjectMeta { managed_fields: Some(vec![entry("x", "Apply", json!({}))]), ..Default::default() };
        keep_marker(&mut clean);
        assert!(clean.managed_fields.is_none());
    }
}
