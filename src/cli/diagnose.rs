//! `kubectl runner diagnose [NAME]`: arguments -> a validated
//! [`crate::diagnose::Request`] -> gather, check, report; with `--fix`, the
//! confirmed fixes ([`fix`]: registrations a local manager left, stuck
//! finalizers) happen between a first diagnose and the one that is
//! reported, so the output shows the state after the fix.

use std::time::Duration;

use clap::ValueEnum;

use super::args::parse_duration;
use super::error::{Error, Result};
use super::{Ctx, Globals, exit, output};
use crate::diagnose::snapshot::{ServiceAccountRef, Thresholds};
use crate::diagnose::{self, Request};

mod fix;

const AFTER_HELP: &str = "\
Checks, in order: the installation (cluster reachable, CRD present, served and
equal to what this binary generates, as is the validating webhook
configuration's admission rules); registrations a local manager
(`run-manager --local-webhooks`) pointed at itself and left when it died
(its Lease expired): the CRD's conversion, which makes reads of Runners fail,
and the validating webhook, which refuses their creates and updates; said
first, and restored by --fix; a validating webhook whose Service has no ready
endpoint; conversion between the Runner's versions
(a webhook that fails, which makes every read of Runners fail and is said
first, with its Service, ready endpoints and the fix; a caBundle that does not
verify the serving certificate; a certificate within {NEAR} days of its end; a
version in status.storedVersions no longer served, fixed by `kubectl runner
migrate`); the manager (leader Lease holder and renewal, in-cluster Deployment
readiness, restarts and Pod waiting reasons, or no manager at all); the
ServiceAccount's permissions, one SubjectAccessReview per verb and resource
the manager needs in every namespace it watches, like
`kubectl auth can-i --as=system:serviceaccount:NS:SA`, plus over-broad grants;
Runners stuck Terminating and what holds them; missing or foreign children
(missing at once when no manager is seen or the status says the children were
made for this generation; within --grace only while a manager may still make them);
Pods that cannot pull, start or schedule; status behind the spec, not Ready, or
churning (a hot loop) and who writes it.

With --observe DURATION, diagnose also watches the Runners, their children and
their Pods that long and attributes every write to the field manager whose
managedFields entry it moved, and to the fields it changed: a field that two
managers set by turns is a `write-fight` (both names, the count and the fix), an
object written more than 60 times a minute with nothing to explain it (a
rollout's status writes are explained by the spec change before them) is a
`write-storm` (by whom, which fields; \"writes that change nothing\" when none).
Both are errors.

A manager started with `kubectl runner run-manager` without --leader-elect
leaves no trace in the cluster and cannot be seen.

-o json (stable; fields are only added): {apiVersion: diagnose.kubectl-runner/v1,
scope: {namespaces, name}, summary: {errors, warnings, info, runners},
findings: [{code, severity: error|warning|info, object: {kind, namespace, name},
message, evidence: [..], fix, writes: {kind, name, windowSeconds, writes, perMinute,
handovers, fields: [{field, writes}], managers: [{manager, operation, subresource,
writes}]} (write-fight and write-storm only)}]}

Permissions diagnose itself needs (it is read-only except for --fix):
  create  subjectaccessreviews.authorization.k8s.io
  get     customresourcedefinitions.apiextensions.k8s.io
  get     deployments.apps, leases.coordination.k8s.io, serviceaccounts and
          list pods in runner-system
  list    clusterrolebindings, and rolebindings in the namespaces checked;
  get     clusterroles and roles they refer to
  get     services, secrets and list endpointslices.discovery.k8s.io in
          runner-system, when the CRD converts by webhook
  get     validatingwebhookconfigurations.admissionregistration.k8s.io, and
          leases.coordination.k8s.io in the namespace a local manager's
          annotation names
{CHILDREN}
  --fix:  update customresourcedefinitions.apiextensions.k8s.io, update and
          delete validatingwebhookconfigurations, delete leases, to restore
          what a local manager left
Reads that are forbidden are reported as `gather-incomplete`, not fatal; a child
kind you may not read is named once as `not-readable`, and its checks skipped.

Exit codes:
  0  no errors found (warnings and notes allowed)
  1  diagnose itself failed (no kubeconfig, Runner not found, --fix refused)
  2  usage error
  3  errors found

Examples:
  kubectl runner diagnose                      # installation + every Runner in the namespace
  kubectl runner diagnose web -n team-a        # one Runner
  kubectl runner diagnose -A -o json | jq '.findings[] | select(.severity==\"error\")'
  kubectl runner diagnose --service-account team-a/runner-manager
  kubectl runner diagnose --as-service-account team-a/runner-manager   # the same
  kubectl runner diagnose web --observe 20s    # fights between field managers, write loops
  kubectl runner diagnose web --fix            # remove a stuck finalizer once the children are gone
  kubectl runner diagnose --fix                # after a local manager crashed: restore the registrations";

/// [`AFTER_HELP`] with the reads of children, one per kind of
/// [`crate::kinds::all`], wrapped as the rest of the text is.
fn after_help() -> String {
    let plurals: Vec<&str> = crate::kinds::all().iter().map(|k| k.plural()).collect();
    let children = plurals.join(", ");
    let lines = [
        format!("  get, list runners; get {children}; list pods and events, in the namespaces diagnosed"),
        format!("  --observe: watch runners, {children} and pods in the namespaces diagnosed"),
        format!("  --fix:  patch runners (and list {children})"),
    ];
    let near = crate::diagnose::checks::conversion::NEAR_EXPIRY.as_secs() / (24 * 3600);
    AFTER_HELP.replace("{CHILDREN}", &lines.map(|l| wrap(&l)).join("\n")).replace("{NEAR}", &near.to_string())
}

/// `line` broken at spaces into lines of at most 79 characters, the
/// continuations indented by ten.
fn wrap(line: &str) -> String {
    const WIDTH: usize = 79;
    let (mut out, mut rest) = (String::new(), line.to_string());
    while rest.len() > WIDTH {
        let Some(cut) = rest[..=WIDTH].rfind(' ').filter(|&i| i > 10) else { break };
        out += &rest[..cut];
        out.push('\n');
        rest = format!("          {}", &rest[cut + 1..]);
    }
    out + &rest
}

/// Explain why a Runner or the manager is not working.
#[derive(Debug, clap::Args)]
#[command(after_help = after_help())]
pub struct DiagnoseArgs {
    /// Only this Runner (plus the installation, manager and permissions).
    pub name: Option<String>,
    /// ServiceAccount whose permissions to check, as NAMESPACE/NAME
    /// (default: the in-cluster manager's, runner-system/runner-controller-manager).
    /// Also spelled --as-service-account, as for run-manager: each check asks
    /// the apiserver what that ServiceAccount may do, as impersonation would.
    /// It is whose permissions are checked; --as is who asks (diagnose's
    /// own requests), so the two combine.
    #[arg(long, visible_alias = "as-service-account", value_name = "NS/NAME", value_parser = parse_service_account)]
    pub service_account: Option<ServiceAccountRef>,
    /// Consider Events from this long ago (e.g. 30m, 2h).
    #[arg(long, value_name = "DURATION", default_value = "1h", value_parser = parse_duration)]
    pub since: Duration,
    /// How long a Runner may be deleting, catching up or creating children
    /// before that counts as stuck.
    #[arg(long, value_name = "DURATION", default_value = "30s", value_parser = parse_duration)]
    pub grace: Duration,
    /// Read the Runners twice this far apart to catch status churn; 0 skips it.
    #[arg(long, value_name = "DURATION", default_value = "1s", value_parser = parse_duration)]
    pub churn_window: Duration,
    /// Watch the Runners, their children and Pods this long (1s to 30m,
    /// e.g. 20s) and report field managers fighting over a field
    /// (write-fight) and objects written in a loop (write-storm).
    #[arg(long, value_name = "DURATION", value_parser = parse_observe)]
    pub observe: Option<Duration>,
    /// Output format.
    #[arg(short = 'o', long, value_enum, default_value_t = Format::Table)]
    pub output: Format,
    /// Restore the CRD's conversion and the validating webhook a local
    /// manager left pointing at itself when it died (its Lease expired),
    /// and remove our finalizer from Runners stuck Terminating whose
    /// children are already gone (asks first on a terminal).
    #[arg(long)]
    pub fix: bool,
    /// Do not ask before --fix changes anything (for scripts).
    #[arg(short = 'y', long, requires = "fix")]
    pub yes: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    Table,
    Json,
}

/// `namespace/name`, both non-empty.
pub fn parse_service_account(s: &str) -> std::result::Result<ServiceAccountRef, String> {
    s.parse()
}

/// The shortest and longest `--observe`: a write loop shows within a
/// second; longer than half an hour is a job for metrics, not a command.
pub const OBSERVE_RANGE: (Duration, Duration) = (Duration::from_secs(1), Duration::from_secs(30 * 60));

/// `--observe`: a duration from 1s to 30m.
pub fn parse_observe(s: &str) -> std::result::Result<Duration, String> {
    let d = parse_duration(s)?;
    let (min, max) = OBSERVE_RANGE;
    if d < min || d > max {
        return Err("must be from 1s to 30m, e.g. 20s".into());
    }
    Ok(d)
}

impl DiagnoseArgs {
    /// The request for the given namespace flags; NAME needs one namespace.
    pub fn request(&self, namespace: &str, all_namespaces: bool) -> Result<Request> {
        if self.name.is_some() && all_namespaces {
            return Err(Error::Invalid("a Runner NAME cannot be combined with -A; use -n NAMESPACE".into()));
        }
        Ok(Request {
            namespaces: if all_namespaces { vec![] } else { vec![namespace.to_string()] },
            name: self.name.clone(),
            service_account: self.service_account.clone(),
            thresholds: Thresholds { grace: self.grace, since: self.since },
            churn_window: self.churn_window,
            observe: self.observe.unwrap_or(Duration::ZERO),
        })
    }
}

/// What one `diagnose` invocation produced: the report to print and the exit
/// code it maps to.
#[derive(Debug)]
pub struct Outcome {
    pub report: diagnose::Report,
    /// Some `--fix` was declined (or could not be asked).
    pub refused: bool,
}

impl Outcome {
    /// See [`exit::diagnose`]: 3 with errors; else 1 when a fix was refused; else 0.
    pub fn exit_code(&self) -> u8 {
        exit::diagnose(self.report.summary.errors, self.refused)
    }
}

pub async fn run(g: &Globals, a: DiagnoseArgs) -> Result<u8> {
    let ctx = g.connect().await?;
    let outcome = execute(&ctx, &a).await?;
    let text = match a.output {
        Format::Table => output::diagnose::table(&outcome.report),
        Format::Json => output::diagnose::json(&outcome.report),
    };
    output::emit(&text)?;
    Ok(outcome.exit_code())
}

/// Everything but printing (so tests can run it in-process): diagnose; with
/// `--fix`, remove the confirmed finalizers and diagnose again.
pub async fn execute(ctx: &Ctx, a: &DiagnoseArgs) -> Result<Outcome> {
    let req = a.request(&ctx.namespace, ctx.all_namespaces)?;
    let (snapshot, mut report) = diagnose::diagnose(&ctx.client, &req).await;
    if let Some(name) = &req.name
        && snapshot.complete()
        && snapshot.runners.is_empty()
    {
        return Err(Error::RunnerNotFound { namespace: ctx.namespace.clone(), name: name.clone() });
    }
    let mut refused = false;
    if a.fix {
        let applied = fix::apply(&ctx.client, a.yes, &snapshot).await?;
        refused = applied.refused;
        if applied.proposed {
            let again = Request { churn_window: Duration::ZERO, observe: Duration::ZERO, ..req };
            let mut after = diagnose::gather::gather(&ctx.client, &again).await;
            // What --observe saw stays reported: the fix removes no writer.
            for rs in &mut after.runners {
                let before =
                    snapshot.runners.iter().find(|b| b.runner.metadata.uid == rs.runner.metadata.uid);
                rs.observed = before.and_then(|b| b.observed.clone());
            }
            report = diagnose::report_for(&after);
        }
    }
    Ok(Outcome { report, refused })
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    fn parse(args: &[&str]) -> std::result::Result<crate::cli::Cli, clap::Error> {
        crate::cli::Cli::try_parse_from(["kubectl-runner", "diagnose"].iter().chain(args))
    }

    fn diag(args: &[&str]) -> DiagnoseArgs {
        match parse(args).unwrap().command {
            crate::cli::Command::Diagnose(a) => a,
            _ => unreachable!(),
        }
    }

    #[test]
    fn the_service_account_is_namespace_slash_name() {
        let sa = parse_service_account("team/mgr").unwrap();
        assert_eq!((sa.namespace.as_str(), sa.name.as_str()), ("team", "mgr"));
        for bad in ["mgr", "/mgr", "team/", "a/b/c"] {
            assert!(parse_service_account(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn as_service_account_is_the_same_flag_as_for_run_manager() {
        let a = diag(&["--as-service-account", "team/mgr"]);
        assert_eq!(a.service_account, Some(parse_service_account("team/mgr").unwrap()));
        assert_eq!(diag(&["--service-account", "team/mgr"]).service_account, a.service_account);
    }

    #[test]
    fn defaults_are_a_half_minute_grace_and_an_hour_of_events() {
        let a = diag(&[]);
        let req = a.request("app", false).unwrap();
        assert_eq!(req.namespaces, ["app"]);
        assert_eq!(req.thresholds.grace, Duration::from_secs(30));
        assert_eq!(req.thresholds.since, Duration::from_secs(3600));
        assert_eq!(req.churn_window, Duration::from_secs(1));
        assert_eq!(a.output, Format::Table);
    }

    #[test]
    fn all_namespaces_means_no_namespace_list() {
        assert!(diag(&[]).request("app", true).unwrap().namespaces.is_empty());
    }

    #[test]
    fn a_name_with_all_namespaces_is_a_usage_error() {
        assert!(matches!(diag(&["web"]).request("app", true), Err(Error::Invalid(_))));
    }

    #[test]
    fn observe_takes_one_second_to_half_an_hour_and_a_bad_value_names_the_flag_and_the_range() {
        assert_eq!(diag(&[]).request("app", false).unwrap().observe, Duration::ZERO);
        let a = diag(&["web", "--observe", "20s"]);
        assert_eq!(a.request("app", false).unwrap().observe, Duration::from_secs(20));
        assert_eq!(diag(&["--observe", "30m"]).observe, Some(Duration::from_secs(1800)));
        for bad in ["0s", "500ms", "31m", "2h"] {
            let err = parse(&["--observe", bad]).unwrap_err().to_string();
            assert!(
                err.contains(&format!("{bad}' for '--observe")) && err.contains("from 1s to 30m"),
                "{bad}: {err}"
            );
        }
        let err = parse(&["--observe", "soon"]).unwrap_err().to_string();
        assert!(err.contains("--observe") && err.contains("not a duration"), "{err}");
    }

    #[test]
    fn yes_without_fix_is_rejected() {
        assert!(parse(&["--yes"]).is_err());
    }

    #[test]
    fn help_documents_the_permissions_and_exit_codes() {
        let err = parse(&["--help"]).unwrap_err();
        let help = err.to_string();
        assert!(help.contains("subjectaccessreviews.authorization.k8s.io"), "{help}");
        assert!(help.contains("3  errors found"), "{help}");
        assert!(help.contains("without --leader-elect"), "{help}");
        assert!(help.contains(crate::diagnose::report::API_VERSION), "{help}");
    }
}
