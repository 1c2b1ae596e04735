//! Runner writes through the webhooks while the manager's Pods change: a
//! dry-run create of a v1alpha1 Runner goes through conversion and
//! admission, and with `failurePolicy: Fail` any Pod that stops answering
//! while it is still an endpoint of the Service refuses it.

use std::time::{Duration, Instant};

use kube::Client;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

/// Writes one after the other (100 ms apart) until [`Writes::stop`].
pub struct Writes {
    stop: oneshot::Sender<()>,
    task: JoinHandle<(usize, Vec<String>)>,
}

impl Writes {
    pub fn start(client: Client, ns: &str) -> Writes {
        let (stop, mut stopped) = oneshot::channel();
        let ns = ns.to_string();
        let task = tokio::spawn(async move {
            let (started, mut sent, mut failed) = (Instant::now(), 0, Vec::new());
            while stopped.try_recv().is_err() {
                sent += 1;
                let at = started.elapsed().as_secs_f64();
                if let Err(e) = kubectl_runner::client::webhook_probe::dry_run(&client, &ns, "v1alpha1").await
                {
                    failed.push(format!("{at:.1} s in: {e}"));
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            (sent, failed)
        });
        Writes { stop, task }
    }

    /// Stops and asserts that none was refused; prints how many were sent.
    pub async fn stop_and_check(self, during: &str) {
        let _ = self.stop.send(());
        let (sent, failed) = self.task.await.expect("the writer");
        eprintln!("{during}: {sent} dry-run Runner creates, {} refused", failed.len());
        assert!(failed.is_empty(), "Runner writes were refused {during}: {failed:#?}");
    }
}
