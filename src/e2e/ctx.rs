//! What every e2e step gets, and how it waits: shared by the lifecycle
//! steps (`steps`) and the webhook step (`webhooks`).

use std::future::Future;
use std::time::Duration;

use kube::Client;

use super::Options;

/// What every step needs.
pub struct Ctx {
    pub client: Client,
    pub ns: String,
    pub opts: Options,
    /// Where it runs: on kind, a missing image names `kind load`.
    pub cluster: super::cluster::Cluster,
}

/// Polls `check` every 250 ms until it yields Some. The caller's timeout
/// bounds it.
pub async fn until<T, F, Fut>(mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    loop {
        if let Some(v) = check().await {
            return v;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}
