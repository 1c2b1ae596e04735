//! Pure: the metadata the manager keeps of a watched Pod and of a child
//! decoded as a lean view ([`super::view`]), decoded straight from the stream into `ObjectMeta` (which
//! kube's store needs) without allocating for what is dropped.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ManagedFieldsEntry, ObjectMeta, OwnerReference, Time};
use serde::{Deserialize, Deserializer};

/// An object's metadata without annotations, timestamps or managedFields'
/// field sets (skipped unparsed); of managedFields only the marker that
/// says an upgrade is due ([`super::managed_fields::keep_marker`]).
pub fn decode<'de, D: Deserializer<'de>>(d: D) -> Result<ObjectMeta, D::Error> {
    #[derive(Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Lean {
        name: Option<String>,
        namespace: Option<String>,
        uid: Option<String>,
        resource_version: Option<String>,
        generation: Option<i64>,
        deletion_timestamp: Option<Time>,
        labels: Option<BTreeMap<String, String>>,
        owner_references: Option<Vec<OwnerReference>>,
        finalizers: Option<Vec<String>>,
        managed_fields: Option<Vec<Entry>>,
    }
    #[derive(Deserialize)]
    struct Entry {
        manager: Option<String>,
        operation: Option<String>,
    }
    let l = Lean::deserialize(d)?;
    let mut meta = ObjectMeta {
        name: l.name,
        namespace: l.namespace,
        uid: l.uid,
        resource_version: l.resource_version,
        generation: l.generation,
        deletion_timestamp: l.deletion_timestamp,
        labels: l.labels,
        owner_references: l.owner_references,
        finalizers: l.finalizers,
        managed_fields: l.managed_fields.map(|es| {
            es.into_iter()
                .map(|e| ManagedFieldsEntry {
                    manager: e.manager,
                    operation: e.operation,
                    ..Default::default()
                })
                .collect()
        }),
        ..Default::default()
    };
    super::managed_fields::keep_marker(&mut meta);
    Ok(meta)
}
