//! The rewrite without a StorageVersionMigration: every Runner, read at the
//! storage version, is written back as read with a PUT that carries its
//! resourceVersion. The PUT changes no field; the apiserver encodes the
//! object at the storage version, which is the whole point.
//!
//! The resourceVersion is what keeps a concurrent writer's update: a PUT of
//! a copy older than the stored object is refused (409), so a stale copy is
//! never written. On a 409 the Runner is read again and the fresh copy is
//! written; a Runner gone meanwhile (404) is skipped and counted. An object
//! already at the storage version encodes to the bytes stored, and the
//! apiserver does not write it again: a rerun after an interruption is a
//! cheap way to continue.

use std::future::Future;

use futures::StreamExt;
use kube::Client;
use kube::api::{Api, DynamicObject, PostParams};

use super::{Error, Tally, crd};
use crate::error::{FromApi, is_not_found};

/// A Runner rewritten into this many conflicts in a row is left for a
/// rerun: someone rewrites it faster than we can read it.
pub const MAX_ATTEMPTS: u32 = 10;

/// What became of one Runner.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Written at the storage version, after `retries` conflicts.
    Rewritten { retries: u32 },
    /// Deleted before it could be written (after `retries` conflicts).
    Deleted { retries: u32 },
}

/// How a run of [`run`] ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Run {
    pub tally: Tally,
    /// `cancel` fired before every Runner was done.
    pub interrupted: bool,
}

/// Writes `object` back as read, guarded by its resourceVersion; on a
/// conflict reads it again and retries, up to [`MAX_ATTEMPTS`].
pub async fn rewrite_one(client: &Client, mut object: DynamicObject) -> Result<Outcome, Error> {
    let namespace = object.metadata.namespace.clone().unwrap_or_default();
    let name = object.metadata.name.clone().unwrap_or_default();
    let api = Api::<DynamicObject>::namespaced_with(client.clone(), &namespace, &resource_of(&object));
    let types = object.types.clone();
    let mut retries = 0;
    loop {
        match api.replace(&name, &PostParams::default(), &object).await {
            Ok(_) => return Ok(Outcome::Rewritten { retries }),
            Err(e) if is_not_found(&e) => return Ok(Outcome::Deleted { retries }),
            Err(kube::Error::Api(s)) if s.is_conflict() => {
                retries += 1;
                if retries >= MAX_ATTEMPTS {
                    return Err(Error::TooManyConflicts { namespace, name, attempts: retries });
                }
                match api.get_opt(&name).await {
                    Ok(Some(fresh)) => object = DynamicObject { types: types.clone(), ..fresh },
                    Ok(None) => return Ok(Outcome::Deleted { retries }),
                    Err(e) => return Err(Error::api("get", "Runner", &namespace, &name, e)),
                }
            }
            Err(e) => return Err(Error::api("update", "Runner", &namespace, &name, e)),
        }
    }
}

/// The Runner resource at the version `object` was read at.
fn resource_of(object: &DynamicObject) -> kube::api::ApiResource {
    let version = object.types.as_ref().and_then(|t| t.api_version.rsplit_once('/')).map(|(_, v)| v);
    crd::resource(version.unwrap_or(crate::api::VERSION))
}

/// Rewrites every Runner at `version` (the storage version), page by page,
/// `parallel` at a time, calling `progress` after each, until done or until
/// `cancel` completes. What was done before a cancel stays done and
/// counted; requests in flight then are dropped (each either landed or did
/// not, and a rerun covers both).
pub async fn run(
    client: &Client,
    version: &str,
    parallel: usize,
    cancel: impl Future<Output = ()>,
    progress: &mut dyn FnMut(&Tally, Option<u64>),
) -> Result<Run, Error> {
    let api = crd::runners(client, version);
    let mut tally = Tally::default();
    let work = async {
        let mut token = None;
        loop {
            let page = crd::page(&api, version, token).await?;
            let remaining = page.metadata.remaining_item_count.and_then(|n| u64::try_from(n).ok());
            let mut results = futures::stream::iter(page.items.into_iter().map(|o| rewrite_one(client, o)))
                .buffer_unordered(parallel);
            while let Some(outcome) = results.next().await {
                tally.add(outcome?);
                progress(&tally, remaining);
            }
            match page.metadata.continue_ {
                Some(t) if !t.is_empty() => token = Some(t),
                _ => return Ok::<(), Error>(()),
            }
        }
    };
    let interrupted = tokio::select! {
        r = work => { r?; false }
        () = cancel => true,
    };
    Ok(Run { tally, interrupted })
}
