//! Which Runners `delete` and `scale` act on, chosen as kubectl's verbs
//! choose: by NAME, by `-l SELECTOR`, or `--all`; `-A` widens a selector
//! or `--all` to every namespace. [`Selection::parse`] checks the
//! combination before any request; [`resolve`] reads the Runners it means.

use kube::ResourceExt;

use super::Ctx;
use super::error::{Error, Result};
use crate::api::Runner;
use crate::client::runners;

/// `--all` and `-l`, flattened into the verbs that select Runners.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct SelectFlags {
    /// Every Runner in the namespace (with -A, in every namespace).
    #[arg(long)]
    pub all: bool,
    /// Only Runners whose labels match, e.g. `team=web,tier!=db`.
    #[arg(short = 'l', long)]
    pub selector: Option<String>,
}

/// What the user selected.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Selection {
    /// These names, in the namespace of `-n` (or the context's).
    Names(Vec<String>),
    /// Every Runner matching the selector (`None`: every Runner), in the
    /// namespace or, with `-A`, in all namespaces.
    Matching { selector: Option<String>, all_namespaces: bool },
}

impl Selection {
    /// Checks that exactly one of NAMEs, `-l` and `--all` was given, and
    /// that `-A` comes with a selector or `--all`. `verb` names the command.
    pub fn parse(
        names: &[String],
        flags: &SelectFlags,
        all_namespaces: bool,
        verb: &str,
    ) -> Result<Selection> {
        let given = [!names.is_empty(), flags.selector.is_some(), flags.all];
        match given {
            [false, false, false] => {
                Err(Error::Invalid(format!("say which Runners to {verb}: NAME, -l SELECTOR or --all")))
            }
            [true, false, false] if all_namespaces => {
                Err(Error::Invalid("NAME cannot be used with -A; pick a namespace with -n".into()))
            }
            [true, false, false] => Ok(Selection::Names(names.to_vec())),
            [false, true, false] | [false, false, true] => {
                Ok(Selection::Matching { selector: flags.selector.clone(), all_namespaces })
            }
            _ => Err(Error::Invalid(format!(
                "give only one of NAME, -l SELECTOR and --all to {verb}{}",
                if names.is_empty() { String::new() } else { format!(" (got NAME {})", names.join(" ")) }
            ))),
        }
    }
}

/// The Runners a selection found, and the names it asked for that do not exist.
#[derive(Debug, Clone, Default)]
pub struct Found {
    pub runners: Vec<Runner>,
    pub missing: Vec<String>,
}

/// Reads the selected Runners: one GET per name, or one LIST.
pub async fn resolve(ctx: &Ctx, sel: &Selection) -> Result<Found> {
    match sel {
        Selection::Names(names) => {
            let mut found = Found::default();
            for name in names {
                match runners::get_opt(&ctx.client, &ctx.namespace, name).await? {
                    Some(r) => found.runners.push(r),
                    None => found.missing.push(name.clone()),
                }
            }
            Ok(found)
        }
        Selection::Matching { selector, all_namespaces } => {
            let ns = (!all_namespaces).then_some(ctx.namespace.as_str());
            let runners = runners::list(&ctx.client, ns, selector.as_deref()).await?;
            Ok(Found { runners, missing: Vec::new() })
        }
    }
}

/// The namespace and name of a Runner read from the apiserver.
pub fn namespace_and_name(r: &Runner) -> (String, String) {
    (r.namespace().unwrap_or_default(), r.name_any())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flags(all: bool, selector: Option<&str>) -> SelectFlags {
        SelectFlags { all, selector: selector.map(String::from) }
    }

    #[test]
    fn names_a_selector_or_all_each_select_on_their_own() {
        let web = vec!["web".to_string()];
        assert_eq!(
            Selection::parse(&web, &flags(false, None), false, "delete").unwrap(),
            Selection::Names(web)
        );
        let sel = Selection::parse(&[], &flags(false, Some("team=x")), true, "delete").unwrap();
        assert_eq!(sel, Selection::Matching { selector: Some("team=x".into()), all_namespaces: true });
        let all = Selection::parse(&[], &flags(true, None), false, "scale").unwrap();
        assert_eq!(all, Selection::Matching { selector: None, all_namespaces: false });
    }

    #[test]
    fn all_with_a_name_or_a_selector_and_nothing_at_all_are_usage_errors() {
        let web = ["web".to_string()];
        let cases = [
            (&web[..], flags(true, None), false, "only one of NAME, -l SELECTOR and --all"),
            (&web[..], flags(false, Some("a=b")), false, "(got NAME web)"),
            (&[][..], flags(true, Some("a=b")), false, "only one of"),
            (&[][..], flags(false, None), false, "say which Runners to delete"),
            (&web[..], flags(false, None), true, "NAME cannot be used with -A"),
        ];
        for (names, f, all_ns, needle) in cases {
            let err = Selection::parse(names, &f, all_ns, "delete").unwrap_err();
            assert!(matches!(err, Error::Invalid(_)), "{err}");
            assert!(err.to_string().contains(needle), "{err}");
        }
    }
}
