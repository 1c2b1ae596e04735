//! Flag types several subcommands share: output formats, `--dry-run`,
//! durations and object names. Parsing here is pure, so a bad value fails
//! with exit code 2 before anything connects to a cluster.

use std::time::Duration;

use crate::error::{Error, Result};

/// `-o` for `get`: how a list of Runners is printed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum GetFormat {
    /// Columns like `kubectl get`.
    #[default]
    Table,
    /// The table plus children and the Ready condition's reason.
    Wide,
    Yaml,
    Json,
    /// `runner.lab.cloudlab.training/NAME`, one per line.
    Name,
}

/// `-o` for commands that print the object they changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ObjectFormat {
    Yaml,
    Json,
    Name,
}

impl From<ObjectFormat> for GetFormat {
    fn from(f: ObjectFormat) -> GetFormat {
        match f {
            ObjectFormat::Yaml => GetFormat::Yaml,
            ObjectFormat::Json => GetFormat::Json,
            ObjectFormat::Name => GetFormat::Name,
        }
    }
}

/// `--dry-run`, as kubectl spells it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum DryRun {
    /// Really do it.
    #[default]
    None,
    /// Validate locally and print; send nothing.
    Client,
    /// Send with `dryRun=All`: the apiserver validates, stores nothing.
    Server,
}

/// A duration flag, as kubectl and Go spell them: `90s`, `2m`, `1h30m`,
/// `500ms`, `1.5s`; a bare number is seconds. Parsed by jiff, never negative.
pub fn parse_duration(s: &str) -> std::result::Result<Duration, String> {
    if let Ok(secs) = s.trim().parse::<u64>() {
        return Ok(Duration::from_secs(secs));
    }
    let d: k8s_openapi::jiff::SignedDuration =
        s.parse().map_err(|e| format!("{s:?} is not a duration; use e.g. 90s, 2m, 1h30m ({e})"))?;
    Duration::try_from(d).map_err(|_| format!("{s:?} must not be negative"))
}

/// A Runner's name becomes its Deployment's and Service's name, and a
/// Service name must be a DNS-1035 label: checking here, with the rule the
/// CRD enforces at admission ([`crate::api::rules::check_name`]), turns a
/// refusal into a usage error naming the rule before any request.
pub fn validate_name(name: &str) -> Result<()> {
    crate::api::rules::check_name(name).map_err(Error::Invalid)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_accept_kubectl_spellings() {
        assert_eq!(parse_duration("90"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration("90s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration("1m30s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("1h"), Ok(Duration::from_secs(3600)));
        assert_eq!(parse_duration("1.5s"), Ok(Duration::from_millis(1500)));
        for (s, secs) in [("30s", 30), ("5m", 300), ("1h30m", 5400), ("0", 0), ("2h 5m", 7500)] {
            assert_eq!(parse_duration(s), Ok(Duration::from_secs(secs)), "{s}");
        }
    }

    #[test]
    fn durations_without_a_known_unit_are_rejected() {
        for bad in ["", "s", "5x", "m5", "-1s", "-5m", "soon"] {
            assert!(parse_duration(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn names_must_be_dns_1035_labels() {
        for ok in ["web", "a", "web-2", &"a".repeat(63)] {
            assert!(validate_name(ok).is_ok(), "{ok}");
        }
        for bad in ["", "Web", "2web", "web-", "we_b", "a.b", &"a".repeat(64)] {
            let err = validate_name(bad).unwrap_err();
            assert!(matches!(err, Error::Invalid(_)), "{err}");
            assert!(err.to_string().contains("metadata.name"), "{err}");
        }
    }
}
