//! The `kubectl-runner` binary without a cluster: usage errors exit 2
//! before any connection, help has examples, exit codes are documented,
//! manifests and completion print, `--dry-run=client` sends nothing.
//!
//! KUBECONFIG points at a file that does not exist, so anything that tried
//! to connect would fail with exit 1, not 2.

use std::process::{Command, Output};

fn run(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_kubectl-runner"))
        .args(args)
        .env("KUBECONFIG", "/nonexistent/kubeconfig")
        .env("NO_COLOR", "1")
        .output()
        .expect("run kubectl-runner")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn four_replicas_exit_2_naming_the_field_and_the_range_before_connecting() {
    let o = run(&["create", "web", "--image", "nginx", "--replicas", "4"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("spec.replicas: 4 is out of range; allowed 1..=3"), "{}", stderr(&o));
    assert!(stdout(&o).is_empty());
}

#[test]
fn scaling_to_zero_exits_2() {
    let o = run(&["scale", "web", "--replicas", "0"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("allowed 1..=3"), "{}", stderr(&o));
}

#[test]
fn a_bad_port_host_or_name_exits_2() {
    for args in [
        &["create", "web", "--image", "nginx", "--port", "70000"][..],
        &["create", "web", "--image", "nginx", "--host", "Not_A_Host"],
        &["create", "Web", "--image", "nginx"],
        &["delete", "web_1"],
    ] {
        let o = run(args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
    }
}

#[test]
fn unknown_flags_missing_arguments_and_bad_formats_exit_2() {
    for args in [
        &["create", "web"][..],
        &["get", "-o", "xml"],
        &["delete"],
        &["scale", "web"],
        &["create", "web", "--image", "x", "--timeout", "soon"],
        &["nonsense"],
        &["install", "--with-manager"],
    ] {
        let o = run(args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
    }
}

#[test]
fn a_command_that_needs_a_cluster_exits_1_when_there_is_none() {
    let o = run(&["get"]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(stderr(&o).starts_with("error: "), "{}", stderr(&o));
    assert_eq!(stderr(&o).lines().count(), 1, "one readable line: {}", stderr(&o));
}

#[test]
fn top_level_help_documents_the_exit_codes() {
    let o = run(&["--help"]);
    assert_eq!(o.status.code(), Some(0));
    let h = stdout(&o);
    for want in ["Exit codes:", "2  usage error", "create", "uninstall", "completion"] {
        assert!(h.contains(want), "missing {want:?} in\n{h}");
    }
}

#[test]
fn every_subcommand_help_has_examples_prefixed_kubectl_runner() {
    for sub in
        ["create", "scale", "get", "describe", "delete", "install", "uninstall", "manifests", "completion"]
    {
        let o = run(&[sub, "--help"]);
        assert_eq!(o.status.code(), Some(0), "{sub}");
        let h = stdout(&o);
        assert!(h.contains("Examples:"), "{sub} help has no examples:\n{h}");
        let example = format!("kubectl runner {sub}");
        let example_alt = format!("kubectl-runner {sub}");
        assert!(h.contains(&example) || h.contains(&example_alt), "{sub} examples:\n{h}");
    }
}

#[test]
fn create_dry_run_client_prints_the_runner_and_needs_no_cluster() {
    let o =
        run(&["create", "web", "--image", "nginx:1.27", "--replicas", "2", "--dry-run=client", "-o", "json"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).expect("-o json parses");
    assert_eq!(v["kind"], "Runner");
    assert_eq!(v["spec"]["replicas"], 2);
}

#[test]
fn create_takes_several_hosts_and_names_the_bad_one() {
    let base = ["create", "web", "--image", "nginx:1.27", "--dry-run=client", "-o", "json"];
    let o = run(&[&base[..], &["--host", "a.example.com", "--host", "b.example.com,c.example.com"]].concat());
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).expect("-o json parses");
    assert_eq!(v["apiVersion"], "lab.cloudlab.training/v1beta1");
    assert_eq!(
        v["spec"]["expose"]["hosts"],
        serde_json::json!(["a.example.com", "b.example.com", "c.example.com"])
    );
    let o = run(&[&base[..], &["--host", "a.example.com,10.0.0.1"]].concat());
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("spec.expose.hosts[1]: \"10.0.0.1\" must be a DNS name"), "{}", stderr(&o));
    let o = run(&[&base[..], &["--host", "a.example.com,a.example.com"]].concat());
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("is listed twice"), "{}", stderr(&o));
}

#[test]
fn create_from_a_file_validates_every_document() {
    let dir = std::env::temp_dir().join(format!("cli-offline-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("bad.yaml");
    std::fs::write(
        &file,
        "apiVersion: lab.cloudlab.training/v1beta1\nkind: Runner\nmetadata: {name: ok}\nspec: {image: nginx}\n---\n\
         apiVersion: lab.cloudlab.training/v1beta1\nkind: Runner\nmetadata: {name: bad}\nspec: {image: nginx, replicas: 9}\n",
    )
    .unwrap();
    let o = run(&["create", "-f", file.to_str().unwrap(), "--dry-run=client"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("document 2") && stderr(&o).contains("spec.replicas"), "{}", stderr(&o));
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn manifests_print_parseable_yaml_for_each_part() {
    for (part, kind) in
        [("crd", "CustomResourceDefinition"), ("rbac", "ClusterRole"), ("manager", "Deployment")]
    {
        let o = run(&["manifests", part, "--image", "img:1"]);
        assert_eq!(o.status.code(), Some(0), "{part}");
        let docs: Vec<serde_yaml::Value> = serde_yaml::Deserializer::from_str(&stdout(&o))
            .map(|d| serde::Deserialize::deserialize(d).unwrap())
            .collect();
        assert!(docs.iter().any(|d| d["kind"] == kind), "{part} lacks {kind}");
    }
}

#[test]
fn completion_scripts_are_generated_for_bash_zsh_and_fish() {
    for shell in ["bash", "zsh", "fish"] {
        let o = run(&["completion", shell]);
        assert_eq!(o.status.code(), Some(0), "{shell}");
        assert!(stdout(&o).contains("kubectl-runner"), "{shell}");
    }
}

#[test]
fn kubectls_plugin_completion_protocol_gets_subcommands_and_a_directive() {
    let o = run(&["__complete", "sc"]);
    assert_eq!(o.status.code(), Some(0));
    assert!(stdout(&o).starts_with("scale\t"), "{}", stdout(&o));
    assert!(stdout(&o).ends_with(":4\n"), "{}", stdout(&o));
    let o = Command::new(env!("CARGO_BIN_EXE_kubectl_complete-runner"))
        .args(["get", "-o", "ya"])
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&o.stdout), "yaml\n:4\n");
}

#[test]
fn a_closed_stdout_pipe_is_not_an_error() {
    use std::io::Read;
    use std::process::Stdio;
    let mut child = Command::new(env!("CARGO_BIN_EXE_kubectl-runner"))
        .args(["manifests", "all"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let status = child.wait().unwrap();
    let mut err = String::new();
    child.stderr.take().unwrap().read_to_string(&mut err).unwrap();
    assert_eq!(status.code(), Some(0), "{err}");
}
