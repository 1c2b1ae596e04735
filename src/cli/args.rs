//! Flag types several subcommands share: output formats, `--dry-run`,
//! durations and object names. Parsing here is pure, so a bad value fails
//! with exit code 2 before anything connects to a cluster.

use std::path::PathBuf;
use std::time::Duration;

use super::error::{Error, Result};
use super::output::columns::Columns;
use super::output::jsonpath::{self, Template};

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

/// `-o` for `get`: one of [`GetFormat`], or a template as kubectl spells
/// it. A template is parsed with the flag, so a mistake in it is a usage
/// error before any request; a file is read by [`GetOutput::load`].
#[derive(Debug, Clone, PartialEq)]
pub enum GetOutput {
    Format(GetFormat),
    /// `jsonpath=TEMPLATE`.
    JsonPath(Template),
    /// `jsonpath-file=PATH`.
    JsonPathFile(PathBuf),
    /// `custom-columns=HEADER:PATH,...`.
    CustomColumns(Columns),
    /// `custom-columns-file=PATH`.
    CustomColumnsFile(PathBuf),
}

impl Default for GetOutput {
    fn default() -> GetOutput {
        GetOutput::Format(GetFormat::Table)
    }
}

/// What `-o` accepts besides the plain formats, for `--help` and completion.
const TEMPLATE_FORMATS: [(&str, &str); 4] = [
    ("jsonpath=", "A JSONPath template, e.g. jsonpath='{.items[*].metadata.name}'"),
    ("jsonpath-file=", "A file holding a JSONPath template"),
    ("custom-columns=", "Columns, e.g. custom-columns=NAME:.metadata.name,IMAGE:.spec.image"),
    ("custom-columns-file=", "A file: a line of headers, then a line of paths"),
];

impl GetOutput {
    /// Parses one `-o` value.
    pub fn parse(s: &str) -> std::result::Result<GetOutput, String> {
        use clap::ValueEnum;
        if let Ok(f) = GetFormat::from_str(s, false) {
            return Ok(GetOutput::Format(f));
        }
        let Some((kind, value)) = s.split_once('=') else {
            if let Some((t, help)) = TEMPLATE_FORMATS.iter().find(|(t, _)| t.trim_end_matches('=') == s) {
                return Err(format!("-o {s} needs a value: -o {t}..., {help}"));
            }
            let plain = GetFormat::value_variants().iter().filter_map(|f| f.to_possible_value());
            let mut allowed: Vec<String> = plain.map(|p| p.get_name().to_string()).collect();
            allowed.extend(TEMPLATE_FORMATS.iter().map(|(t, _)| format!("{t}...")));
            return Err(format!("unknown output format {s:?}; allowed: {}", allowed.join(", ")));
        };
        match kind {
            "jsonpath" => jsonpath::parse(value).map(GetOutput::JsonPath),
            "custom-columns" => Columns::parse_spec(value).map(GetOutput::CustomColumns),
            "jsonpath-file" | "custom-columns-file" if value.is_empty() => {
                Err(format!("{kind} needs a file name"))
            }
            "jsonpath-file" => Ok(GetOutput::JsonPathFile(value.into())),
            "custom-columns-file" => Ok(GetOutput::CustomColumnsFile(value.into())),
            _ => Err(format!("unknown output format {kind:?} (in {s:?})")),
        }
    }
}

impl GetOutput {
    /// Reads and parses the file of `jsonpath-file=` or `custom-columns-file=`;
    /// other values are returned as they are. Both failures are usage errors
    /// naming the flag.
    pub fn load(self) -> Result<GetOutput> {
        let read = |kind: &str, path: &PathBuf| {
            let flag = format!("-o {kind}={}", path.display());
            let text = std::fs::read_to_string(path).map_err(|e| Error::Invalid(format!("{flag}: {e}")))?;
            Ok::<_, Error>((flag, text))
        };
        match self {
            GetOutput::JsonPathFile(path) => {
                let (flag, text) = read("jsonpath-file", &path)?;
                jsonpath::parse(&text)
                    .map(GetOutput::JsonPath)
                    .map_err(|e| Error::Invalid(format!("{flag}: {e}")))
            }
            GetOutput::CustomColumnsFile(path) => {
                let (flag, text) = read("custom-columns-file", &path)?;
                let cols = Columns::parse_file(&text).map_err(|e| Error::Invalid(format!("{flag}: {e}")))?;
                Ok(GetOutput::CustomColumns(cols))
            }
            other => Ok(other),
        }
    }
}

/// clap's parser for `get -o`: [`GetOutput::parse`], offering the formats
/// to `--help` and to completion.
#[derive(Debug, Clone, Copy)]
pub struct GetOutputParser;

impl clap::builder::TypedValueParser for GetOutputParser {
    type Value = GetOutput;

    fn parse_ref(
        &self,
        cmd: &clap::Command,
        arg: Option<&clap::Arg>,
        value: &std::ffi::OsStr,
    ) -> std::result::Result<GetOutput, clap::Error> {
        GetOutput::parse.parse_ref(cmd, arg, value)
    }

    fn possible_values(&self) -> Option<Box<dyn Iterator<Item = clap::builder::PossibleValue> + '_>> {
        use clap::ValueEnum;
        let plain = GetFormat::value_variants().iter().filter_map(ValueEnum::to_possible_value);
        let templates = TEMPLATE_FORMATS.iter().map(|(t, h)| clap::builder::PossibleValue::new(*t).help(*h));
        Some(Box::new(plain.chain(templates)))
    }
}

/// `--sort-by`: a relaxed JSONPath (`.spec.replicas` or `{.spec.replicas}`).
pub fn parse_sort_by(s: &str) -> std::result::Result<Template, String> {
    jsonpath::relaxed(s)
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
    fn output_takes_the_plain_formats_and_kubectl_templates() {
        assert_eq!(GetOutput::parse("wide"), Ok(GetOutput::Format(GetFormat::Wide)));
        assert!(matches!(GetOutput::parse("jsonpath={.items[*].metadata.name}"), Ok(GetOutput::JsonPath(_))));
        assert!(matches!(
            GetOutput::parse("custom-columns=N:.metadata.name"),
            Ok(GetOutput::CustomColumns(_))
        ));
        assert_eq!(GetOutput::parse("jsonpath-file=t.txt"), Ok(GetOutput::JsonPathFile("t.txt".into())));
    }

    #[test]
    fn a_bad_template_or_format_is_refused_saying_why() {
        for (s, needle) in [
            ("jsonpath={.items[}", "unterminated array"),
            ("jsonpath", "needs a value"),
            ("custom-columns=NAME", "<header>:<json-path-expr>"),
            ("jsonpath-file=", "needs a file name"),
            ("xml", "allowed: table, wide, yaml, json, name, jsonpath=..."),
            ("go-template={{.x}}", "unknown output format"),
        ] {
            let err = GetOutput::parse(s).unwrap_err();
            assert!(err.contains(needle), "{s}: {err}");
        }
    }

    #[test]
    fn a_template_file_is_read_and_parsed_and_a_bad_one_names_the_flag() {
        let dir = std::env::temp_dir().join(format!("runner-args-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let (good, bad) = (dir.join("good"), dir.join("bad"));
        std::fs::write(&good, "{.kind}\n").unwrap();
        std::fs::write(&bad, "{.kind").unwrap();
        let loaded = GetOutput::JsonPathFile(good).load().unwrap();
        assert_eq!(loaded, GetOutput::JsonPath(jsonpath::parse("{.kind}\n").unwrap()));
        let err = GetOutput::JsonPathFile(bad).load().unwrap_err().to_string();
        assert!(err.contains("-o jsonpath-file=") && err.contains("unclosed action"), "{err}");
        let missing = GetOutput::CustomColumnsFile(dir.join("none")).load().unwrap_err();
        assert!(matches!(missing, Error::Invalid(_)), "{missing}");
        std::fs::remove_dir_all(dir).unwrap();
    }

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
