//! Runners from the YAML of `create -f`: pure, so a bad file fails with exit
//! code 2 before anything connects.
//!
//! Two passes over the text. The first reads each document as plain YAML,
//! skips empty ones and checks `apiVersion` and `kind`, so a Pod is refused as
//! a Pod and not as a Runner with odd fields. The second decodes the same
//! document straight into a strict [`Document`], tracking the field path
//! (`serde_path_to_error`) and the YAML line, so a wrong type or an unknown
//! field anywhere says where: `spec.replicas: invalid type: string "two",
//! expected an integer 1..=3, line 7`. Then names and specs are checked with
//! the same rules as the CRD ([`crate::api::rules`]).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Resource;
use serde::Deserialize;
use serde::de::IgnoredAny;

use super::args::validate_name;
use super::error::{Error, Result};
use crate::api::{
    MAX_HOST_LEN, MAX_IMAGE_LEN, MAX_PORT, MAX_REPLICAS, MIN_PORT, MIN_REPLICAS, Runner, RunnerSpec,
};

/// A Runner as a file may hold it. Every field is known, at the top level as
/// in `spec` (whose type denies unknown fields), so a typo such as `specs:`
/// is an error rather than a Runner created without it. `status`, as in the
/// output of `get -o yaml`, is accepted and ignored: the apiserver ignores it
/// on create too.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Document {
    // Checked in the first pass; present here so they are known fields.
    #[serde(rename = "apiVersion")]
    _api_version: IgnoredAny,
    #[serde(rename = "kind")]
    _kind: IgnoredAny,
    #[serde(default)]
    metadata: ObjectMeta,
    spec: RunnerSpec,
    #[serde(default, rename = "status")]
    _status: Option<IgnoredAny>,
}

/// Runners from YAML documents. Each must be a `Runner` of this group and
/// version; unknown fields are rejected, a missing namespace becomes
/// `default_ns`, and every name and spec is validated.
pub fn from_manifests(text: &str, default_ns: &str) -> Result<Vec<Runner>> {
    let mut runners = Vec::new();
    for (i, doc) in serde_yaml::Deserializer::from_str(text).enumerate() {
        let at = |msg: String| Error::Invalid(format!("document {}: {msg}", i + 1));
        let value = serde_yaml::Value::deserialize(doc).map_err(|e| at(format!("not YAML: {e}")))?;
        if value.is_null() {
            continue;
        }
        let api_version = value.get("apiVersion").and_then(|v| v.as_str()).unwrap_or("");
        let kind = value.get("kind").and_then(|v| v.as_str()).unwrap_or("");
        let want = Runner::api_version(&());
        if kind != "Runner" || api_version != want {
            return Err(at(format!(
                "expected apiVersion {want}, kind Runner; got {api_version:?}, {kind:?}"
            )));
        }
        // The second pass: this same document again, now with positions.
        let doc = serde_yaml::Deserializer::from_str(text)
            .nth(i)
            .ok_or_else(|| at("is gone on the second read".into()))?;
        let parsed: Document =
            serde_path_to_error::deserialize(doc).map_err(|e| Error::Invalid(located(i, &e)))?;
        let name = parsed.metadata.name.clone().ok_or_else(|| at("metadata.name is required".into()))?;
        validate_name(&name).map_err(|e| at(e.to_string()))?;
        parsed.spec.validate().map_err(|e| at(format!("{name}: {e}")))?;
        let mut r = Runner::new(&name, parsed.spec);
        r.metadata = parsed.metadata;
        r.metadata.namespace.get_or_insert_with(|| default_ns.to_string());
        runners.push(r);
    }
    if runners.is_empty() {
        return Err(Error::Invalid("the file holds no Runner".into()));
    }
    Ok(runners)
}

/// `path: message, line N`: the path from `serde_path_to_error`, serde_yaml's
/// own copy of it and its ` at line L column C` taken off the message, and
/// serde's `expected i32` replaced by the range the field allows.
fn located(doc: usize, e: &serde_path_to_error::Error<serde_yaml::Error>) -> String {
    let path = e.path().to_string();
    let inner = e.inner();
    let mut msg = inner.to_string();
    if let Some(loc) = inner.location()
        && let Some(bare) = msg.strip_suffix(&format!(" at line {} column {}", loc.line(), loc.column()))
    {
        msg = bare.to_string();
    }
    // serde_yaml names the path too, sometimes only an ancestor of the one
    // tracked here (for an unknown field, the map that holds it).
    let ancestors = path.match_indices(['.', '[']).map(|(i, _)| &path[..i]).chain([path.as_str()]);
    if let Some(bare) = ancestors.filter_map(|p| msg.strip_prefix(&format!("{p}: "))).next() {
        msg = bare.to_string();
    }
    if let (Some(allowed), Some((head, _))) = (allowed(&path), msg.split_once(", expected ")) {
        msg = format!("{head}, expected {allowed}");
    }
    let at = if path == "." { String::new() } else { format!("{path}: ") };
    match inner.location() {
        Some(loc) => format!("{at}{msg}, line {}", loc.line()),
        None => format!("document {}: {at}{msg}", doc + 1),
    }
}

/// What a spec field accepts, in words, from the shared bounds.
fn allowed(path: &str) -> Option<String> {
    match path {
        "spec.replicas" => Some(format!("an integer {MIN_REPLICAS}..={MAX_REPLICAS}")),
        "spec.port" => Some(format!("an integer {MIN_PORT}..={MAX_PORT}")),
        "spec.image" => Some(format!("a string of 1..={MAX_IMAGE_LEN} characters")),
        "spec.host" => Some(format!("a DNS name of at most {MAX_HOST_LEN} characters")),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use kube::ResourceExt;

    use super::*;
    use crate::api::DEFAULT_REPLICAS;

    const HEAD: &str = "apiVersion: lab.cloudlab.training/v1alpha1\nkind: Runner\n";

    /// The message of the usage error for `text`.
    fn message(text: &str) -> String {
        match from_manifests(text, "d") {
            Err(Error::Invalid(msg)) => msg,
            other => panic!("not a usage error: {other:?}"),
        }
    }

    /// The message for a manifest of `HEAD` then `body`.
    fn refusal(body: &str) -> String {
        message(&format!("{HEAD}{body}"))
    }

    #[test]
    fn a_manifest_with_two_documents_gives_two_runners() {
        let text = format!(
            "{HEAD}metadata: {{name: a, labels: {{x: y}}}}\nspec: {{image: nginx}}\n---\n\
             {HEAD}metadata: {{name: b, namespace: x}}\nspec: {{image: nginx, replicas: 3}}\n"
        );
        let rs = from_manifests(&text, "d").unwrap();
        assert_eq!(rs.len(), 2);
        assert_eq!(rs[0].namespace().as_deref(), Some("d"));
        assert_eq!(rs[0].labels().get("x").map(String::as_str), Some("y"));
        assert_eq!(rs[0].spec.replicas, DEFAULT_REPLICAS);
        assert_eq!(rs[1].namespace().as_deref(), Some("x"));
        assert_eq!(rs[1].spec.replicas, 3);
    }

    #[test]
    fn a_string_for_replicas_names_the_field_the_range_and_the_line() {
        let err = refusal("metadata:\n  name: web\nspec:\n  image: nginx\n  replicas: two\n");
        assert_eq!(err, r#"spec.replicas: invalid type: string "two", expected an integer 1..=3, line 7"#);
    }

    #[test]
    fn wrong_types_in_port_image_and_host_name_the_field_and_the_line() {
        let cases = [
            ("spec:\n  image: nginx\n  port: http\n", "spec.port: invalid type: string \"http\"", 6),
            ("spec:\n  image: nginx\n  port: 1.5\n", "spec.port: invalid type: floating point `1.5`", 6),
            ("spec:\n  image: [nginx]\n", "spec.image: invalid type: sequence", 5),
            ("spec:\n  image: nginx\n  host: {a: b}\n", "spec.host: invalid type: map", 6),
        ];
        for (spec, want, line) in cases {
            let err = refusal(&format!("metadata: {{name: web}}\n{spec}"));
            assert!(err.starts_with(want) && err.ends_with(&format!(", line {line}")), "{err}");
        }
        let err = refusal("metadata: {name: web}\nspec:\n  image: nginx\n  port: http\n");
        assert!(err.contains("expected an integer 1..=65535"), "{err}");
    }

    #[test]
    fn an_unknown_field_in_spec_names_it_and_the_line() {
        let err = refusal("metadata: {name: web}\nspec:\n  image: nginx\n  replica: 2\n");
        assert!(err.starts_with("spec.replica: unknown field `replica`"), "{err}");
        assert!(err.contains("expected one of `image`, `replicas`") && err.ends_with(", line 6"), "{err}");
    }

    #[test]
    fn an_unknown_top_level_field_is_refused_with_its_line() {
        let err = refusal("metadata: {name: web}\nspec: {image: nginx}\nspecs: {replicas: 2}\n");
        assert!(err.contains("unknown field `specs`") && err.ends_with(", line 5"), "{err}");
    }

    #[test]
    fn a_missing_image_names_spec_and_the_line() {
        let err = refusal("metadata: {name: web}\nspec:\n  replicas: 2\n");
        assert!(err.starts_with("spec: missing field `image`") && err.contains(", line "), "{err}");
    }

    #[test]
    fn lines_count_from_the_top_of_the_file_in_a_later_document() {
        let text = format!(
            "{HEAD}metadata: {{name: a}}\nspec: {{image: nginx}}\n---\n{HEAD}metadata: {{name: b}}\nspec: {{image: nginx, port: x}}\n"
        );
        let err = message(&text);
        assert!(err.starts_with("spec.port: ") && err.ends_with(", line 9"), "{err}");
    }

    #[test]
    fn names_and_specs_are_checked_with_the_crd_rules() {
        let err = refusal("metadata: {name: web.v2}\nspec: {image: nginx}\n");
        assert!(err.contains("metadata.name: \"web.v2\" must be a DNS-1035 label"), "{err}");
        let err = refusal("metadata: {name: web}\nspec: {image: nginx, host: 10.0.0.1}\n");
        assert!(err.contains("spec.host: \"10.0.0.1\" must be a DNS name, not an IP address"), "{err}");
        let err = refusal("metadata: {}\nspec: {image: nginx}\n");
        assert!(err.contains("metadata.name is required"), "{err}");
    }

    #[test]
    fn a_manifest_of_another_kind_is_rejected() {
        let err = message("apiVersion: v1\nkind: Pod\nmetadata: {name: a}\nspec: {containers: []}\n");
        assert!(err.contains("kind Runner"), "{err}");
    }

    #[test]
    fn status_from_get_output_is_accepted_and_dropped() {
        let rs = from_manifests(
            &format!("{HEAD}metadata: {{name: a}}\nspec: {{image: nginx}}\nstatus: {{phase: Available}}\n"),
            "d",
        )
        .unwrap();
        assert_eq!(rs[0].status, None);
    }
}
