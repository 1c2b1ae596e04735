//! The e2e report as data: each step's result and the verdict. The CLI
//! renders it (`cli::output::e2e`) and maps the verdict to an exit code.

use serde::Serialize;

use super::cluster::Cluster;

#[derive(Debug, Clone, Serialize)]
pub struct StepResult {
    pub name: String,
    pub ok: bool,
    /// It did not apply here (ok, and its detail says why).
    pub skipped: bool,
    pub seconds: f64,
    pub detail: String,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Report {
    /// Where it ran.
    pub cluster: Cluster,
    pub namespace: String,
    pub installed_crd: bool,
    pub kept: bool,
    pub interrupted: bool,
    pub steps: Vec<StepResult>,
    pub seconds: f64,
    pub artifacts: Option<String>,
}

impl Report {
    /// Every step ran and passed, and the run was not interrupted.
    pub fn passed(&self) -> bool {
        !self.interrupted && !self.steps.is_empty() && self.steps.iter().all(|s| s.ok)
    }
}

/// A report with one step per entry of `oks`, for tests of its readers.
#[cfg(test)]
pub fn sample(oks: &[bool]) -> Report {
    Report {
        cluster: Cluster { context: "kind-lab".into(), kind: Some("lab".into()) },
        namespace: "ns".into(),
        installed_crd: false,
        kept: false,
        interrupted: false,
        steps: oks
            .iter()
            .enumerate()
            .map(|(i, ok)| StepResult {
                name: format!("s{i}"),
                skipped: false,
                ok: *ok,
                seconds: 1.0,
                detail: if *ok { String::new() } else { "timed out".into() },
            })
            .collect(),
        seconds: 2.0,
        artifacts: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_report_passes_only_when_every_step_passed() {
        assert!(sample(&[true, true]).passed());
        assert!(!sample(&[true, false]).passed());
        assert!(!sample(&[]).passed(), "no steps run is not a pass");
    }
}
