//! `diagnose --fix` at the terminal: shows what each fix changes, asks
//! (or takes `--yes`), applies it, and says what it did, on stderr.
//! Registrations a crashed local manager left come first: while they point
//! at nothing, Runners may not even be readable, and the finalizer fix
//! needs to read them.

use super::super::error::Result;
use super::super::output::{self, Safe};
use crate::diagnose::fix;
use crate::diagnose::restore::{self, ExpiredLease, RestoreFix, Restored};
use crate::diagnose::snapshot::Snapshot;

/// What `--fix` did.
#[derive(Debug, Default)]
pub struct Applied {
    /// Something was proposed (then diagnose runs again to show the state after).
    pub proposed: bool,
    /// Some fix was declined (or could not be asked).
    pub refused: bool,
}

/// Proposes and applies every fix the snapshot allows.
pub async fn apply(client: &kube::Client, yes: bool, snapshot: &Snapshot) -> Result<Applied> {
    let registrations = restore::candidates(snapshot);
    let finalizers = fix::candidates(snapshot);
    let mut applied =
        Applied { proposed: !registrations.is_empty() || !finalizers.is_empty(), refused: false };
    if !applied.proposed {
        eprintln!(
            "--fix: nothing to fix (no registration left by a local manager that is gone, no Runner stuck \
             Terminating with its children gone)"
        );
    }
    applied.refused |= restore_registrations(client, yes, &registrations).await?;
    for c in &finalizers {
        eprint!("{}", output::diagnose::stuck(&c.namespace, &c.name, &c.promise));
        let question = output::diagnose::fix_question(crate::api::FINALIZER, &c.namespace, &c.name);
        if !confirmed(yes, &question, "removing it")? {
            applied.refused = true;
            continue;
        }
        fix::remove_finalizer(client, c).await?;
        eprint!("{}", output::diagnose::removed(crate::api::FINALIZER, &c.namespace, &c.name));
    }
    Ok(applied)
}

/// Restores each confirmed registration, then deletes the expired Lease
/// of every holder none of whose registrations was declined. Returns
/// whether one was declined. A 409 ends it with an error: nothing more
/// is written.
async fn restore_registrations(client: &kube::Client, yes: bool, fixes: &[RestoreFix]) -> Result<bool> {
    let mut refused = false;
    let mut leases: Vec<ExpiredLease> = vec![];
    let mut kept: Vec<&str> = vec![];
    for f in fixes {
        eprint!("{}", proposal(f));
        let question = format!("Restore {} as it was before the local manager?", f.object.display());
        if !confirmed(yes, &question, "restoring it")? {
            refused = true;
            kept.push(&f.by.holder);
            continue;
        }
        match restore::restore(client, f).await? {
            Restored::Done { lease } => {
                eprintln!("  restored {}", f.object.display());
                // The latest read of each Lease is the one the delete is guarded by.
                if let Some(l) = lease {
                    leases.retain(|x| x.namespace != l.namespace);
                    leases.push(l);
                }
            }
            Restored::Already => eprintln!("  {} was already restored; nothing written", f.object.display()),
        }
    }
    for lease in leases.iter().filter(|l| !kept.contains(&l.holder.as_str())) {
        restore::delete_lease(client, lease).await?;
        let name = format!("{}/{}", lease.namespace, crate::webhook::local::LEASE);
        eprintln!("  deleted the expired Lease {}", Safe::new(name));
    }
    Ok(refused)
}

/// What restoring one registration changes, before asking. Every part
/// from the cluster is escaped on its own.
fn proposal(f: &RestoreFix) -> String {
    format!(
        "{} points at the local manager {}, which is gone.\n  It sends reviews to {}; {}.\n  Restoring it: {}.\n",
        f.object.display(),
        Safe::new(format!("{:?}", f.by.holder)),
        Safe::new(f.targets.join(", ")),
        Safe::new(&f.holding),
        Safe::new(&f.restores),
    )
}

/// `--yes`, or an interactive yes ([`super::super::progress::ask`]);
/// without a terminal and without `--yes`, no (and says so).
fn confirmed(yes: bool, question: &str, doing: &str) -> Result<bool> {
    use super::super::progress::{Answer, ask};
    Ok(match ask(question, yes)? {
        Answer::Yes => true,
        Answer::No => false,
        Answer::NoTerminal => {
            eprintln!("  not {doing}: no terminal to ask on; pass --yes to confirm in scripts");
            false
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::diagnose::view::registrations::Object;
    use crate::webhook::local::Holder;

    #[test]
    fn the_proposal_names_what_comes_back_and_escapes_what_the_cluster_wrote() {
        let f = RestoreFix {
            object: Object::Validating,
            by: Holder {
                holder: "evil\u{1b}]0;x\u{7}".into(),
                lease_namespace: "dev".into(),
                url: "u".into(),
            },
            targets: vec!["URL https://127.0.0.1:1/validate".into()],
            holding: "there is no Lease dev/runner-local-webhooks: its holder is gone".into(),
            restores: "deleted (a local manager created it)".into(),
        };
        let p = proposal(&f);
        assert!(!p.contains('\u{1b}') && !p.contains('\u{7}'), "{p:?}");
        assert!(
            p.starts_with("ValidatingWebhookConfiguration runner-validation points at the local manager"),
            "{p}"
        );
        assert!(p.contains("It sends reviews to URL https://127.0.0.1:1/validate; there is no Lease"), "{p}");
        assert!(p.ends_with("  Restoring it: deleted (a local manager created it).\n"), "{p}");
    }
}
