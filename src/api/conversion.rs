//! Conversion between the Runner's versions, as the apiserver asks for it
//! (a ConversionReview): pure, on whole objects as JSON, so what the
//! manager's webhook serves, what `migrate`'s preflight checks and what the
//! tests prove are the one function.
//!
//! v1beta1 is the hub: every version converts to and from it, so a third
//! version adds one pair of functions, not one per pair of versions.
//!
//! v1beta1 moved networking under `spec.expose` and holds several hosts;
//! v1alpha1 has `spec.port` and one `spec.host`. The hosts v1alpha1 cannot
//! hold travel in the annotation [`EXTRA_HOSTS_ANNOTATION`], so any round
//! trip loses nothing: a v1beta1 Runner read and written back by a v1alpha1
//! client keeps its hosts. Everything else (metadata, status, fields this
//! code does not know) passes through untouched.
//!
//! The annotation's value is an envelope, `{"hosts":[...],"annotation":...}`:
//! `annotation` keeps a value the object already had under that key, so a
//! user's own annotation of that name survives too. A value that is not
//! exactly an envelope this module writes is left alone in both directions.
//!
//! One choice is not a round trip: a v1alpha1 client that removes
//! `spec.host` removes every host (it asked for no Ingress), although the
//! annotation still lists the others.

use kube::core::Status;
use kube::core::conversion::{ConversionRequest, ConversionResponse, ConversionReview};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use super::{GROUP, VERSIONS, v1alpha1};

/// Where a v1beta1 Runner read as v1alpha1 keeps its hosts after the first.
pub const EXTRA_HOSTS_ANNOTATION: &str = "lab.cloudlab.training/more-hosts";

/// `object` (a Runner of any served version) as `to_api_version`. The error
/// says which field could not be converted; it never happens for an object
/// the schema admitted.
pub fn convert(object: &Value, to_api_version: &str) -> Result<Value, String> {
    let from = version_of(object["apiVersion"].as_str().ok_or("apiVersion: missing")?)?;
    let to = version_of(to_api_version)?;
    let mut out = object.clone();
    if from != to {
        // Through the hub: up from `from`, down to `to`.
        if from == v1alpha1::VERSION {
            from_v1alpha1(&mut out)?;
        }
        if to == v1alpha1::VERSION {
            to_v1alpha1(&mut out)?;
        }
    }
    out["apiVersion"] = json!(to_api_version);
    Ok(out)
}

/// The webhook's whole job: the apiserver's ConversionReview in, its
/// response out. One object that cannot be converted fails the request, as
/// the API asks (a partial answer would drop objects from a list).
pub fn review(review: ConversionReview) -> ConversionReview {
    let request = match ConversionRequest::from_review(review) {
        Ok(request) => request,
        Err(e) => {
            return ConversionResponse::invalid(Status::failure(&e.to_string(), "BadRequest")).into_review();
        }
    };
    let to = request.desired_api_version.clone();
    let converted: Result<Vec<Value>, String> = request.objects.iter().map(|o| convert(o, &to)).collect();
    let response = ConversionResponse::for_request(request);
    match converted {
        Ok(objects) => response.success(objects),
        Err(why) => response.failure(Status::failure(&why, "Invalid")),
    }
    .into_review()
}

/// The version of `api_version`, when it is one of the Runner's.
fn version_of(api_version: &str) -> Result<&'static str, String> {
    let served = |v: &&str| api_version.strip_prefix(GROUP).and_then(|r| r.strip_prefix('/')) == Some(*v);
    VERSIONS.iter().copied().find(|v| served(v)).ok_or_else(|| {
        let known: Vec<String> = VERSIONS.iter().map(|v| format!("{GROUP}/{v}")).collect();
        format!("apiVersion: {api_version:?} is not a Runner version; served: {}", known.join(", "))
    })
}

/// The extra hosts, with what the annotation held before them.
#[derive(Serialize, Deserialize, Debug, PartialEq)]
#[serde(deny_unknown_fields)]
struct Envelope {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    hosts: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    annotation: Option<String>,
}

impl Envelope {
    /// Only what [`to_v1alpha1`] writes: byte for byte its serialization,
    /// and never a wrapper around nothing. Anything else is a user's value.
    fn parse(value: &str) -> Option<Envelope> {
        let envelope: Envelope = serde_json::from_str(value).ok()?;
        let exact = serde_json::to_string(&envelope).ok()? == value;
        let wraps = !envelope.hosts.is_empty() || envelope.annotation.as_deref().is_some_and(is_envelope);
        (exact && wraps).then_some(envelope)
    }
}

fn is_envelope(value: &str) -> bool {
    Envelope::parse(value).is_some()
}

fn spec_of(object: &mut Value) -> Result<Option<&mut Map<String, Value>>, String> {
    match object.get_mut("spec") {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Object(spec)) => Ok(Some(spec)),
        Some(_) => Err("spec: not an object".into()),
    }
}

/// The annotation's value, taken off the object (an emptied map goes too:
/// the apiserver never serves an empty one).
fn take_annotation(object: &mut Value) -> Result<Option<String>, String> {
    let Some(Value::Object(annotations)) = object.pointer_mut("/metadata/annotations") else {
        return Ok(None);
    };
    let value = match annotations.remove(EXTRA_HOSTS_ANNOTATION) {
        None => None,
        Some(Value::String(s)) => Some(s),
        Some(_) => return Err(format!("metadata.annotations[{EXTRA_HOSTS_ANNOTATION:?}]: not a string")),
    };
    if annotations.is_empty() {
        object["metadata"].as_object_mut().map(|m| m.remove("annotations"));
    }
    Ok(value)
}

fn put_annotation(object: &mut Value, value: String) -> Result<(), String> {
    let metadata = object.as_object_mut().ok_or("not an object")?.entry("metadata").or_insert(json!({}));
    let annotations = metadata.as_object_mut().ok_or("metadata: not an object")?.entry("annotations");
    let annotations =
        annotations.or_insert(json!({})).as_object_mut().ok_or("metadata.annotations: not a map")?;
    annotations.insert(EXTRA_HOSTS_ANNOTATION.into(), Value::String(value));
    Ok(())
}

/// v1beta1 -> v1alpha1: `expose.port` to `port`, the first host to `host`,
/// the others (and a value the annotation had) into the envelope.
fn to_v1alpha1(object: &mut Value) -> Result<(), String> {
    let before = take_annotation(object)?;
    let mut hosts = Vec::new();
    if let Some(spec) = spec_of(object)? {
        match spec.remove("expose") {
            None | Some(Value::Null) => {}
            Some(Value::Object(mut expose)) => {
                if let Some(port) = expose.remove("port") {
                    spec.insert("port".into(), port);
                }
                if let Some(list) = expose.remove("hosts") {
                    hosts = serde_json::from_value::<Vec<String>>(list)
                        .map_err(|e| format!("spec.expose.hosts: not a list of names: {e}"))?;
                }
                if let Some(field) = expose.keys().next() {
                    return Err(format!("spec.expose.{field}: v1alpha1 has no such field"));
                }
            }
            Some(_) => return Err("spec.expose: not an object".into()),
        }
        if let Some(first) = hosts.first() {
            spec.insert("host".into(), json!(first));
        }
    }
    let extra = hosts.into_iter().skip(1).collect::<Vec<_>>();
    let value = if !extra.is_empty() || before.as_deref().is_some_and(is_envelope) {
        let envelope = Envelope { hosts: extra, annotation: before };
        Some(serde_json::to_string(&envelope).map_err(|e| e.to_string())?)
    } else {
        before
    };
    value.map_or(Ok(()), |v| put_annotation(object, v))
}

/// v1alpha1 -> v1beta1: `port` and `host` (with the envelope's hosts after
/// it) under `expose`; the annotation back to what it was.
fn from_v1alpha1(object: &mut Value) -> Result<(), String> {
    let annotation = take_annotation(object)?;
    let envelope = annotation.as_deref().and_then(Envelope::parse);
    let restored = match &envelope {
        Some(e) => e.annotation.clone(),
        None => annotation,
    };
    if let Some(spec) = spec_of(object)? {
        let port = spec.remove("port");
        let host = match spec.remove("host") {
            None | Some(Value::Null) => None,
            Some(Value::String(h)) => Some(h),
            Some(_) => return Err("spec.host: not a string".into()),
        };
        let mut expose = Map::new();
        if let Some(port) = port {
            expose.insert("port".into(), port);
        }
        if let Some(host) = host {
            let more = envelope.map(|e| e.hosts).unwrap_or_default();
            expose.insert("hosts".into(), json!(std::iter::once(host).chain(more).collect::<Vec<_>>()));
        }
        if !expose.is_empty() {
            spec.insert("expose".into(), Value::Object(expose));
        }
    }
    restored.map_or(Ok(()), |v| put_annotation(object, v))
}

#[cfg(test)]
mod tests;
