//! What a Runner says about its Pods beyond the image: requests and limits
//! (`spec.resources`) and the Pod Security profile (`spec.podSecurity`).
//! Both exist so a Runner can be admitted where a namespace demands them
//! (a ResourceQuota on cpu or memory needs limits; the `restricted` Pod
//! Security Standard needs a locked-down security context).
//!
//! Like [`super::rules`], each bound is defined once here: the CRD's
//! schema and CEL rules and the CLI's checks are built from the same
//! constants, in the same words, so the CLI refuses what the apiserver
//! refuses.

use std::cmp::Ordering;
use std::sync::LazyLock;

use kube::KubeSchema;
use kube::core::Rule;
use kube_quantity::ParsedQuantity;
use regex::Regex;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Longest quantity string: real ones are a few characters; the bound
/// keeps the CEL rules' cost estimate small.
pub const MAX_QUANTITY_LEN: usize = 32;
/// A Kubernetes quantity without a sign (resource.Quantity's grammar):
/// digits with an optional fraction, then a binary (`Ki`..`Ei`), decimal
/// (`n`..`E`) or exponent (`e3`) suffix.
pub const QUANTITY_PATTERN: &str = r"^(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE][-+]?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$";
/// Why a quantity is refused.
pub const QUANTITY_RULE: &str = "must be a positive quantity such as 100m, 0.5, 64Mi or 1Gi";

/// Requests and limits of the Runner's container, for cpu and memory.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Default, KubeSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[x_kube(validation = within_limit_cel("cpu"), validation = within_limit_cel("memory"))]
pub struct Resources {
    /// What the scheduler reserves for each Pod; at most the limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requests: Option<Amounts>,
    /// The most each Pod may use; a ResourceQuota on cpu or memory requires them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limits: Option<Amounts>,
}

/// Amounts of cpu and memory, as Kubernetes quantities (at most 32 characters).
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Default, KubeSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Amounts {
    /// CPU, e.g. `100m` (a tenth of a core) or `0.5`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = MAX_QUANTITY_LEN), pattern(QUANTITY_PATTERN))]
    #[x_kube(validation = positive_cel())]
    pub cpu: Option<String>,
    /// Memory, e.g. `64Mi` or `1Gi`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = MAX_QUANTITY_LEN), pattern(QUANTITY_PATTERN))]
    #[x_kube(validation = positive_cel())]
    pub memory: Option<String>,
}

/// The Pod Security profile the Pods are made to satisfy. Without it the
/// Pods carry no security context, so images that run as root keep working.
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum PodSecurity {
    // The restricted Pod Security Standard: runAsNonRoot, no privilege
    // escalation, every capability dropped, the runtime's seccomp profile.
    // (Plain comments: a doc comment per variant turns the schema's `enum`
    // into a `oneOf`.)
    Restricted,
}

impl std::str::FromStr for PodSecurity {
    type Err = String;
    fn from_str(s: &str) -> Result<PodSecurity, String> {
        match s {
            "restricted" => Ok(PodSecurity::Restricted),
            _ => Err(format!("spec.podSecurity: {s:?} is not a profile; allowed: restricted")),
        }
    }
}

impl Amounts {
    fn get(&self, resource: &str) -> Option<&str> {
        match resource {
            "cpu" => self.cpu.as_deref(),
            _ => self.memory.as_deref(),
        }
    }
}

/// CEL rule on each quantity; the schema's `pattern` checks its form.
pub fn positive_cel() -> Rule {
    Rule::new("isQuantity(self) && quantity(self).isGreaterThan(quantity('0'))").message(QUANTITY_RULE)
}

/// CEL rule on `spec.resources`: the request of `resource` is at most its limit.
pub fn within_limit_cel(resource: &str) -> Rule {
    let (req, lim) = (format!("self.requests.{resource}"), format!("self.limits.{resource}"));
    Rule::new(format!(
        "!has(self.requests) || !has(self.limits) || !has({req}) || !has({lim}) \
         || !isQuantity({req}) || !isQuantity({lim}) || quantity({req}).compareTo(quantity({lim})) <= 0"
    ))
    .message(kube::core::Message::Message(format!("must not exceed limits.{resource}")))
    .field_path(format!(".requests.{resource}"))
}

static QUANTITY_RE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(QUANTITY_PATTERN).expect("the quantity pattern is a valid regex"));

/// The value of a quantity the schema admits, or the schema's refusal
/// naming `field`.
pub fn check_quantity(field: &str, value: &str) -> Result<ParsedQuantity, String> {
    let refused =
        || format!("spec.{field}: {value:?} {QUANTITY_RULE} (at most {MAX_QUANTITY_LEN} characters)");
    if value.is_empty() || value.len() > MAX_QUANTITY_LEN || !QUANTITY_RE.is_match(value) {
        return Err(refused());
    }
    let q = ParsedQuantity::try_from(value).map_err(|_| refused())?;
    if q <= ParsedQuantity::try_from("0").map_err(|_| refused())? {
        return Err(refused());
    }
    Ok(q)
}

/// The checks the CRD makes on `spec.resources`: every quantity positive,
/// and no request above its limit.
pub fn check_resources(r: &Resources) -> Result<(), String> {
    for (which, amounts) in [("requests", &r.requests), ("limits", &r.limits)] {
        let Some(a) = amounts else { continue };
        for resource in ["cpu", "memory"] {
            if let Some(v) = a.get(resource) {
                check_quantity(&format!("resources.{which}.{resource}"), v)?;
            }
        }
    }
    let (Some(req), Some(lim)) = (&r.requests, &r.limits) else { return Ok(()) };
    for resource in ["cpu", "memory"] {
        if let (Some(q), Some(l)) = (req.get(resource), lim.get(resource))
            && same_or_less(q, l) == Some(false)
        {
            return Err(format!(
                "spec.resources.requests.{resource}: {q:?} must not exceed limits.{resource} ({l:?})"
            ));
        }
    }
    Ok(())
}

fn same_or_less(a: &str, b: &str) -> Option<bool> {
    let (a, b) = (ParsedQuantity::try_from(a).ok()?, ParsedQuantity::try_from(b).ok()?);
    Some(a.cmp(&b) != Ordering::Greater)
}

/// True when two quantity strings have the same value (`0.5` and `500m`):
/// the apiserver stores quantities in canonical form, so drift compares
/// values, not spellings. Strings that do not parse compare as strings.
pub fn same_quantity(a: &str, b: &str) -> bool {
    match (ParsedQuantity::try_from(a), ParsedQuantity::try_from(b)) {
        (Ok(a), Ok(b)) => a == b,
        _ => a == b,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn amounts(cpu: &str, memory: &str) -> Option<Amounts> {
        Some(Amounts { cpu: Some(cpu.into()), memory: Some(memory.into()) })
    }

    #[test]
    fn quantities_must_be_positive_and_well_formed() {
        for ok in ["100m", "0.5", "1", "64Mi", "1Gi", "1e3", "1.5k", ".5"] {
            assert!(check_quantity("resources.limits.cpu", ok).is_ok(), "{ok}");
        }
        for bad in
            ["", "0", "0m", "-1", "+1", "1 Gi", "1GB", "abc", "1.2.3", &"1".repeat(MAX_QUANTITY_LEN + 1)]
        {
            let err = check_quantity("resources.limits.cpu", bad).unwrap_err();
            assert!(err.starts_with("spec.resources.limits.cpu: ") && err.contains(QUANTITY_RULE), "{err}");
        }
    }

    #[test]
    fn a_request_above_its_limit_is_refused_naming_the_field() {
        let ok = Resources { requests: amounts("100m", "64Mi"), limits: amounts("0.5", "64Mi") };
        assert_eq!(check_resources(&ok), Ok(()));
        let over = Resources { requests: amounts("1", "64Mi"), limits: amounts("500m", "1Gi") };
        let err = check_resources(&over).unwrap_err();
        assert!(err.starts_with("spec.resources.requests.cpu: \"1\" must not exceed limits.cpu"), "{err}");
        let mem = Resources { requests: amounts("1", "2Gi"), limits: amounts("1", "1024Mi") };
        assert!(check_resources(&mem).unwrap_err().contains("requests.memory"));
        let bad = Resources { requests: None, limits: amounts("1", "lots") };
        assert!(check_resources(&bad).unwrap_err().starts_with("spec.resources.limits.memory: \"lots\""));
    }

    #[test]
    fn quantities_compare_by_value_not_spelling() {
        assert!(
            same_quantity("0.5", "500m") && same_quantity("1024Mi", "1Gi") && same_quantity("1000", "1k")
        );
        assert!(!same_quantity("500m", "501m") && !same_quantity("1Gi", "1G"));
    }

    #[test]
    fn the_cel_rules_guard_every_quantity_call() {
        assert!(positive_cel().rule.starts_with("isQuantity(self) && "));
        let rule = within_limit_cel("cpu");
        assert!(rule.rule.contains("!isQuantity(self.requests.cpu)"), "{}", rule.rule);
        assert_eq!(rule.field_path.as_deref(), Some(".requests.cpu"));
        assert!(!QUANTITY_PATTERN.contains('\''), "a quote would end a CEL raw string");
    }

    #[test]
    fn the_profile_parses_from_its_name_only() {
        assert_eq!("restricted".parse(), Ok(PodSecurity::Restricted));
        let err = "baseline".parse::<PodSecurity>().unwrap_err();
        assert!(err.contains("spec.podSecurity") && err.contains("allowed: restricted"), "{err}");
        assert_eq!(serde_json::to_value(PodSecurity::Restricted).unwrap(), "restricted");
    }
}
