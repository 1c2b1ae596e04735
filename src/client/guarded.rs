//! The one way to change an object another writer may change too: read it,
//! decide (pure) what to write, write it guarded by the resourceVersion
//! just read, and on a 409 read again, [`ATTEMPTS`] times at most. Every
//! registration writer (the CRD's conversion, the validating webhook
//! configuration), the webhook's keeper, migrate's prune and
//! `diagnose --fix` go through [`write`]; one that may not be there yet is
//! written with [`create_or_replace`].
//!
//! ```text
//!  read ─► decide ─► Done(value)                      ─► Ok(value)
//!                └─► Write(body) ─► write ─► Ok        ─► Ok(value)
//!                                        └─► 409       ─► read again
//!                                        └─► other     ─► Err(Failed::Write)
//! ```

use std::borrow::Cow;
use std::future::Future;

use crate::error::{FromApi, is_conflict};

/// Reads before giving up when other writers keep winning: enough for a
/// few replicas starting at once, few enough to end a real fight quickly.
pub const ATTEMPTS: usize = 5;

/// What the decision asks for.
#[derive(Debug, Clone, PartialEq)]
pub enum Step<W, T> {
    /// Nothing to write: the result as it stands.
    Done(T),
    /// This, guarded by the resourceVersion it carries (or its caller's
    /// precondition).
    Write(W),
}

/// Why [`write`] ended without a result.
#[derive(Debug)]
pub enum Failed<E> {
    /// The read, or the decision, failed: the caller's error.
    Before(E),
    /// The write failed, other than with a conflict.
    Write(kube::Error),
    /// Every one of [`ATTEMPTS`] writes met a conflict.
    KeptChanging,
}

impl<E: FromApi> Failed<E> {
    /// As the caller's error: its own (from the read or the decision), the
    /// write's as `op` on `kind ns/name` (`ns` empty: cluster-scoped), or,
    /// when others kept writing first, `changed(object, why)`.
    pub fn into_error(
        self,
        op: &'static str,
        kind: impl Into<Cow<'static, str>>,
        ns: &str,
        name: &str,
        changed: impl FnOnce(String, String) -> E,
    ) -> E {
        let kind = kind.into();
        match self {
            Failed::Before(e) => e,
            Failed::Write(e) => E::api(op, kind, ns, name, e),
            Failed::KeptChanging => changed(
                if ns.is_empty() { format!("{kind} {name}") } else { format!("{kind} {ns}/{name}") },
                format!("it changed under each of {ATTEMPTS} writes guarded by the resourceVersion read"),
            ),
        }
    }
}

/// Reads with `read`, asks `decide`, writes with `write`; on a conflict,
/// from the top. `decide` sees a fresh read each time; `read` may read
/// more than the object (what the decision also depends on).
pub async fn write<S, W, T, E, R, RF, D, WR, WF>(
    mut read: R,
    mut decide: D,
    mut write: WR,
) -> Result<T, Failed<E>>
where
    R: FnMut() -> RF,
    RF: Future<Output = Result<S, E>>,
    D: FnMut(S) -> Result<Step<W, T>, E>,
    WR: FnMut(W) -> WF,
    WF: Future<Output = kube::Result<T>>,
{
    for _ in 0..ATTEMPTS {
        let state = read().await.map_err(Failed::Before)?;
        let body = match decide(state).map_err(Failed::Before)? {
            Step::Done(t) => return Ok(t),
            Step::Write(body) => body,
        };
        match write(body).await {
            Ok(t) => return Ok(t),
            Err(e) if is_conflict(&e) => continue,
            Err(e) => return Err(Failed::Write(e)),
        }
    }
    Err(Failed::KeptChanging)
}

/// The write of an object that may not be there yet: a create when it
/// carries no resourceVersion (none was read: two creating at once, one
/// gets a 409), else a replace guarded by it.
pub async fn create_or_replace<K>(api: &kube::Api<K>, name: &str, object: &K) -> kube::Result<K>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + serde::Serialize + std::fmt::Debug,
{
    let params = kube::api::PostParams::default();
    match object.meta().resource_version {
        Some(_) => api.replace(name, &params, object).await,
        None => api.create(&params, object).await,
    }
}

#[cfg(test)]
mod tests {
    use std::cell::Cell;

    use super::*;

    fn status(code: u16) -> kube::Error {
        kube::Error::Api(kube::core::Status::failure("x", "y").with_code(code).boxed())
    }

    fn answers(codes: &[u16]) -> impl FnMut(u32) -> std::future::Ready<kube::Result<&'static str>> + '_ {
        let next = Cell::new(0);
        move |_| {
            let i = next.get();
            next.set(i + 1);
            std::future::ready(match codes.get(i) {
                Some(&c) => Err(status(c)),
                None => Ok("written"),
            })
        }
    }

    #[tokio::test]
    async fn a_conflict_reads_again_and_the_next_write_wins() {
        let reads = Cell::new(0u32);
        let read = || {
            reads.set(reads.get() + 1);
            std::future::ready(Ok(reads.get()))
        };
        let got = write(read, |s| Ok::<_, kube::Error>(Step::Write(s)), answers(&[409, 409])).await;
        assert_eq!(got.unwrap(), "written");
        assert_eq!(reads.get(), 3, "one read per write");
    }

    #[tokio::test]
    async fn nothing_to_write_is_done_after_one_read() {
        let read = || std::future::ready(Ok::<_, kube::Error>(1u32));
        let got = write(read, |_| Ok(Step::<u32, _>::Done("as is")), answers(&[])).await;
        assert_eq!(got.unwrap(), "as is");
    }

    #[tokio::test]
    async fn conflicts_end_after_the_bound_and_other_errors_at_once() {
        let read = || std::future::ready(Ok::<_, kube::Error>(0u32));
        let write_it = |s| Ok(Step::Write(s));
        let got = write(read, write_it, answers(&[409; ATTEMPTS])).await;
        assert!(matches!(got, Err(Failed::KeptChanging)), "{got:?}");
        let got = write(read, write_it, answers(&[403])).await;
        assert!(matches!(got, Err(Failed::Write(_))), "{got:?}");
        let got = write(|| std::future::ready(Err::<u32, _>(status(500))), write_it, answers(&[])).await;
        assert!(matches!(got, Err(Failed::Before(_))), "{got:?}");
    }
}
