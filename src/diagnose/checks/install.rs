//! The installation: the cluster answers; the Runner CRD is there,
//! serves our version, and says what this binary generates (drift means the
//! cluster was installed by another version of kubectl-runner).

use serde_json::Value;

use super::super::finding::{Code, Finding, ObjectRef};
use super::super::snapshot::Snapshot;
use crate::api::{CRD_NAME, VERSION};

/// How many differing paths a drift finding lists before "and N more".
const MAX_DIFFS: usize = 5;

pub fn check(s: &Snapshot) -> Vec<Finding> {
    let crd_ref = ObjectRef::new("CustomResourceDefinition", "", CRD_NAME);
    let version = match &s.cluster {
        Err(e) => {
            return vec![
                Finding::error(
                    Code::ClusterUnreachable,
                    ObjectRef::new("Cluster", "", "apiserver"),
                    "the cluster does not answer; nothing else could be checked",
                )
                .evidence(e.clone())
                .fix("kubectl cluster-info   # check the kubeconfig context and that the apiserver runs"),
            ];
        }
        Ok(v) => v,
    };
    let Some(live) = &s.crd else {
        if s.gaps.iter().any(|g| g.what.contains("CustomResourceDefinition")) {
            return vec![];
        }
        return vec![
            Finding::error(Code::CrdMissing, crd_ref, "the Runner CRD is not installed")
                .evidence(format!("apiserver {version} has no {CRD_NAME}"))
                .fix("kubectl runner install"),
        ];
    };
    let live = serde_json::to_value(live).unwrap_or_default();
    let mut expected = serde_json::to_value(&s.expected_crd).unwrap_or_default();
    // A CRD that converts through the manager's webhook serves every
    // version (`install --with-manager`); its conversion stanza is the
    // manager's to keep, and the conversion checks look at it.
    if live["spec"]["conversion"]["strategy"] == "Webhook" {
        expected["spec"]["versions"]
            .as_array_mut()
            .into_iter()
            .flatten()
            .for_each(|v| v["served"] = true.into());
    }
    let mut out = vec![];
    let serving = versions(&live).any(|v| v["name"] == VERSION && v["served"] == true);
    if !serving {
        out.push(
            Finding::error(
                Code::CrdVersionNotServed,
                crd_ref.clone(),
                format!("the CRD does not serve {VERSION}, the version this binary and the manager use"),
            )
            .evidence(format!(
                "served versions: {}",
                versions(&live)
                    .filter(|v| v["served"] == true)
                    .filter_map(|v| v["name"].as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ))
            .fix("kubectl runner install"),
        );
        return out;
    }
    let diffs = drift(&expected, &live);
    if !diffs.is_empty() {
        let mut f = Finding::warning(
            Code::CrdSchemaDrift,
            crd_ref,
            "the installed CRD differs from the one this binary generates (installed by another version?)",
        );
        for d in diffs.iter().take(MAX_DIFFS) {
            f = f.evidence(d.clone());
        }
        if diffs.len() > MAX_DIFFS {
            f = f.evidence(format!("and {} more", diffs.len() - MAX_DIFFS));
        }
        out.push(f.fix("kubectl runner install   # re-applies the CRD this binary generates"));
    }
    out.extend(validating_drift(s));
    out
}

/// The ValidatingWebhookConfiguration against the one this binary
/// generates for the same target: rules, failurePolicy, matchConditions,
/// timeout and sideEffects decide which writes are refused, so an edit or
/// an older install shows here. Where it routes and its caBundle are the
/// manager's to keep (a URL while a manager runs as a process), and one a
/// local manager holds is the registration checks' to judge.
fn validating_drift(s: &Snapshot) -> Option<Finding> {
    let live = s.registrations.validating.get()?.as_ref()?;
    let annotations = live.metadata.annotations.as_ref();
    if annotations.is_some_and(|a| a.contains_key(crate::webhook::local::SAVED_ANNOTATION)) {
        return None;
    }
    let webhooks = live.webhooks.as_deref().unwrap_or_default();
    let routed = webhooks.iter().find_map(|w| match (&w.client_config.service, &w.client_config.url) {
        (Some(svc), _) => Some(crate::webhook::Target::Service { namespace: svc.namespace.clone() }),
        (None, Some(url)) => Some(crate::webhook::Target::Url(url.clone())),
        (None, None) => None,
    })?;
    let mut expected = crate::manifests::validating_webhook_configuration(&routed, None);
    // The live webhook's route stands: only what decides admission is compared.
    for (e, l) in expected.webhooks.iter_mut().flatten().zip(webhooks) {
        e.client_config = l.client_config.clone();
    }
    let (e, l) = (serde_json::to_value(&expected.webhooks).ok()?, serde_json::to_value(webhooks).ok()?);
    let mut diffs = vec![];
    match (&e, &l) {
        (Value::Array(ea), Value::Array(la)) if ea.len() != la.len() => {
            diffs.push(format!("webhooks: cluster has {}, expected {}", la.len(), ea.len()))
        }
        _ => compare(&e, &l, "webhooks", false, &mut diffs),
    }
    if diffs.is_empty() {
        return None;
    }
    let object = ObjectRef::new("ValidatingWebhookConfiguration", "", crate::webhook::VALIDATING_CONFIG);
    let mut f = Finding::warning(
        Code::ValidatingWebhookDrift,
        object,
        "the validating webhook configuration differs from the one this binary generates: it may admit or refuse \
         other writes than this version's manager expects",
    );
    for d in diffs.iter().take(MAX_DIFFS) {
        f = f.evidence(d.clone());
    }
    if diffs.len() > MAX_DIFFS {
        f = f.evidence(format!("and {} more", diffs.len() - MAX_DIFFS));
    }
    Some(
        f.fix("kubectl runner install --with-manager   # re-applies the configuration this binary generates"),
    )
}

fn versions(crd: &Value) -> impl Iterator<Item = &Value> {
    crd["spec"]["versions"].as_array().into_iter().flatten()
}

/// Paths where the live CRD's spec differs from the expected one. Fields the
/// apiserver defaults (present only in `live`) are ignored, except inside the
/// schema, where an extra property is real drift.
pub fn drift(expected: &Value, live: &Value) -> Vec<String> {
    let mut out = vec![];
    let (e, l) = (&expected["spec"], &live["spec"]);
    if let (Value::Object(eo), Value::Object(_)) = (e, l) {
        for (k, ev) in eo.iter().filter(|(k, _)| *k != "versions") {
            compare(ev, &l[k], &format!("spec.{k}"), false, &mut out);
        }
    }
    for ev in versions(expected) {
        let name = ev["name"].as_str().unwrap_or_default();
        let Some(lv) = versions(live).find(|v| v["name"] == name) else {
            out.push(format!("spec.versions[{name}]: missing"));
            continue;
        };
        for (k, evv) in ev.as_object().into_iter().flatten() {
            let exact = k == "schema";
            compare(evv, &lv[k], &format!("spec.versions[{name}].{k}"), exact, &mut out);
        }
    }
    out
}

fn compare(e: &Value, l: &Value, path: &str, exact: bool, out: &mut Vec<String>) {
    match (e, l) {
        (Value::Object(eo), Value::Object(lo)) => {
            for (k, ev) in eo {
                compare(ev, lo.get(k).unwrap_or(&Value::Null), &format!("{path}.{k}"), exact, out);
            }
            if exact {
                for k in lo.keys().filter(|k| !eo.contains_key(*k)) {
                    out.push(format!("{path}.{k}: only in the cluster"));
                }
            }
        }
        (Value::Array(ea), Value::Array(la)) if ea.len() == la.len() => {
            for (i, (ev, lv)) in ea.iter().zip(la).enumerate() {
                compare(ev, lv, &format!("{path}[{i}]"), exact, out);
            }
        }
        (e, l) if e == l => {}
        (Value::Null, _) if !exact => {}
        (e, Value::Null) => out.push(format!("{path}: missing in the cluster (expected {})", short(e))),
        (e, l) => out.push(format!("{path}: cluster has {}, expected {}", short(l), short(e))),
    }
}

/// A value shortened for one line of evidence.
fn short(v: &Value) -> String {
    let s = v.to_string();
    if s.chars().count() > 60 { format!("{}...", s.chars().take(57).collect::<String>()) } else { s }
}

#[cfg(test)]
mod tests {
    use super::super::fixtures;
    use super::*;
    use crate::diagnose::finding::Severity;
    use serde_json::json;

    fn codes(s: &Snapshot) -> Vec<Code> {
        check(s).iter().map(|f| f.code).collect()
    }

    #[test]
    fn the_crd_we_generate_has_no_drift_from_itself() {
        let crd = serde_json::to_value(crate::manifests::crd()).unwrap();
        assert_eq!(drift(&crd, &crd), Vec::<String>::new());
    }

    #[test]
    fn installation_rules() {
        type Case = (&'static str, fn(&mut Snapshot), &'static [Code]);
        let cases: &[Case] = &[
            ("healthy", |_| {}, &[]),
            ("unreachable", |s| s.cluster = Err("connection refused".into()), &[Code::ClusterUnreachable]),
            ("no CRD", |s| s.crd = None, &[Code::CrdMissing]),
            (
                "version not served",
                |s| s.crd.as_mut().unwrap().spec.versions[0].served = false,
                &[Code::CrdVersionNotServed],
            ),
            (
                "a printer column dropped",
                |s| s.crd.as_mut().unwrap().spec.versions[0].additional_printer_columns = None,
                &[Code::CrdSchemaDrift],
            ),
        ];
        for (name, break_it, want) in cases {
            let mut s = fixtures::healthy();
            break_it(&mut s);
            assert_eq!(codes(&s), *want, "{name}");
        }
    }

    #[test]
    fn apiserver_defaults_outside_the_schema_are_not_drift() {
        let expected = json!({ "spec": { "group": "g", "names": { "plural": "runners" },
            "versions": [{ "name": "v1", "served": true, "schema": { "openAPIV3Schema": { "type": "object" } } }] } });
        let mut live = expected.clone();
        live["spec"]["names"]["listKind"] = json!("RunnerList");
        live["spec"]["conversion"] = json!({ "strategy": "None" });
        assert_eq!(drift(&expected, &live), Vec::<String>::new());
    }

    #[test]
    fn an_extra_property_in_the_live_schema_is_drift_and_names_its_path() {
        let expected = json!({ "spec": { "versions": [{ "name": "v1",
            "schema": { "openAPIV3Schema": { "properties": { "a": { "type": "string" } } } } }] } });
        let mut live = expected.clone();
        live["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["b"] = json!({});
        assert_eq!(
            drift(&expected, &live),
            ["spec.versions[v1].schema.openAPIV3Schema.properties.b: only in the cluster"]
        );
    }

    #[test]
    fn a_crd_converting_through_the_webhook_is_no_drift_and_one_serving_v1alpha1_without_it_is() {
        let mut s = fixtures::healthy();
        s.crd = Some(crate::manifests::crd_with_webhook());
        assert!(check(&s).is_empty(), "{:?}", check(&s));
        let mut crd = crate::manifests::crd();
        crd.spec.versions.iter_mut().for_each(|v| v.served = true);
        s.crd = Some(crd);
        let f = check(&s);
        assert_eq!(f.len(), 1, "{f:?}");
        assert!(f[0].evidence.iter().any(|e| e.contains("versions[v1alpha1].served")), "{:?}", f[0].evidence);
    }

    #[test]
    fn a_validating_webhook_edited_away_from_ours_is_drift_and_its_route_and_ca_are_not() {
        use crate::diagnose::snapshot::Readable;
        let service = crate::webhook::Target::Service { namespace: "runner-system".into() };
        let mut s = fixtures::healthy();
        let mut vwc = crate::manifests::validating_webhook_configuration(&service, Some("CA"));
        vwc.webhooks.as_mut().unwrap()[0].namespace_selector = Some(Default::default()); // an apiserver default
        s.registrations.validating = Readable::Read(Some(vwc.clone()));
        assert_eq!(codes(&s), [], "ours, with its caBundle injected");
        let url = crate::webhook::Target::Url("https://10.0.0.1:9443/convert".into());
        s.registrations.validating =
            Readable::Read(Some(crate::manifests::validating_webhook_configuration(&url, None)));
        assert_eq!(codes(&s), [], "routed to a URL");

        vwc.webhooks.as_mut().unwrap()[0].failure_policy = Some("Ignore".into());
        s.registrations.validating = Readable::Read(Some(vwc.clone()));
        let f = check(&s);
        assert_eq!(codes(&s), [Code::ValidatingWebhookDrift], "{f:?}");
        assert_eq!(f[0].evidence, ["webhooks[0].failurePolicy: cluster has \"Ignore\", expected \"Fail\""]);

        // A local manager's is the registration checks' to judge.
        s = fixtures::locally_served(1);
        assert_eq!(codes(&s), []);
    }

    #[test]
    fn a_missing_crd_is_an_error_with_the_install_command() {
        let mut s = fixtures::healthy();
        s.crd = None;
        let f = &check(&s)[0];
        assert_eq!(f.severity, Severity::Error);
        assert_eq!(f.fix.as_deref(), Some("kubectl runner install"));
    }
}
