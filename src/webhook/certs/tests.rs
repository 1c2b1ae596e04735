//! The renewal rules, walked with fixed clocks over real certificates.

use k8s_openapi::jiff::{SignedDuration, Timestamp};

use super::*;

fn t0() -> Timestamp {
    "2030-01-01T00:00:00Z".parse().unwrap()
}

fn day(n: i64) -> Timestamp {
    t0() + SignedDuration::from_hours(24 * n)
}

fn names() -> Vec<String> {
    crate::webhook::service_dns_names("runner-system")
}

/// Plans at `now` and carries the plan out.
fn step(now: Timestamp, m: &Material, names: &[String]) -> (Plan, Material) {
    let p = plan(now, m, names, &LIFETIMES);
    let out = carry_out(&p, now, m, names, &LIFETIMES).unwrap();
    (p, out)
}

fn cas(m: &Material) -> Vec<Cert> {
    parse_pem_certs(&m.ca_crt)
}

fn serving(m: &Material) -> Cert {
    parse_pem_certs(&m.tls_crt).remove(0)
}

fn fresh() -> Material {
    step(t0(), &Material::default(), &names()).1
}

#[test]
fn an_empty_secret_gets_a_ca_and_a_serving_certificate_for_the_service_names() {
    let (p, m) = step(t0(), &Material::default(), &names());
    assert_eq!(p.ca, CaStep::Replace(Reason::Missing));
    assert_eq!(p.serving, Some(Reason::NewCa));
    let (ca, cert) = (&cas(&m)[0], serving(&m));
    assert!(ca.is_ca && !cert.is_ca);
    assert!(cert.is_signed_by(ca));
    assert!(names().iter().all(|n| cert.names(n)), "{:?}", cert.dns_names);
    assert!(cert.not_before < t0() && ca.not_before < t0(), "backdated for clock skew");
    assert_eq!(cert.not_after, t0() + SignedDuration::from_hours(24 * 90));
    assert_eq!(ca.not_after, t0() + SignedDuration::from_hours(24 * 3 * 365));
    assert!(plan(t0(), &m, &names(), &LIFETIMES).keeps(), "what was made is kept");
}

#[test]
fn the_serving_certificate_is_renewed_with_a_third_of_its_life_left_by_the_same_ca() {
    let m = fresh();
    let before = plan(day(59), &m, &names(), &LIFETIMES);
    assert!(before.keeps(), "{before:?}");
    assert!(before.next_check <= day(60) && before.next_check > day(59), "{before:?}");
    let (p, renewed) = step(day(61), &m, &names());
    assert_eq!((p.ca, p.serving), (CaStep::Keep, Some(Reason::Due)));
    assert_eq!(renewed.ca_crt, m.ca_crt, "the CA is kept");
    assert_ne!(renewed.tls_key, m.tls_key, "a new key");
    assert_eq!(serving(&renewed).not_after, day(61 + 90));
    assert!(serving(&renewed).is_signed_by(&cas(&m)[0]));
}

/// Fresh at day 0, serving certificates renewed on time until `last`.
fn renewed_until(last: i64) -> Material {
    let mut m = fresh();
    let mut d = 0;
    while d + 60 < last {
        d += 61;
        m = step(day(d), &m, &names()).1;
    }
    m
}

#[test]
fn the_ca_rotates_with_a_third_of_its_life_left_and_keeps_the_old_one_trusted() {
    let m = renewed_until(720); // serving issued on day 671, due on day 731
    let old_ca = cas(&m)[0].clone();
    let (plan, rotated) = step(day(731), &m, &names());
    assert_eq!(plan.ca, CaStep::Rotate);
    // Due, but the new CA is not yet in the apiserver's caBundle.
    assert_eq!(plan.serving, None, "{plan:?}");
    assert_eq!(plan.next_check, day(731) + SignedDuration::from_hours(1));
    let bundle = cas(&rotated);
    assert_eq!(bundle.len(), 2);
    assert_eq!(bundle[1], old_ca, "the old CA stays, behind the new one");
    assert_eq!(rotated.tls_crt, m.tls_crt, "the working certificate keeps serving");
    assert!(serving(&rotated).is_signed_by(&old_ca));

    // Once the new CA has had time to reach the apiserver, it signs.
    let (plan, m2) = step(day(731) + SignedDuration::from_hours(2), &rotated, &names());
    assert_eq!((plan.ca, plan.serving), (CaStep::Keep, Some(Reason::Due)));
    assert!(serving(&m2).is_signed_by(&bundle[0]) && !serving(&m2).is_signed_by(&old_ca));
    assert_eq!(cas(&m2).len(), 2, "the old CA is trusted until it expires");

    // The day after it expires, it leaves the bundle.
    let after = old_ca.not_after + SignedDuration::from_hours(24);
    let mut m3 = m2;
    let mut d = 731;
    while day(d + 61) < after {
        d += 61;
        m3 = step(day(d), &m3, &names()).1;
    }
    let (plan, m4) = step(after, &m3, &names());
    assert_eq!(plan.expired_cas, 1, "{plan:?}");
    assert_eq!(cas(&m4), vec![bundle[0].clone()]);
}

#[test]
fn a_certificate_that_cannot_serve_is_replaced_at_once_even_by_a_young_ca() {
    let m = renewed_until(720);
    let rotated = step(day(731), &m, &names()).1;
    let mut wanted = names();
    wanted.push("127.0.0.1".into());
    let (plan, m2) = step(day(731) + SignedDuration::from_mins(1), &rotated, &wanted);
    assert_eq!(plan.serving, Some(Reason::NamesMissing(vec!["127.0.0.1".into()])));
    assert!(serving(&m2).names("127.0.0.1") && serving(&m2).is_signed_by(&cas(&rotated)[0]));

    let expired = plan_at(day(100), &fresh());
    assert_eq!(expired.serving, Some(Reason::Expired));
}

fn plan_at(now: Timestamp, m: &Material) -> Plan {
    plan(now, m, &names(), &LIFETIMES)
}

#[test]
fn keys_that_do_not_match_and_garbage_are_replaced() {
    let (a, b) = (fresh(), fresh());
    let swapped = Material { tls_key: b.tls_key.clone(), ..a.clone() };
    assert_eq!(plan_at(t0(), &swapped).serving, Some(Reason::KeyMismatch));
    let lost_ca_key = Material { ca_key: b.ca_key.clone(), ..a.clone() };
    assert_eq!(plan_at(t0(), &lost_ca_key).ca, CaStep::Replace(Reason::KeyMismatch));
    let foreign = Material { tls_crt: b.tls_crt.clone(), tls_key: b.tls_key.clone(), ..a.clone() };
    assert_eq!(plan_at(t0(), &foreign).serving, Some(Reason::UntrustedIssuer));
    let garbage = Material { ca_crt: "junk".into(), ca_key: "junk".into(), ..a };
    assert_eq!(plan_at(t0(), &garbage).ca, CaStep::Replace(Reason::Unreadable));
    let (p, repaired) = step(t0(), &garbage, &names());
    assert_eq!(p.serving, Some(Reason::NewCa));
    assert!(plan_at(t0(), &repaired).keeps());
}

#[test]
fn an_expired_ca_starts_over() {
    let m = fresh();
    let p = plan_at(day(3 * 365 + 1), &m);
    assert_eq!(p.ca, CaStep::Replace(Reason::Expired));
    assert_eq!(plan_at(t0() - SignedDuration::from_hours(24), &m).ca, CaStep::Replace(Reason::NotYetValid));
}
