//! kubectl's standard connection flags (cli-runtime's `ConfigFlags`), with
//! kubectl's names and meanings, and the rules that turn them and a
//! kubeconfig (or no kubeconfig at all) into one kube `Config`.
//!
//! Flags win over the kubeconfig field by field, as in kubectl: `--cluster`
//! and `--user` pick other kubeconfig entries than the context names,
//! `--server`, `--certificate-authority`, `--tls-server-name` and the rest
//! replace single fields. [`ConnectionFlags::validate`] and
//! [`ConnectionFlags::apply`] are pure; `Globals::connect_as` (in `cli`)
//! loads the kubeconfig, applies them and builds the client.

use std::path::{Path, PathBuf};
use std::time::Duration;

use kube::config::{AuthInfo, KubeConfigOptions, Kubeconfig};
use secrecy::SecretString;

use super::args::parse_duration;
use super::error::{Error, Result};
use crate::service_account::ServiceAccountRef;

/// Who `--as-service-account` acts as and who `--as` acts as cannot both
/// hold: the apiserver impersonates one identity per request.
pub const IMPERSONATION_RULE: &str = "--as-service-account NS/NAME acts as that ServiceAccount after \
     checking that you may (it is --as system:serviceaccount:NS:NAME with a check); it cannot be combined \
     with --as, --as-group or --as-uid";

/// kubectl's flags for reaching and authenticating to the apiserver.
#[derive(Debug, Clone, Default, clap::Args)]
#[command(next_help_heading = "Connection (kubectl's flags)")]
pub struct ConnectionFlags {
    /// Username to impersonate for the operation: a user, or a
    /// ServiceAccount as system:serviceaccount:NS:NAME.
    #[arg(long = "as", global = true, value_name = "USER")]
    pub as_user: Option<String>,
    /// Group to impersonate for the operation; repeat for more groups.
    /// Needs --as.
    #[arg(long = "as-group", global = true, value_name = "GROUP")]
    pub as_group: Vec<String>,
    /// UID to impersonate for the operation. Needs --as.
    #[arg(long = "as-uid", global = true, value_name = "UID")]
    pub as_uid: Option<String>,
    /// The name of the kubeconfig cluster to use.
    #[arg(long, global = true, value_name = "NAME")]
    pub cluster: Option<String>,
    /// The name of the kubeconfig user to use.
    #[arg(long, global = true, value_name = "NAME")]
    pub user: Option<String>,
    /// The address and port of the Kubernetes API server (https:// when no
    /// scheme is given). Works without any kubeconfig.
    #[arg(short = 's', long, global = true, value_name = "URL", value_parser = parse_server)]
    pub server: Option<http::Uri>,
    /// Bearer token for authentication to the API server. Replaces the
    /// kubeconfig user's credentials (token, exec plugin, auth provider and,
    /// without --client-certificate, its client certificate).
    #[arg(long, global = true, value_name = "TOKEN")]
    pub token: Option<String>,
    /// Path to a cert file for the certificate authority.
    #[arg(long, global = true, value_name = "FILE")]
    pub certificate_authority: Option<PathBuf>,
    /// Path to a client certificate file for TLS.
    #[arg(long, global = true, value_name = "FILE")]
    pub client_certificate: Option<PathBuf>,
    /// Path to a client key file for TLS.
    #[arg(long, global = true, value_name = "FILE")]
    pub client_key: Option<PathBuf>,
    /// If true, the server's certificate will not be checked for validity.
    /// This will make your HTTPS connections insecure.
    #[arg(long, global = true)]
    pub insecure_skip_tls_verify: bool,
    /// Server name to use for server certificate validation. If it is not
    /// provided, the hostname used to contact the server is used.
    #[arg(long, global = true, value_name = "NAME")]
    pub tls_server_name: Option<String>,
    /// How long to wait for the answer to each request before giving up:
    /// 10s, 1m, 1h; 0 means no limit. Bounds how long a command waits on a
    /// server that does not answer. Watches (get -w, --wait) are not cut.
    #[arg(long, global = true, value_name = "DURATION", default_value = "0", value_parser = parse_duration)]
    pub request_timeout: Duration,
    /// If true, opt-out of response compression for all requests to the server.
    #[arg(long, global = true)]
    pub disable_compression: bool,
}

/// `--server`: a URL; `host:port` alone means `https://host:port`.
pub fn parse_server(s: &str) -> std::result::Result<http::Uri, String> {
    let url = if s.contains("://") { s.to_string() } else { format!("https://{s}") };
    let uri: http::Uri = url.parse().map_err(|e| format!("{s:?} is not a server URL ({e})"))?;
    match (uri.scheme_str(), uri.host()) {
        (Some("https" | "http"), Some(h)) if !h.is_empty() => Ok(uri),
        _ => Err(format!("{s:?} is not a server URL; use e.g. https://10.0.0.1:6443")),
    }
}

impl ConnectionFlags {
    /// The per-request deadline, or `None` for `--request-timeout=0`.
    pub fn request_timeout(&self) -> Option<Duration> {
        Some(self.request_timeout).filter(|t| !t.is_zero())
    }

    /// True when any impersonation flag is given.
    pub fn impersonates(&self) -> bool {
        self.as_user.is_some() || !self.as_group.is_empty() || self.as_uid.is_some()
    }

    /// Combinations kubectl or the apiserver refuse, refused before any
    /// request, naming the flags. `sa` is `--as-service-account`.
    pub fn validate(&self, sa: Option<&ServiceAccountRef>) -> Result<()> {
        if sa.is_some() && self.impersonates() {
            return Err(Error::Invalid(IMPERSONATION_RULE.into()));
        }
        if self.as_user.is_none() && (!self.as_group.is_empty() || self.as_uid.is_some()) {
            return Err(Error::Invalid("--as-group and --as-uid need --as (the user to impersonate)".into()));
        }
        if self.insecure_skip_tls_verify && self.certificate_authority.is_some() {
            return Err(Error::Invalid(
                "--insecure-skip-tls-verify and --certificate-authority contradict each other; give one"
                    .into(),
            ));
        }
        Ok(())
    }

    /// The files the flags name, so that a missing one is refused before
    /// connecting rather than as a TLS error.
    pub fn files(&self) -> impl Iterator<Item = (&'static str, &Path)> {
        [
            ("--certificate-authority", &self.certificate_authority),
            ("--client-certificate", &self.client_certificate),
            ("--client-key", &self.client_key),
        ]
        .into_iter()
        .filter_map(|(flag, p)| p.as_deref().map(|p| (flag, p)))
    }

    /// `--user` names a kubeconfig user that exists: kube (like client-go
    /// for a context's user) would go on without credentials, and the
    /// apiserver would answer as `system:anonymous`.
    pub fn check_user(&self, kubeconfig: &Kubeconfig) -> Result<()> {
        let Some(user) = &self.user else { return Ok(()) };
        let names: Vec<&str> = kubeconfig.auth_infos.iter().map(|u| u.name.as_str()).collect();
        if names.contains(&user.as_str()) {
            return Ok(());
        }
        Err(Error::Kubeconfig(format!(
            "--user {user}: no such user in the kubeconfig (it has: {})",
            names.join(", ")
        )))
    }

    /// Which kubeconfig context, cluster and user to load.
    pub fn kubeconfig_options(&self, context: Option<&str>) -> KubeConfigOptions {
        KubeConfigOptions {
            context: context.map(String::from),
            cluster: self.cluster.clone(),
            user: self.user.clone(),
        }
    }

    /// Applies the flags over a loaded (or, with `--server` alone, a blank)
    /// configuration. Pure: files are read later, when the client is built.
    pub fn apply(&self, config: &mut kube::Config) {
        if let Some(server) = &self.server {
            config.cluster_url = server.clone();
        }
        if let Some(ca) = &self.certificate_authority {
            // kube reads it when the client is built (and again when it changes).
            config.root_cert_file = Some(ca.clone());
        }
        if self.insecure_skip_tls_verify {
            config.accept_invalid_certs = true;
            config.root_cert = None;
            config.root_cert_file = None;
        }
        if let Some(name) = &self.tls_server_name {
            config.tls_server_name = Some(name.clone());
        }
        if self.disable_compression {
            config.disable_compression = true;
        }
        apply_credentials(self, &mut config.auth_info);
        if let Some(user) = &self.as_user {
            config.auth_info.impersonate = Some(user.clone());
            config.auth_info.impersonate_groups = Some(self.as_group.clone()).filter(|g| !g.is_empty());
            config.auth_info.impersonate_uid = self.as_uid.clone();
            config.auth_info.impersonate_user_extra = None;
        }
    }
}

/// `--token`, `--client-certificate`, `--client-key` over the kubeconfig
/// user. kube prefers an auth provider, then basic auth, to a token, so a
/// token alone would not be used: it replaces them all.
fn apply_credentials(f: &ConnectionFlags, auth: &mut AuthInfo) {
    if let Some(token) = &f.token {
        auth.token = Some(SecretString::from(token.clone()));
        auth.token_file = None;
        auth.auth_provider = None;
        auth.exec = None;
        auth.username = None;
        auth.password = None;
        if f.client_certificate.is_none() {
            auth.client_certificate = None;
            auth.client_certificate_data = None;
            auth.client_key = None;
            auth.client_key_data = None;
        }
    }
    if let Some(cert) = &f.client_certificate {
        auth.client_certificate = Some(cert.display().to_string());
        auth.client_certificate_data = None;
    }
    if let Some(key) = &f.client_key {
        auth.client_key = Some(key.display().to_string());
        auth.client_key_data = None;
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;
    use secrecy::ExposeSecret;

    use super::*;

    /// The flags as a subcommand line would give them.
    fn flags(args: &[&str]) -> ConnectionFlags {
        #[derive(Parser)]
        struct Line {
            #[command(flatten)]
            f: ConnectionFlags,
        }
        Line::try_parse_from(std::iter::once("x").chain(args.iter().copied())).unwrap().f
    }

    fn kubeconfig_like() -> kube::Config {
        let mut c = kube::Config::new("https://10.0.0.1:6443".parse().unwrap());
        c.root_cert = Some(vec![b"ca".to_vec()]);
        c.auth_info = serde_json::from_value(serde_json::json!({
            "client-certificate-data": "Y2VydA==", "client-key-data": "a2V5",
            "exec": { "command": "get-token", "apiVersion": "client.authentication.k8s.io/v1" },
        }))
        .unwrap();
        c
    }

    #[test]
    fn no_flags_change_nothing() {
        let mut c = kubeconfig_like();
        flags(&[]).apply(&mut c);
        assert_eq!(c.cluster_url, "https://10.0.0.1:6443/");
        assert!(c.auth_info.exec.is_some() && c.auth_info.client_certificate_data.is_some());
        assert_eq!((c.auth_info.impersonate.as_deref(), c.root_cert_file.as_deref()), (None, None));
        assert_eq!(flags(&[]).request_timeout(), None);
    }

    #[test]
    fn server_and_tls_flags_replace_the_kubeconfig_fields() {
        let mut c = kubeconfig_like();
        let f =
            flags(&["-s", "127.0.0.1:7443", "--certificate-authority", "ca.crt", "--tls-server-name", "api"]);
        f.apply(&mut c);
        assert_eq!(c.cluster_url, "https://127.0.0.1:7443/");
        assert_eq!(c.root_cert_file.as_deref(), Some(Path::new("ca.crt")));
        assert_eq!(c.tls_server_name.as_deref(), Some("api"));
        let mut c = kubeconfig_like();
        flags(&["--insecure-skip-tls-verify", "--disable-compression"]).apply(&mut c);
        assert!(c.accept_invalid_certs && c.disable_compression && c.root_cert.is_none());
    }

    #[test]
    fn a_token_replaces_every_credential_of_the_kubeconfig_user() {
        let mut c = kubeconfig_like();
        flags(&["--token", "abc"]).apply(&mut c);
        let a = &c.auth_info;
        assert_eq!(a.token.as_ref().map(|t| t.expose_secret().to_string()).as_deref(), Some("abc"));
        assert!(a.exec.is_none() && a.client_certificate_data.is_none() && a.client_key_data.is_none());
    }

    #[test]
    fn client_certificate_flags_replace_the_inline_ones() {
        let mut c = kubeconfig_like();
        flags(&["--client-certificate", "me.crt", "--client-key", "me.key"]).apply(&mut c);
        let a = &c.auth_info;
        assert_eq!(
            (a.client_certificate.as_deref(), a.client_key.as_deref()),
            (Some("me.crt"), Some("me.key"))
        );
        assert!(a.client_certificate_data.is_none() && a.client_key_data.is_none());
    }

    #[test]
    fn impersonation_sets_user_groups_and_uid() {
        let mut c = kubeconfig_like();
        let f = flags(&["--as", "dev", "--as-group", "a", "--as-group", "b", "--as-uid", "42"]);
        f.validate(None).unwrap();
        f.apply(&mut c);
        let a = &c.auth_info;
        assert_eq!(a.impersonate.as_deref(), Some("dev"));
        assert_eq!(a.impersonate_groups, Some(vec!["a".to_string(), "b".to_string()]));
        assert_eq!(a.impersonate_uid.as_deref(), Some("42"));
    }

    #[test]
    fn contradictory_flags_are_usage_errors_naming_them() {
        let sa: ServiceAccountRef = "team/mgr".parse().unwrap();
        let cases: [(&[&str], Option<&ServiceAccountRef>, &str); 4] = [
            (&["--as", "dev"], Some(&sa), "cannot be combined with --as"),
            (&["--as-group", "g"], None, "--as-group and --as-uid need --as"),
            (&["--as-uid", "1"], None, "--as-group and --as-uid need --as"),
            (&["--insecure-skip-tls-verify", "--certificate-authority", "c"], None, "give one"),
        ];
        for (args, sa, want) in cases {
            let err = flags(args).validate(sa).unwrap_err();
            assert!(matches!(err, Error::Invalid(_)) && err.to_string().contains(want), "{args:?}: {err}");
        }
        flags(&[]).validate(Some(&sa)).unwrap();
    }

    #[test]
    fn a_user_named_by_the_flag_must_be_in_the_kubeconfig() {
        let kc: Kubeconfig = serde_json::from_value(serde_json::json!({ "users": [
            { "name": "admin", "user": {} }, { "name": "dev", "user": {} } ] }))
        .unwrap();
        flags(&[]).check_user(&kc).unwrap();
        flags(&["--user", "dev"]).check_user(&kc).unwrap();
        let err = flags(&["--user", "nobody"]).check_user(&kc).unwrap_err().to_string();
        assert!(err.contains("--user nobody: no such user in the kubeconfig (it has: admin, dev)"), "{err}");
    }

    #[test]
    fn request_timeouts_use_kubectl_syntax_and_zero_means_none() {
        assert_eq!(flags(&["--request-timeout", "0"]).request_timeout(), None);
        assert_eq!(flags(&["--request-timeout=10s"]).request_timeout(), Some(Duration::from_secs(10)));
        assert_eq!(flags(&["--request-timeout", "1m"]).request_timeout(), Some(Duration::from_secs(60)));
        assert_eq!(flags(&["--request-timeout", "5"]).request_timeout(), Some(Duration::from_secs(5)));
    }

    #[test]
    fn servers_are_urls_with_a_host() {
        assert_eq!(parse_server("http://127.0.0.1:8080").unwrap(), "http://127.0.0.1:8080/");
        assert_eq!(parse_server("api.example:6443").unwrap(), "https://api.example:6443/");
        for bad in ["", "ftp://x", "https://", "a b"] {
            assert!(parse_server(bad).is_err(), "{bad}");
        }
    }
}
