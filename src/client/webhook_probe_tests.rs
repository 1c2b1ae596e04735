use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceConversion;

use super::*;

const VALIDATION_TLS: &str = "Internal error occurred: failed calling webhook \
    \"validate.runners.lab.cloudlab.training\": failed to call webhook: Post \
    \"https://runner-webhook.runner-system.svc:443/validate?timeout=5s\": tls: failed to verify certificate: \
    x509: certificate signed by unknown authority";
const VALIDATION_NO_ENDPOINTS: &str = "Internal error occurred: failed calling webhook \
    \"validate.runners.lab.cloudlab.training\": failed to call webhook: Post \
    \"https://runner-webhook.runner-system.svc:443/validate?timeout=5s\": no endpoints available for service \
    \"runner-webhook\"";
const CONVERSION_REFUSED: &str = "conversion webhook for lab.cloudlab.training/v1alpha1, Kind=Runner failed: \
    Post \"https://127.0.0.1:1/convert?timeout=30s\": dial tcp 127.0.0.1:1: connect: connection refused";
const CONVERSION_TIMEOUT: &str = "conversion webhook for lab.cloudlab.training/v1alpha1, Kind=Runner failed: \
    Post \"https://runner-webhook.runner-system.svc:443/convert?timeout=30s\": context deadline exceeded";
const CONVERSION_404: &str = "conversion webhook for lab.cloudlab.training/v1alpha1, Kind=Runner failed: \
    the server could not find the requested resource";
const VALIDATION_NO_SERVICE: &str = "Internal error occurred: failed calling webhook \
    \"validate.runners.lab.cloudlab.training\": failed to call webhook: Post \
    \"https://runner-webhook.runner-system.svc:443/validate?timeout=5s\": service \"runner-webhook\" not found";

fn failed(registration: Registration, version: &str, cause: Cause, message: &str) -> Outcome {
    Outcome::Failed(Failure { registration, version: version.into(), cause, message: message.into() })
}

#[test]
fn each_apiserver_answer_is_judged_by_the_registration_it_names_and_the_cause_it_gives() {
    use Registration::*;
    type Row<'a> = (&'a str, Option<(u16, &'a str)>, Outcome);
    let table: &[Row] = &[
        ("went through", None, Outcome::Passed),
        ("tls", Some((500, VALIDATION_TLS)), failed(Validation, "v1beta1", Cause::Tls, VALIDATION_TLS)),
        (
            "no endpoints",
            Some((500, VALIDATION_NO_ENDPOINTS)),
            failed(Validation, "v1beta1", Cause::NoEndpoints, VALIDATION_NO_ENDPOINTS),
        ),
        (
            "no service",
            Some((500, VALIDATION_NO_SERVICE)),
            failed(Validation, "v1beta1", Cause::NoService, VALIDATION_NO_SERVICE),
        ),
        (
            "refused",
            Some((500, CONVERSION_REFUSED)),
            failed(Conversion, "v1beta1", Cause::ConnectionRefused, CONVERSION_REFUSED),
        ),
        (
            "timeout",
            Some((500, CONVERSION_TIMEOUT)),
            failed(Conversion, "v1beta1", Cause::Timeout, CONVERSION_TIMEOUT),
        ),
        (
            "404 on path",
            Some((500, CONVERSION_404)),
            failed(Conversion, "v1beta1", Cause::PathNotFound, CONVERSION_404),
        ),
        (
            "version not served",
            Some((404, "the server could not find the requested resource")),
            Outcome::Unserved,
        ),
    ];
    for (name, answer, want) in table {
        assert_eq!(&judge("v1beta1", *answer), want, "{name}");
    }
}

#[test]
fn a_refusal_that_says_nothing_about_the_webhooks_is_not_checked_not_an_alarm() {
    let forbidden =
        judge("v1beta1", Some((403, "runners.lab.cloudlab.training is forbidden: User \"t\" cannot create")));
    assert!(
        matches!(&forbidden, Outcome::NotChecked(why) if why.contains("may not create Runners")),
        "{forbidden:?}"
    );
    let no_ns = judge("v1beta1", Some((404, "namespaces \"gone\" not found")));
    assert!(matches!(&no_ns, Outcome::NotChecked(why) if why.contains("gone")), "{no_ns:?}");
    let invalid = judge("v1beta1", Some((422, "Runner.lab.cloudlab.training \"x\" is invalid")));
    assert!(matches!(invalid, Outcome::NotChecked(_)), "{invalid:?}");
}

#[test]
fn a_failure_says_what_it_breaks_and_the_fix_for_where_it_points() {
    let tls = Failure {
        registration: Registration::Validation,
        version: "v1beta1".into(),
        cause: Cause::Tls,
        message: VALIDATION_TLS.into(),
    };
    let d = tls.describe();
    assert!(d.contains(VALIDATING_CONFIG) && d.contains("every Runner create and update is refused"), "{d}");
    let fix = tls.fix(None);
    assert!(fix.contains("caBundle") && fix.contains("run-manager --local-webhooks --take-over"), "{fix}");
    assert!(fix.contains("kubectl runner install"), "{fix}");
    let gone = Failure { cause: Cause::NoEndpoints, ..tls.clone() }.fix(None);
    assert!(gone.contains("rollout status"), "{gone}");
    let url = tls.fix(Some("https://127.0.0.1:9443/validate"));
    assert!(url.contains("https://127.0.0.1:9443/validate") && url.contains("diagnose --fix"), "{url}");
    let conversion = Failure { registration: Registration::Conversion, version: "v1alpha1".into(), ..tls };
    assert!(conversion.describe().contains("Runners at v1alpha1"), "{}", conversion.describe());
}

#[test]
fn the_storage_version_is_probed_and_the_others_only_when_a_webhook_converts_them() {
    let mut crd = crate::manifests::crd_with_webhook();
    assert_eq!(versions(Some(&crd)), vec![VERSION.to_string(), "v1alpha1".to_string()]);
    crd.spec.conversion = Some(CustomResourceConversion { strategy: "None".into(), webhook: None });
    assert_eq!(versions(Some(&crd)), vec![VERSION.to_string()]);
    assert_eq!(versions(None), vec![VERSION.to_string()]);
}
