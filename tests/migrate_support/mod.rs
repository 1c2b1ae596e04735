//! Fixtures for tests/migrate.rs: the two test CRDs (storage version
//! v1alpha1, then v1beta1), Runners created at v1alpha1, and what etcd
//! holds, read through etcd's JSON gateway on the local control plane.
#![allow(dead_code)]

use std::time::Duration;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Client;
use kube::api::{Api, DeleteParams, DynamicObject, Patch, PatchParams, PostParams};
use kubectl_runner::api::CRD_NAME;
use kubectl_runner::migrate::crd;

use crate::support::{TestNs, wait_for};

/// The CRD is cluster-wide: the tests that change it take turns.
pub static CRD_LOCK: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// The generated Runner CRD with `versions`, each with the generated
/// v1alpha1 schema, `storage` the storage version, and no conversion
/// webhook (the schemas being the same, the apiserver converts by renaming).
pub fn test_crd(versions: &[&str], storage: &str) -> CustomResourceDefinition {
    let mut crd = kubectl_runner::manifests::runner_crd();
    let template =
        crd.spec.versions.iter().find(|v| v.name == "v1alpha1").cloned().expect("a v1alpha1 version");
    crd.spec.versions = versions
        .iter()
        .map(|name| {
            let mut v = template.clone();
            v.name = name.to_string();
            v.served = true;
            v.storage = *name == storage;
            v
        })
        .collect();
    crd.spec.conversion = None;
    crd
}

async fn apply(client: &Client, crd: &CustomResourceDefinition) {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    crds.patch(CRD_NAME, &PatchParams::apply("kubectl-runner-tests").force(), &Patch::Apply(crd))
        .await
        .expect("apply the test CRD");
}

/// Deletes the Runner CRD (and so every Runner) if there is one, then
/// installs the CRD whose only version, v1alpha1, is the storage version.
pub async fn install_old_crd(client: &Client) {
    crate::support::guard::refuse_foreign(client, "delete the Runner CRD (and so every Runner)").await;
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let _ = crds.delete(CRD_NAME, &DeleteParams::default()).await;
    wait_for("the old CRD to be gone", Duration::from_secs(60), || {
        let crds = crds.clone();
        async move { crds.get_opt(CRD_NAME).await.ok().and_then(|c| c.is_none().then_some(())) }
    })
    .await;
    apply(client, &test_crd(&["v1alpha1"], "v1alpha1")).await;
    wait_served(client, "v1alpha1").await;
}

/// Deletes the test CRD (and the test's Runners) and installs the Runner
/// CRD of the code again, as the other test binaries expect it: with a
/// test CRD left behind, storedVersions would still name v1alpha1 and
/// `install` without the manager would refuse.
pub async fn restore_current_crd(client: &Client) {
    crate::support::guard::refuse_foreign(client, "delete the test CRD (and so every Runner)").await;
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let _ = crds.delete(CRD_NAME, &DeleteParams::default()).await;
    wait_for("the test CRD to be gone", Duration::from_secs(60), || {
        let crds = crds.clone();
        async move { crds.get_opt(CRD_NAME).await.ok().and_then(|c| c.is_none().then_some(())) }
    })
    .await;
    crate::support::ensure_crd(client).await;
}

/// Replaces the CRD with one serving v1alpha1 and v1beta1, v1beta1 the
/// storage version, and waits until v1beta1 is served (from then on the
/// apiserver stores at it).
pub async fn upgrade_crd(client: &Client) {
    apply(client, &test_crd(&["v1alpha1", "v1beta1"], "v1beta1")).await;
    wait_served(client, "v1beta1").await;
}

async fn wait_served(client: &Client, version: &str) {
    let api = crd::runners(client, version);
    wait_for(&format!("Runners served at {version}"), Duration::from_secs(60), || {
        let api = api.clone();
        async move { api.list(&Default::default()).await.ok().map(|_| ()) }
    })
    .await;
}

/// Creates the Runner `ns/name` at v1alpha1.
pub async fn create_old(ns: &TestNs, name: &str, replicas: i32) {
    let api: Api<DynamicObject> =
        Api::namespaced_with(ns.client.clone(), &ns.name, &crd::resource("v1alpha1"));
    let object: DynamicObject = serde_json::from_value(serde_json::json!({
        "apiVersion": "lab.cloudlab.training/v1alpha1", "kind": "Runner",
        "metadata": { "name": name }, "spec": { "image": "nginx:1.27", "replicas": replicas },
    }))
    .unwrap();
    api.create(&PostParams::default(), &object).await.unwrap_or_else(|e| panic!("create Runner {name}: {e}"));
}

/// The CRD's `status.storedVersions`.
pub async fn stored_versions(client: &Client) -> Vec<String> {
    let crd = crd::read(client).await.expect("read the CRD");
    crd.status.and_then(|s| s.stored_versions).unwrap_or_default()
}

/// The apiVersion the Runner `ns/name` is stored at in etcd.
pub async fn stored_api_version(ns: &str, name: &str) -> String {
    let key = format!("/registry/lab.cloudlab.training/runners/{ns}/{name}");
    let value = etcd_get(&key).await.unwrap_or_else(|| panic!("{key} in etcd"));
    let object: serde_json::Value = serde_json::from_slice(&value).expect("a Runner is stored as JSON");
    object["apiVersion"].as_str().unwrap_or_default().to_string()
}

/// The local control plane's etcd client port, from the ports.env beside
/// the kubeconfig that tests/cluster/up.sh wrote.
fn etcd_port() -> u16 {
    let kubeconfig = std::env::var("KUBECONFIG").expect("KUBECONFIG from tests/cluster/up.sh");
    let ports = std::path::Path::new(&kubeconfig).with_file_name("ports.env");
    let text = std::fs::read_to_string(&ports).unwrap_or_else(|e| panic!("{}: {e}", ports.display()));
    let line = text.lines().find_map(|l| l.strip_prefix("ETCD_PORT=")).expect("ETCD_PORT in ports.env");
    line.trim().parse().expect("a port number")
}

/// The value of `key`, by a range request to etcd's JSON gateway (plain
/// HTTP on the loopback; blocking std I/O on a worker thread).
async fn etcd_get(key: &str) -> Option<Vec<u8>> {
    use std::io::{Read, Write};
    let body = serde_json::json!({ "key": base64(key.as_bytes()) }).to_string();
    let request = format!(
        "POST /v3/kv/range HTTP/1.0\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    let port = etcd_port();
    let text = tokio::task::spawn_blocking(move || {
        let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
        s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
        s.write_all(request.as_bytes()).ok()?;
        let mut buf = Vec::new();
        s.read_to_end(&mut buf).ok()?;
        Some(String::from_utf8_lossy(&buf).into_owned())
    })
    .await
    .ok()??;
    let (_, json) = text.split_once("\r\n\r\n")?;
    let answer: serde_json::Value = serde_json::from_str(json).ok()?;
    unbase64(answer["kvs"][0]["value"].as_str()?)
}

const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

fn base64(bytes: &[u8]) -> String {
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let b = [chunk[0], *chunk.get(1).unwrap_or(&0), *chunk.get(2).unwrap_or(&0)];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ALPHABET[((n >> (18 - 6 * i)) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

fn unbase64(text: &str) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    let (mut acc, mut bits) = (0u32, 0);
    for c in text.bytes().filter(|c| *c != b'=') {
        acc = (acc << 6) | ALPHABET.iter().position(|a| *a == c)? as u32;
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
            acc &= (1 << bits) - 1;
        }
    }
    Some(out)
}
