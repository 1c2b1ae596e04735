//! The manager's own image, installed with `kubectl runner install
//! --with-manager`, running on the local cluster's real node and serving a
//! Runner whose Pods answer HTTP (tests/cluster/real-node.sh).
//!
//! Every test here is `#[ignore]`d, so `cargo test --all-targets` lists them
//! as ignored instead of passing them: they need a cluster started with
//! `RUNNER_CLUSTER_REAL_NODE=1`, the image from `scripts/image.sh` loaded
//! into that node, and this process inside the cluster's network namespace
//! (ClusterIPs route there only). tests/run.sh does all three and then runs
//! `cargo test --test real_node -- --ignored` when the cluster has the real
//! node. Run that way, a missing real node or image is a failure, never a
//! skip.
//!
//! The test owns the cluster-wide manager while it runs (it reconciles
//! Runners in every namespace), so it runs alone, after the other targets.

#[path = "../support/mod.rs"]
mod support;

mod conversion;
mod e2e;
mod fixture;
mod in_cluster_check;
mod leader;
mod rbac_cut;
mod serving;
mod upgrade;
mod writes;
