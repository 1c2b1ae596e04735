//! How every part of the project talks to the apiserver: one User-Agent
//! (so audit logs and apiserver metrics name us), one way to scope an `Api`
//! (typed or dynamic) to a namespace or to all of them, and the Runner reads
//! every command shares ([`runners`]), one way to build a client with a
//! per-request deadline ([`build`]), the kinds a failed request falls
//! into ([`failure`]), and the guarded writes ([`guarded`], with the
//! put-back of a local manager's registrations, [`registrations`]).

use std::time::Duration;

use http::HeaderValue;
use http::header::USER_AGENT;
use kube::api::{Api, ApiResource, DynamicObject};
use kube::{Client, Resource};

pub mod children;
pub mod failure;
pub mod guarded;
pub mod registrations;
pub mod runners;
pub mod webhook_probe;

/// `kubectl-runner/<version>`, sent on every request.
pub const USER_AGENT_VALUE: &str = concat!("kubectl-runner/", env!("CARGO_PKG_VERSION"));

/// Adds our User-Agent to a client configuration (kube sends none of its own).
pub fn identify(config: &mut kube::Config) {
    config.headers.retain(|(name, _)| name != USER_AGENT);
    config.headers.push((USER_AGENT, HeaderValue::from_static(USER_AGENT_VALUE)));
}

/// A client for `config`. With `request_timeout`, each request fails with
/// [`failure::Failure::TimedOut`] when no answer (its status line and
/// headers) came within it, connecting and kube's retries included: a
/// server that accepts and never answers costs that long, not forever. A
/// watch answers at once and then streams, so `get -w` and `--wait` are not
/// cut by it.
pub fn build(config: kube::Config, request_timeout: Option<Duration>) -> Result<Client, kube::Error> {
    let builder = kube::client::ClientBuilder::try_from(config)?;
    Ok(match request_timeout {
        Some(t) => builder.with_layer(&tower::timeout::TimeoutLayer::new(t)).build(),
        None => builder.build(),
    })
}

/// An `Api` for one namespace, or for all of them when `ns` is `None`.
pub fn scoped<K>(client: &Client, ns: Option<&str>) -> Api<K>
where
    K: Resource<Scope = k8s_openapi::NamespaceResourceScope>,
    <K as Resource>::DynamicType: Default,
{
    match ns {
        Some(ns) => Api::namespaced(client.clone(), ns),
        None => Api::all(client.clone()),
    }
}

/// A dynamic `Api` for the resource `ar`: in `ns`, or cluster-wide (all
/// namespaces, or a cluster-scoped kind) when `None`.
pub fn scoped_dynamic(client: &Client, ar: &ApiResource, ns: Option<&str>) -> Api<DynamicObject> {
    match ns {
        Some(ns) => Api::namespaced_with(client.clone(), ns, ar),
        None => Api::all_with(client.clone(), ar),
    }
}

/// Waits until the Runner CRD is Established (kube's `await_condition`, a
/// watch, not a poll). Shared by `install` and `e2e`.
pub async fn wait_crd_established(client: &Client, timeout: std::time::Duration) -> crate::error::Result<()> {
    use crate::api::CRD_NAME;
    use crate::error::Error;
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let cond = kube::runtime::conditions::is_crd_established();
    tokio::time::timeout(timeout, kube::runtime::wait::await_condition(crds, CRD_NAME, cond))
        .await
        .map_err(|_| Error::CrdNotEstablished { after: timeout })?
        .map_err(|e| Error::WaitCrd(e.to_string()))?;
    Ok(())
}

/// Whether the client's own identity may do what `attributes` say: one
/// SelfSubjectAccessReview, the question `kubectl auth can-i` asks. The
/// one place the CLI, the manager's preflight and `migrate` ask it.
pub async fn can_i(
    client: &Client,
    attributes: k8s_openapi::api::authorization::v1::ResourceAttributes,
) -> Result<bool, crate::error::ApiError> {
    use crate::error::FromApi;
    use k8s_openapi::api::authorization::v1::{SelfSubjectAccessReview, SelfSubjectAccessReviewSpec};
    let review = SelfSubjectAccessReview {
        spec: SelfSubjectAccessReviewSpec { resource_attributes: Some(attributes), ..Default::default() },
        ..Default::default()
    };
    let api: Api<SelfSubjectAccessReview> = Api::all(client.clone());
    let answer = api
        .create(&Default::default(), &review)
        .await
        .map_err(|e| crate::error::ApiError::api("create", "SelfSubjectAccessReview", "", "", e))?;
    Ok(answer.status.is_some_and(|s| s.allowed))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_user_agent_names_the_project_and_its_version_once() {
        let mut config = kube::Config::new("https://127.0.0.1:6443".parse().unwrap());
        identify(&mut config);
        identify(&mut config);
        let agents: Vec<_> = config.headers.iter().filter(|(n, _)| n == USER_AGENT).collect();
        assert_eq!(agents.len(), 1);
        assert_eq!(agents[0].1, format!("kubectl-runner/{}", env!("CARGO_PKG_VERSION")).as_str());
    }
}
