//! Putting back a registration a local manager pointed at itself, for
//! both who do it: the local manager on exit, and `diagnose --fix` after a
//! crash. Read, judge the annotation ([`local::restore`]), write the object
//! as it was (or delete one the local manager created) guarded by the
//! resourceVersion and uid read; on a 409 read and judge again
//! ([`guarded::write`]). The two differ only in how the holder is judged:
//! the exiting manager restores what names it (`holder`), `diagnose --fix`
//! re-reads the holder's Lease (`check`). Gone (404), at the read or at the
//! write, is put back already.

use std::future::Future;

use kube::Client;
use kube::api::{Api, DeleteParams, PostParams, Preconditions};

use super::guarded::{self, Step};
use crate::error::{FromApi, is_not_found};
use crate::webhook::local::{self, Holder, Registration, Restore};

/// Puts `K` back where the annotation names `holder` (None: any holder)
/// and `check`, given that holder after each read, answers Ok: its answer
/// is returned. Ok(None): nothing to put back (gone, or not held).
/// `unreadable` is the caller's error for an annotation that does not parse.
pub async fn put_back<K, T, E, F>(
    client: &Client,
    holder: Option<&str>,
    unreadable: impl Fn(String) -> E,
    check: impl Fn(Holder) -> F,
) -> Result<Option<T>, guarded::Failed<E>>
where
    K: Registration,
    E: FromApi,
    F: Future<Output = Result<T, E>>,
{
    let api: Api<K> = Api::all(client.clone());
    let (api, unreadable, check) = (&api, &unreadable, &check);
    guarded::write(
        || async move {
            let read = api.get_opt(K::NAME).await.map_err(|e| E::api("get", K::kind(&()), "", K::NAME, e))?;
            let Some(object) = read else { return Ok(None) };
            let Some((by, restore)) = local::restore(&object, holder).map_err(unreadable)? else {
                return Ok(None);
            };
            let meta = object.meta();
            let guard =
                Preconditions { resource_version: meta.resource_version.clone(), uid: meta.uid.clone() };
            Ok(Some((restore, guard, check(by).await?)))
        },
        |read| Ok(read.map_or(Step::Done(None), Step::Write)),
        |(restore, guard, answer)| async move {
            let written = match restore {
                Restore::Replace(back) => api.replace(K::NAME, &PostParams::default(), &back).await.map(drop),
                Restore::Delete => {
                    let params = DeleteParams { preconditions: Some(guard), ..Default::default() };
                    api.delete(K::NAME, &params).await.map(drop)
                }
            };
            match written {
                Err(e) if is_not_found(&e) => Ok(None),
                written => written.map(|()| Some(answer)),
            }
        },
    )
    .await
}
