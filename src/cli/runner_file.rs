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
//!
//! A file written for v1alpha1 is read with v1alpha1's types (its errors
//! name its fields) and converted by the webhook's own function
//! ([`crate::api::conversion`]), so it creates the Runner it always did.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Resource;
use serde::Deserialize;
use serde::de::IgnoredAny;

use super::args::validate_name;
use super::error::{Error, Result};
use crate::api::{
    API_VERSION, MAX_HOST_LEN, MAX_IMAGE_LEN, MAX_PORT, MAX_REPLICAS, MIN_PORT, MIN_REPLICAS, Runner,
    conversion, v1alpha1,
};

/// A Runner as a file may hold it. Every field is known, at the top level as
/// in `spec` (whose type denies unknown fields), so a typo such as `specs:`
/// is an error rather than a Runner created without it. `status`, as in the
/// output of `get -o yaml`, is accepted and ignored: the apiserver ignores it
/// on create too.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, bound = "S: Deserialize<'de>")]
struct Document<S> {
    // Checked in the first pass; present here so they are known fields.
    #[serde(rename = "apiVersion")]
    _api_version: IgnoredAny,
    #[serde(rename = "kind")]
    _kind: IgnoredAny,
    #[serde(default)]
    metadata: ObjectMeta,
    spec: S,
    #[serde(default, rename = "status")]
    _status: Option<IgnoredAny>,
}

/// Runners from YAML documents. Each must be a `Runner` of this group, at
/// a version the CRD serves; unknown fields are rejected, a missing namespace becomes
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
        let old = v1alpha1::Runner::api_version(&());
        if kind != "Runner" || (api_version != API_VERSION && api_version != old) {
            return Err(at(format!(
                "expected apiVersion {API_VERSION} (or {old}), kind Runner; got {api_version:?}, {kind:?}"
            )));
        }
        // The second pass: this same document again, now with positions.
        let doc = || serde_yaml::Deserializer::from_str(text).nth(i).ok_or_else(|| at("is gone".into()));
        let located = |e: serde_path_to_error::Error<serde_yaml::Error>| Error::Invalid(located(i, &e));
        let mut r = if api_version == old {
            let parsed: Document<v1alpha1::RunnerSpec> =
                serde_path_to_error::deserialize(doc()?).map_err(located)?;
            let mut r = v1alpha1::Runner::new("", parsed.spec);
            r.metadata = parsed.metadata;
            let json = serde_json::to_value(&r).map_err(|e| at(e.to_string()))?;
            let new = conversion::convert(&json, API_VERSION).map_err(at)?;
            serde_json::from_value::<Runner>(new).map_err(|e| at(e.to_string()))?
        } else {
            let parsed: Document<crate::api::RunnerSpec> =
                serde_path_to_error::deserialize(doc()?).map_err(located)?;
            let mut r = Runner::new("", parsed.spec);
            r.metadata = parsed.metadata;
            r
        };
        let name = r.metadata.name.clone().ok_or_else(|| at("metadata.name is required".into()))?;
        validate_name(&name).map_err(|e| at(e.to_string()))?;
        let in_file = |e: String| if api_version == old { in_v1alpha1_words(&e) } else { e };
        r.spec.validate().map_err(|e| at(format!("{name}: {}", in_file(e))))?;
        r.metadata.namespace.get_or_insert_with(|| default_ns.to_string());
        runners.push(r);
    }
    if runners.is_empty() {
        return Err(Error::Invalid("the file holds no Runner".into()));
    }
    Ok(runners)
}

/// A v1beta1 field path in a refusal as a v1alpha1 file spells it.
fn in_v1alpha1_words(refusal: &str) -> String {
    refusal.replacen("spec.expose.port", "spec.port", 1).replacen("spec.expose.hosts[0]", "spec.host", 1)
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
        "spec.port" | "spec.expose.port" => Some(format!("an integer {MIN_PORT}..={MAX_PORT}")),
        "spec.image" => Some(format!("a string of 1..={MAX_IMAGE_LEN} characters")),
        "spec.host" => Some(format!("a DNS name of at most {MAX_HOST_LEN} characters")),
        p if p.starts_with("spec.expose.hosts[") => {
            Some(format!("a DNS name of at most {MAX_HOST_LEN} characters"))
        }
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

    const BETA: &str = "apiVersion: lab.cloudlab.training/v1beta1\nkind: Runner\n";

    #[test]
    fn a_v1alpha1_file_makes_the_runner_its_v1beta1_twin_makes() {
        let old = from_manifests(
            &format!("{HEAD}metadata: {{name: a}}\nspec: {{image: nginx, port: 8080, host: a.com}}\n"),
            "d",
        );
        let new = format!(
            "{BETA}metadata: {{name: a}}\nspec: {{image: nginx, expose: {{port: 8080, hosts: [a.com]}}}}\n"
        );
        let new = from_manifests(&new, "d").unwrap();
        assert_eq!(old.unwrap(), new);
        assert_eq!(new[0].spec.expose.hosts, ["a.com"]);
    }

    #[test]
    fn a_v1beta1_file_names_its_own_fields() {
        let err = message(&format!(
            "{BETA}metadata: {{name: a}}\nspec: {{image: nginx, expose: {{hosts: [a.com, 10.0.0.1]}}}}\n"
        ));
        assert!(err.contains("spec.expose.hosts[1]: \"10.0.0.1\" must be a DNS name"), "{err}");
        let err =
            message(&format!("{BETA}metadata: {{name: a}}\nspec:\n  image: nginx\n  expose: {{port: x}}\n"));
        assert!(err.starts_with("spec.expose.port: invalid type") && err.contains("1..=65535"), "{err}");
        let err = message(&format!("{BETA}metadata: {{name: a}}\nspec: {{image: nginx, port: 80}}\n"));
        assert!(err.starts_with("spec.port: unknown field `port`"), "{err}");
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
