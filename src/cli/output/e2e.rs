//! `e2e`'s report as the user reads it: one line per step while it runs,
//! then a summary line or JSON. The JSON's field names are stable:
//! `cluster.{context, kind}` (kind only on a kind cluster), `namespace`,
//! `installedCrd`, `kept`, `interrupted`, `seconds`,
//! `artifacts`, `passed`, `steps[].{name, ok, skipped, seconds, detail}`.

use super::Safe;
use crate::e2e::cluster::Cluster;
use crate::e2e::{Report, StepResult};

/// The first line, on stderr: where the run goes (the version is the
/// server's word, so it is escaped like any cluster data).
pub fn banner(context: &str, major: &str, minor: &str) -> String {
    format!("e2e on context {context:?} (Kubernetes {}.{})\n", Safe::new(major), Safe::new(minor))
}

/// One progress line per step: "  ok    12.3s  scale 1 -> 3 -> 2".
pub fn step_line(s: &StepResult) -> String {
    let mark = match (s.ok, s.skipped) {
        (true, true) => "skip",
        (true, false) => "ok  ",
        (false, _) => "FAIL",
    };
    let mut line = format!("  {mark} {:>6.1}s  {}", s.seconds, Safe::new(&s.name));
    if !s.detail.is_empty() {
        line.push_str(&format!(": {}", Safe::new(&s.detail)));
    }
    line
}

/// One line: "e2e passed: 9/9 steps in 41.2 s (namespace runner-e2e-1a2b3c)".
pub fn summary(r: &Report) -> String {
    let ok = r.steps.iter().filter(|s| s.ok && !s.skipped).count();
    let verdict = if r.passed() {
        "passed"
    } else if r.interrupted {
        "interrupted"
    } else {
        "FAILED"
    };
    let mut s = format!(
        "e2e {verdict}: {ok}/{} steps in {:.1} s on {} (namespace {})",
        r.steps.len(),
        r.seconds,
        cluster(&r.cluster),
        Safe::new(&r.namespace)
    );
    let skipped = r.steps.iter().filter(|s| s.skipped).count();
    if skipped > 0 {
        s.push_str(&format!(", {skipped} skipped"));
    }
    if let Some(dir) = &r.artifacts {
        s.push_str(&format!("; artifacts in {}", Safe::new(dir)));
    }
    s + "\n"
}

/// "kind cluster NAME (context CTX)" or "context CTX".
pub fn cluster(c: &Cluster) -> String {
    match &c.kind {
        Some(name) => format!("kind cluster {} (context {})", Safe::new(name), Safe::new(&c.context)),
        None => format!("context {}", Safe::new(&c.context)),
    }
}

/// Pretty JSON of the report plus its verdict (`passed`), with a trailing
/// newline.
pub fn json(r: &Report) -> String {
    let mut v = serde_json::to_value(r).unwrap_or_default();
    v["passed"] = serde_json::Value::Bool(r.passed());
    super::json(&v)
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::e2e::report::sample as report;

    #[test]
    fn the_summary_counts_steps_and_json_has_stable_fields() {
        let r = report(&[true, false]);
        assert_eq!(
            summary(&r),
            "e2e FAILED: 1/2 steps in 2.0 s on kind cluster lab (context kind-lab) (namespace ns)\n"
        );
        let v: serde_json::Value = serde_json::from_str(&json(&r)).unwrap();
        assert_eq!(v["passed"], false);
        assert_eq!(v["installedCrd"], false);
        assert_eq!(v["steps"][1]["ok"], false);
    }

    #[test]
    fn an_interrupted_run_says_so_and_names_its_artifacts() {
        let mut r = report(&[true]);
        r.interrupted = true;
        r.artifacts = Some("e2e-artifacts/ns".into());
        assert_eq!(
            summary(&r),
            "e2e interrupted: 1/1 steps in 2.0 s on kind cluster lab (context kind-lab) (namespace ns); artifacts in e2e-artifacts/ns\n"
        );
    }

    #[test]
    fn a_step_line_marks_failures_and_gives_the_detail() {
        let r = report(&[true, false]);
        assert_eq!(step_line(&r.steps[0]), "  ok      1.0s  s0");
        assert_eq!(step_line(&r.steps[1]), "  FAIL    1.0s  s1: timed out");
    }

    #[test]
    fn a_step_detail_from_the_cluster_is_escaped() {
        let mut r = report(&[false]);
        r.steps[0].detail = "pod says \u{1b}[2Jgone\nnext".into();
        assert_eq!(step_line(&r.steps[0]), "  FAIL    1.0s  s0: pod says \\x1b[2Jgone\\nnext");
    }
}
