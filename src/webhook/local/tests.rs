use super::*;
use crate::manifests::{crd, crd_with_webhook, validating_webhook_configuration};

const ORIGIN: &str = "https://127.0.0.1:40001";

fn by(holder: &str, url: &str) -> Holder {
    Holder { holder: holder.into(), lease_namespace: "runner-system".into(), url: url.into() }
}

fn with_rv(mut crd: CustomResourceDefinition) -> CustomResourceDefinition {
    crd.metadata.resource_version = Some("7".into());
    crd
}

#[test]
fn a_crd_pointed_at_a_local_manager_and_restored_is_what_it_was() {
    for original in [with_rv(crd()), with_rv(crd_with_webhook())] {
        let pointed = point_crd(&original, &by("laptop pid 1", ORIGIN), "CA", false).unwrap();
        let cc = pointed.spec.conversion.as_ref().unwrap().webhook.as_ref().unwrap().client_config.clone();
        assert_eq!(cc.as_ref().unwrap().url.as_deref(), Some("https://127.0.0.1:40001/convert"));
        assert!(pointed.spec.versions.iter().all(|v| v.served), "every version served while local");
        assert_eq!(pointed.metadata.resource_version.as_deref(), Some("7"), "the write is guarded");
        let back = restore_crd(&pointed, Some("laptop pid 1")).unwrap().unwrap();
        assert_eq!(back, original);
    }
}

#[test]
fn a_second_pointing_keeps_the_first_previous_and_a_live_holder_is_not_taken() {
    let original = crd_with_webhook();
    let first = point_crd(&original, &by("a pid 1", ORIGIN), "CA1", false).unwrap();
    let again = point_crd(&first, &by("a pid 1", "https://127.0.0.1:2"), "CA2", true).unwrap();
    let refused = point_crd(&first, &by("b pid 2", "https://127.0.0.1:3"), "CA3", true).unwrap_err();
    assert!(refused.to_string().contains("\"a pid 1\""), "{refused}");
    let taken = point_crd(&again, &by("b pid 2", "https://127.0.0.1:3"), "CA3", false).unwrap();
    let s = saved::<CrdPrevious>(taken.metadata.annotations.as_ref()).unwrap().unwrap();
    assert_eq!((s.by.holder.as_str(), s.by.url.as_str()), ("b pid 2", "https://127.0.0.1:3"));
    assert_eq!(s.previous.conversion, original.spec.conversion, "never the dead manager's URL");
    assert_eq!(restore_crd(&taken, Some("a pid 1")).unwrap(), None, "only its holder restores on exit");
    assert_eq!(restore_crd(&taken, None).unwrap().unwrap(), original, "diagnose --fix restores any");
}

#[test]
fn a_user_annotation_that_is_not_ours_is_neither_taken_nor_restored() {
    let mut edited = crd();
    edited.metadata.annotations = Some([(SAVED_ANNOTATION.to_string(), "{\"holder\":1}".to_string())].into());
    assert!(matches!(point_crd(&edited, &by("a", ORIGIN), "CA", false), Err(Refusal::Unreadable { .. })));
    assert!(restore_crd(&edited, None).is_err());
    assert_eq!(restore_crd(&crd(), None).unwrap(), None, "nothing to restore");
}

#[test]
fn a_webhook_configuration_the_local_manager_created_is_deleted_on_restore() {
    let created = point_validating(None, &by("a", ORIGIN), "CA", false).unwrap();
    let url = created.webhooks.as_ref().unwrap()[0].client_config.url.clone();
    assert_eq!(url.as_deref(), Some("https://127.0.0.1:40001/validate"));
    assert_eq!(restore_validating(&created, Some("a")).unwrap(), Some(Restore::Delete));
}

#[test]
fn an_installed_webhook_configuration_gets_its_webhooks_back() {
    let mut installed =
        validating_webhook_configuration(&Target::Service { namespace: "runner-system".into() }, Some("CA0"));
    installed.metadata.resource_version = Some("9".into());
    installed.metadata.labels = Some([("app".to_string(), "x".to_string())].into());
    let pointed = point_validating(Some(&installed), &by("a", ORIGIN), "CA", false).unwrap();
    assert_eq!(pointed.metadata.labels, installed.metadata.labels);
    assert_eq!(pointed.metadata.resource_version.as_deref(), Some("9"));
    assert!(pointed.webhooks.as_ref().unwrap()[0].client_config.service.is_none());
    let Some(Restore::Replace(back)) = restore_validating(&pointed, None).unwrap() else { panic!("replace") };
    assert_eq!(back, installed);
}
