//! The e2e report: step results, rendered as a table or JSON. Field names of
//! the JSON are stable: `namespace`, `installedCrd`, `kept`, `interrupted`,
//! `seconds`, `artifacts`, `passed`, `steps[].{name, ok, seconds, detail}`.

use serde::Serialize;

#[derive(Debug, Clone, Serialize)]
pub struct StepResult {
    pub name: String,
    pub ok: bool,
    pub seconds: f64,
    pub detail: String,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Report {
    pub namespace: String,
    pub installed_crd: bool,
    pub kept: bool,
    pub interrupted: bool,
    pub steps: Vec<StepResult>,
    pub seconds: f64,
    pub artifacts: Option<String>,
}

impl Report {
    pub fn passed(&self) -> bool {
        !self.interrupted && !self.steps.is_empty() && self.steps.iter().all(|s| s.ok)
    }

    /// One line: "e2e passed: 9/9 steps in 41.2 s (namespace runner-e2e-1a2b3c)".
    pub fn summary(&self) -> String {
        let ok = self.steps.iter().filter(|s| s.ok).count();
        let verdict = if self.passed() {
            "passed"
        } else if self.interrupted {
            "interrupted"
        } else {
            "FAILED"
        };
        let mut s = format!(
            "e2e {verdict}: {ok}/{} steps in {:.1} s (namespace {})",
            self.steps.len(),
            self.seconds,
            self.namespace
        );
        if let Some(dir) = &self.artifacts {
            s.push_str(&format!("; artifacts in {dir}"));
        }
        s
    }

    pub fn to_json(&self) -> String {
        let mut v = serde_json::to_value(self).unwrap_or_default();
        v["passed"] = serde_json::Value::Bool(self.passed());
        serde_json::to_string_pretty(&v).unwrap_or_default()
    }
}

/// One progress line per step: "  ok    12.3s  scale 1 -> 3 -> 2".
pub fn step_line(s: &StepResult) -> String {
    let mark = if s.ok { "ok  " } else { "FAIL" };
    let mut line = format!("  {mark} {:>6.1}s  {}", s.seconds, s.name);
    if !s.detail.is_empty() {
        line.push_str(&format!(": {}", s.detail));
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(oks: &[bool]) -> Report {
        Report {
            namespace: "ns".into(),
            installed_crd: false,
            kept: false,
            interrupted: false,
            steps: oks
                .iter()
                .enumerate()
                .map(|(i, ok)| StepResult {
                    name: format!("s{i}"),
                    ok: *ok,
                    seconds: 1.0,
                    detail: String::new(),
                })
                .collect(),
            seconds: 2.0,
            artifacts: None,
        }
    }

    #[test]
    fn a_report_passes_only_when_every_step_passed() {
        assert!(report(&[true, true]).passed());
        assert!(!report(&[true, false]).passed());
        assert!(!report(&[]).passed(), "no steps run is not a pass");
    }

    #[test]
    fn the_summary_counts_steps_and_json_has_stable_fields() {
        let r = report(&[true, false]);
        assert_eq!(r.summary(), "e2e FAILED: 1/2 steps in 2.0 s (namespace ns)");
        let v: serde_json::Value = serde_json::from_str(&r.to_json()).unwrap();
        assert_eq!(v["passed"], false);
        assert_eq!(v["installedCrd"], false);
        assert_eq!(v["steps"][1]["ok"], false);
    }
}
