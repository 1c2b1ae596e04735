//! What a Runner may hold, defined once. Each bound is a constant or a
//! pattern here; the CRD's schema and its CEL rules
//! (`x-kubernetes-validations`) and the CLI's checks are all built from
//! them, so the CLI refuses exactly what the apiserver refuses, in the same
//! words, and a Runner the apiserver admits can always have its children.
//!
//! Patterns are RE2 syntax, which CEL's `matches()` and the schema's
//! `pattern` use on the apiserver. They avoid `\s`, `\d` and `\w`, which are
//! ASCII in RE2 but Unicode in the `regex` crate, so the CLI compiles the
//! very same strings and both sides agree character for character. CEL
//! receives them as raw strings (`r'...'`), so no escaping differs either.

use std::sync::LazyLock;

use kube::core::{Message, Rule};
use regex::Regex;

/// Longest Runner name: the name is also the Service's, a DNS-1035 label.
pub const MAX_NAME_LEN: usize = 63;
/// A DNS-1035 label, its length aside ([`MAX_NAME_LEN`]).
pub const NAME_PATTERN: &str = "^[a-z]([-a-z0-9]*[a-z0-9])?$";
/// Longest DNS-1123 subdomain.
pub const MAX_HOST_LEN: usize = 253;
/// DNS-1123 subdomain, as Kubernetes' own validation spells it.
pub const HOST_PATTERN: &str = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$";
/// A host the Ingress API takes for an IPv4 address and refuses: four
/// decimal parts of 0..=255, leading zeros allowed (its parser is lenient,
/// so `010.0.0.1` is an IP to it, `256.0.0.1` is not). A host that matches
/// [`HOST_PATTERN`] has no ':', so it can never be an IPv6 address.
pub const IPV4_PATTERN: &str = r"^(0*(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])\.){3}0*(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])$";
/// Most host names in v1beta1's `spec.expose.hosts`: each is an Ingress
/// rule, and the bound keeps the CEL rule over them within its cost budget.
pub const MAX_HOSTS: usize = 16;
/// Longest image reference. Real ones are far shorter; the bound keeps one
/// tenant's Runners from making a list page larger than the manager's memory.
pub const MAX_IMAGE_LEN: usize = 512;

/// One path component of an image's repository: lowercase letters and
/// digits, joined by one of the distribution grammar's separators.
macro_rules! path_component {
    () => {
        r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
    };
}

/// One label of a registry host name (any case, as the grammar allows).
macro_rules! domain_component {
    () => {
        r"[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?"
    };
}

/// An image reference, per the distribution reference grammar
/// (`github.com/distribution/reference`): an optional registry host (a DNS
/// name or a bracketed IPv6 address, with an optional `:port`) as the first
/// component, then lowercase path components separated by `/`, an optional
/// `:tag` (`[\w][\w.-]{0,127}`, spelt out in ASCII) and an optional
/// `@sha256:` digest of 64 lowercase hex digits. The one pattern the CEL rule
/// and the CLI both use; it has no whitespace and no control character, so
/// nothing that reaches a terminal raw can be an image.
pub const IMAGE_PATTERN: &str = concat!(
    r"^(?:(?:",
    domain_component!(),
    r"(?:\.",
    domain_component!(),
    r")*|\[[a-fA-F0-9:]+\])(?::[0-9]+)?/)?",
    path_component!(),
    "(?:/",
    path_component!(),
    ")*",
    r"(?::[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?",
    r"(?:@sha256:[a-f0-9]{64})?$",
);

/// Why a host is refused although it is a DNS-1123 subdomain.
pub const HOST_NOT_IP: &str = "must be a DNS name, not an IP address";
/// Why an image is refused: the grammar of [`IMAGE_PATTERN`] in words.
pub const IMAGE_NOT_A_REFERENCE: &str = "must be an image reference [HOST[:PORT]/]PATH[:TAG][@sha256:DIGEST]: \
     PATH is lowercase letters and digits in components separated by '/', each component's parts joined by \
     '.', '_', '__' or dashes; TAG is 1 to 128 letters, digits, '_', '.' and '-', not starting with '.' or '-'; \
     DIGEST is 64 lowercase hex digits";

/// The name rule in words, with its bound.
pub fn name_rule() -> String {
    format!(
        "a DNS-1035 label of at most {MAX_NAME_LEN} characters (lowercase letters, digits and '-', \
         starting with a letter and ending with a letter or digit)"
    )
}

/// CEL rule at the root of the schema, the only place that can read
/// `metadata.name`. It runs on create only (`optionalOldSelf` and
/// `oldSelf.hasValue()`): a name never changes, and a Runner admitted before
/// this rule existed must stay updatable, or its finalizer could never be
/// removed. The apiserver reports a root rule at `<nil>` and refuses a
/// `fieldPath` into `metadata` (not part of the schema), so the message
/// itself names the field.
pub fn name_cel() -> Rule {
    Rule::new(format!(
        "oldSelf.hasValue() || (size(self.metadata.name) <= {MAX_NAME_LEN} \
         && self.metadata.name.matches(r'{NAME_PATTERN}'))"
    ))
    .optional_old_self(true)
    .message(Message::Message(format!(
        "metadata.name must be {}, because it names the Runner's Service",
        name_rule()
    )))
}

/// CEL rule on `spec.host`; the schema's `pattern` already makes it a DNS-1123 subdomain.
pub fn host_cel() -> Rule {
    Rule::new(format!("!self.matches(r'{IPV4_PATTERN}')")).message(HOST_NOT_IP)
}

/// CEL rule on v1beta1's `spec.expose.hosts`: [`host_cel`] for each item
/// (the schema's item `pattern` already makes each a DNS-1123 subdomain).
pub fn hosts_cel() -> Rule {
    Rule::new(format!("self.all(h, !h.matches(r'{IPV4_PATTERN}'))")).message(HOST_NOT_IP)
}

/// CEL rule on `spec.image`; the schema's `maxLength` bounds its size. An
/// image that does not change passes (`optionalOldSelf`, so the rule still
/// runs on create): a Runner admitted before this rule existed can still be
/// scaled, labelled and lose its finalizer; only a new image must be a
/// reference. Kubernetes 1.30+ ratchets unchanged values by itself
/// (CRD validation ratcheting); the clause states it in the CRD, for a
/// cluster that turned ratcheting off. The apiserver names the field
/// (`spec.image: Invalid value`).
pub fn image_cel() -> Rule {
    Rule::new(format!("(oldSelf.hasValue() && oldSelf.value() == self) || self.matches(r'{IMAGE_PATTERN}')"))
        .optional_old_self(true)
        .message(IMAGE_NOT_A_REFERENCE)
}

fn compiled(pattern: &'static str) -> Regex {
    // The patterns are constants covered by the tests below.
    Regex::new(pattern).expect("the shared patterns are valid regexes")
}

static NAME_RE: LazyLock<Regex> = LazyLock::new(|| compiled(NAME_PATTERN));
static HOST_RE: LazyLock<Regex> = LazyLock::new(|| compiled(HOST_PATTERN));
static IPV4_RE: LazyLock<Regex> = LazyLock::new(|| compiled(IPV4_PATTERN));
static IMAGE_RE: LazyLock<Regex> = LazyLock::new(|| compiled(IMAGE_PATTERN));

/// The name check [`name_cel`] makes, with the value and the rule named.
pub fn check_name(name: &str) -> Result<(), String> {
    if name.len() <= MAX_NAME_LEN && NAME_RE.is_match(name) {
        return Ok(());
    }
    Err(format!("metadata.name: {name:?} must be {}, because it names the Runner's Service", name_rule()))
}

/// The host checks of the schema: length, DNS-1123 subdomain, not an IP;
/// `field` names the host in the error (`spec.expose.hosts[0]`).
pub fn check_host(field: &str, host: &str) -> Result<(), String> {
    if host.is_empty() || host.chars().count() > MAX_HOST_LEN || !HOST_RE.is_match(host) {
        return Err(format!(
            "{field}: {host:?} is not a DNS-1123 subdomain (lowercase letters, digits, '-' and '.', \
             each label starting and ending with a letter or digit, 1..={MAX_HOST_LEN} characters)"
        ));
    }
    if IPV4_RE.is_match(host) {
        return Err(format!("{field}: {host:?} {HOST_NOT_IP}; an Ingress routes host names"));
    }
    Ok(())
}

/// The checks of v1beta1's `spec.expose.hosts`: at most [`MAX_HOSTS`]
/// names, each a host ([`check_host`]), none twice (the list is a set).
pub fn check_hosts(hosts: &[String]) -> Result<(), String> {
    if hosts.len() > MAX_HOSTS {
        return Err(format!(
            "spec.expose.hosts: {} hosts is out of range; allowed 0..={MAX_HOSTS}",
            hosts.len()
        ));
    }
    for (i, host) in hosts.iter().enumerate() {
        check_host(&format!("spec.expose.hosts[{i}]"), host)?;
        if hosts[..i].contains(host) {
            return Err(format!("spec.expose.hosts[{i}]: {host:?} is listed twice; each host once"));
        }
    }
    Ok(())
}

/// The image checks of the schema: 1..=[`MAX_IMAGE_LEN`] characters, an
/// image reference ([`IMAGE_PATTERN`]).
pub fn check_image(image: &str) -> Result<(), String> {
    let len = image.chars().count();
    if !(1..=MAX_IMAGE_LEN).contains(&len) {
        return Err(format!("spec.image: {len} characters is out of range; allowed 1..={MAX_IMAGE_LEN}"));
    }
    if !IMAGE_RE.is_match(image) {
        return Err(format!("spec.image: {image:?} {IMAGE_NOT_A_REFERENCE}"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_must_be_dns_1035_labels_of_at_most_63_characters() {
        for ok in ["web", "a", "web-2", "a1", &"a".repeat(MAX_NAME_LEN)] {
            assert_eq!(check_name(ok), Ok(()), "{ok}");
        }
        for bad in
            ["", "Web", "2web", "-web", "web-", "we_b", "web.v2", "web\n", &"a".repeat(MAX_NAME_LEN + 1)]
        {
            let err = check_name(bad).unwrap_err();
            assert!(err.starts_with("metadata.name: ") && err.contains("at most 63 characters"), "{err}");
        }
    }

    #[test]
    fn hosts_must_be_dns_subdomains_of_at_most_253_characters() {
        for ok in ["a.example.com", "x", "a-b.c1", "web.example.com", &"a".repeat(MAX_HOST_LEN)] {
            assert_eq!(check_host("spec.host", ok), Ok(()), "{ok}");
        }
        for bad in ["", "A.com", "-a.com", "a..b", "a_b", "a.", "[::1]", "::1", &"a".repeat(MAX_HOST_LEN + 1)]
        {
            let err = check_host("spec.host", bad).unwrap_err();
            assert!(err.starts_with("spec.host: ") && err.contains("1..=253"), "{err}");
        }
    }

    #[test]
    fn hosts_the_ingress_api_parses_as_ipv4_are_refused() {
        for ip in ["10.0.0.1", "0.0.0.0", "255.255.255.255", "010.0.0.1", "1.2.3.0004"] {
            let err = check_host("spec.host", ip).unwrap_err();
            assert!(err.starts_with("spec.host: ") && err.contains(HOST_NOT_IP), "{err}");
        }
        // Not an address to the Ingress API, so a (strange) DNS name it accepts.
        for name in ["256.0.0.1", "1.2.3", "1.2.3.4.5", "1.2.3.4a", "a1.2.3.4"] {
            assert_eq!(check_host("spec.host", name), Ok(()), "{name}");
        }
    }

    #[test]
    fn a_host_list_names_the_item_and_refuses_repeats_and_too_many() {
        let hosts = |v: &[&str]| v.iter().map(|h| h.to_string()).collect::<Vec<_>>();
        assert_eq!(check_hosts(&hosts(&["a.com", "b.com"])), Ok(()));
        assert_eq!(check_hosts(&[]), Ok(()));
        let err = check_hosts(&hosts(&["a.com", "10.0.0.1"])).unwrap_err();
        assert!(err.starts_with("spec.expose.hosts[1]: \"10.0.0.1\""), "{err}");
        let err = check_hosts(&hosts(&["a.com", "b.com", "a.com"])).unwrap_err();
        assert!(err.starts_with("spec.expose.hosts[2]: \"a.com\" is listed twice"), "{err}");
        let many: Vec<String> = (0..=MAX_HOSTS).map(|i| format!("h{i}.com")).collect();
        let err = check_hosts(&many).unwrap_err();
        assert!(err.starts_with("spec.expose.hosts: 17 hosts") && err.contains("0..=16"), "{err}");
    }

    #[test]
    fn images_are_references_of_1_to_512_characters() {
        let digest = "a".repeat(64);
        let ok = [
            "nginx".to_string(),
            "nginx:1.27".into(),
            "library/nginx:latest".into(),
            "localhost:5000/a/b:t".into(),
            "localhost/kubectl-runner/busybox-httpd:2".into(),
            "Registry.example.com:443/team/web".into(),
            "[::1]:5000/web:v1".into(),
            "a_b__c.d-e---f".into(),
            "web:_x".into(),
            format!("web:{}", "T".repeat(128)),
            format!("a/b@sha256:{digest}"),
            format!("ghcr.io/a/b:1.0@sha256:{digest}"),
            "a".repeat(MAX_IMAGE_LEN),
        ];
        for image in &ok {
            assert_eq!(check_image(image), Ok(()), "{image}");
        }
        let not_references = [
            "Nginx".to_string(),
            "a//b".into(),
            ":tag".into(),
            "nginx:".into(),
            "nginx:.1".into(),
            "nginx:-1".into(),
            format!("web:{}", "t".repeat(129)),
            "/nginx".into(),
            "nginx/".into(),
            "a/B".into(),
            "a-/b".into(),
            "a___b".into(),
            "web.".into(),
            "a/b@sha256:00".into(),
            format!("a/b@sha256:{}", "A".repeat(64)),
            format!("a/b@sha512:{digest}"),
            format!("a/b@{digest}"),
            "nginx 1.27".into(),
            " nginx".into(),
            "nginx\t".into(),
            "ng\ninx".into(),
            "nginx\u{1b}]0;PWNED\u{7}\u{1b}[31m:1".into(),
            "nginx:1\u{9b}31m".into(),
            "nginx\u{202e}".into(),
        ];
        for image in &not_references {
            let err = check_image(image).unwrap_err();
            assert!(
                err.starts_with("spec.image: ") && err.contains(IMAGE_NOT_A_REFERENCE),
                "{image:?}: {err}"
            );
        }
        for bad_length in ["", &"a".repeat(MAX_IMAGE_LEN + 1)] {
            let err = check_image(bad_length).unwrap_err();
            assert!(err.starts_with("spec.image: ") && err.contains("1..=512"), "{err}");
        }
    }

    #[test]
    fn the_cel_rules_embed_the_shared_patterns_as_raw_strings() {
        assert!(name_cel().rule.contains(&format!("r'{NAME_PATTERN}'")));
        assert!(name_cel().rule.contains(&format!("<= {MAX_NAME_LEN}")));
        assert!(host_cel().rule.contains(&format!("r'{IPV4_PATTERN}'")));
        assert!(hosts_cel().rule.contains(&format!("r'{IPV4_PATTERN}'")));
        assert!(image_cel().rule.contains(&format!("r'{IMAGE_PATTERN}'")));
        for p in [NAME_PATTERN, HOST_PATTERN, IPV4_PATTERN, IMAGE_PATTERN] {
            assert!(!p.contains('\''), "a quote would end the CEL raw string: {p}");
        }
    }

    #[test]
    fn the_name_rule_runs_on_create_only() {
        let r = name_cel();
        assert_eq!(r.optional_old_self, Some(true));
        assert!(r.rule.starts_with("oldSelf.hasValue() || "), "{}", r.rule);
    }

    #[test]
    fn the_image_rule_lets_an_unchanged_image_through() {
        let r = image_cel();
        assert_eq!(r.optional_old_self, Some(true));
        assert!(r.rule.starts_with("(oldSelf.hasValue() && oldSelf.value() == self) || "), "{}", r.rule);
    }
}
