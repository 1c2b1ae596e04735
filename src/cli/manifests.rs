//! `kubectl runner manifests [crd|rbac|tenant-roles|manager|all]`: the generated YAML,
//! exactly what `install` applies, for GitOps or review.

use super::error::Result;
use super::output;
use crate::manifests::{self, DEFAULT_MANAGER_IMAGE, Manifest, RbacScope};

const AFTER_HELP: &str = "\
Examples:
  kubectl runner manifests crd
  kubectl runner manifests rbac --namespace-scoped team-a
  kubectl runner manifests tenant-roles
  kubectl runner manifests all --image ghcr.io/example/kubectl-runner:0.1.0 | kubectl apply -f -";

/// Which part to print.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum Part {
    Crd,
    Rbac,
    /// runner-viewer, runner-editor, runner-admin (aggregated into view, edit, admin).
    TenantRoles,
    Manager,
    #[default]
    All,
}

#[derive(Debug, clap::Args)]
#[command(after_help = AFTER_HELP)]
pub struct ManifestsArgs {
    /// What to print.
    #[arg(value_enum, default_value_t)]
    pub part: Part,
    /// Manager image (for `manager` and `all`).
    #[arg(long, default_value = DEFAULT_MANAGER_IMAGE)]
    pub image: String,
    /// RBAC as a Role per namespace (repeatable) instead of a ClusterRole.
    #[arg(long = "namespace-scoped", value_name = "NS")]
    pub namespace_scoped: Vec<String>,
}

/// The manifests for these flags (pure).
pub fn select(a: &ManifestsArgs) -> Vec<Manifest> {
    let scope = if a.namespace_scoped.is_empty() {
        RbacScope::Cluster
    } else {
        RbacScope::Namespaces(a.namespace_scoped.clone())
    };
    match a.part {
        Part::Crd => vec![manifests::crd_manifest()],
        Part::Rbac => manifests::rbac(&scope),
        Part::TenantRoles => manifests::tenant_roles(),
        Part::Manager => manifests::manager(&a.image, &scope),
        Part::All => manifests::all(Some(&a.image), &scope),
    }
}

pub fn run(a: ManifestsArgs) -> Result<u8> {
    output::emit(&manifests::to_yaml(&select(&a)))?;
    Ok(super::exit::OK)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_crd_part_is_the_committed_crd_file() {
        let a =
            ManifestsArgs { part: Part::Crd, image: DEFAULT_MANAGER_IMAGE.into(), namespace_scoped: vec![] };
        let committed = manifests::files().into_iter().find(|(n, _)| *n == "crd.yaml").unwrap().1;
        assert_eq!(manifests::to_yaml(&select(&a)), committed);
    }

    #[test]
    fn the_tenant_roles_part_is_the_committed_file() {
        let a = ManifestsArgs {
            part: Part::TenantRoles,
            image: DEFAULT_MANAGER_IMAGE.into(),
            namespace_scoped: vec![],
        };
        let committed = manifests::files().into_iter().find(|(n, _)| *n == "tenant-roles.yaml").unwrap().1;
        assert_eq!(manifests::to_yaml(&select(&a)), committed);
    }

    #[test]
    fn all_with_an_image_ends_with_the_manager_using_it() {
        let a = ManifestsArgs { part: Part::All, image: "img:1".into(), namespace_scoped: vec![] };
        let items = select(&a);
        assert_eq!(items[0].resource.kind, "CustomResourceDefinition");
        let last = items.last().unwrap();
        assert_eq!(last.resource.kind, "Deployment");
        assert!(last.object.data.to_string().contains("img:1"));
    }
}
