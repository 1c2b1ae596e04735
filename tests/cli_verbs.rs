//! kubectl's verb flags on the real local control plane: `get` with
//! `-o jsonpath=`, `-o custom-columns=`, `--sort-by` and `--show-labels`
//! compared byte for byte with what kubectl itself prints for the same
//! Runners; `delete` and `scale` with `--all`, `-l` and their own flags.
//! Each test has its own temporary namespace.

mod support;

use std::process::{Command, Output, Stdio};

use kube::api::PostParams;
use kubectl_runner::api::{Runner, RunnerSpec};
use kubectl_runner::cli::create;
use support::{TestNs, cli, ensure_crd, err, ok, out};

/// The kubectl built with the local control plane (the build is cached).
fn kubectl() -> std::path::PathBuf {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/cluster/build.sh");
    let o =
        Command::new("bash").arg(script).env("RUNNER_CLUSTER_REAL_NODE", "0").output().expect("run build.sh");
    assert!(o.status.success(), "tests/cluster/build.sh failed: {}", err(&o));
    std::path::PathBuf::from(out(&o).lines().last().unwrap_or_default().trim()).join("kubectl")
}

/// Creates a Runner with these labels, replicas and host.
async fn make(
    ns: &TestNs,
    name: &str,
    image: &str,
    replicas: i32,
    host: Option<&str>,
    labels: &[(&str, &str)],
) {
    let mut spec = RunnerSpec::new(image).replicas(replicas);
    spec.expose.hosts = host.map(String::from).into_iter().collect();
    let mut r = create::from_flags(name, &ns.name, spec).unwrap();
    r.metadata.labels = Some(labels.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect());
    ns.api::<Runner>().create(&PostParams::default(), &r).await.expect("create Runner");
}

async fn names(ns: &TestNs) -> Vec<String> {
    let list = ns.api::<Runner>().list(&Default::default()).await.expect("list Runners");
    list.items.into_iter().filter_map(|r| r.metadata.name).collect()
}

async fn replicas(ns: &TestNs, name: &str) -> i32 {
    ns.api::<Runner>().get(name).await.expect("get Runner").spec.replicas
}

#[tokio::test]
async fn get_templates_columns_and_sorting_print_the_same_bytes_as_kubectl() {
    let ns = TestNs::new("verbs-get").await;
    ensure_crd(&ns.client).await;
    // Created out of name order; some without a label, one with a host.
    make(&ns, "web", "nginx:1.27", 2, None, &[("team", "web"), ("tier", "front")]).await;
    make(&ns, "api", "ghcr.io/x/api:2", 3, Some("api.example.com"), &[("team", "api")]).await;
    make(&ns, "batch", "busybox:1.36", 1, None, &[]).await;
    make(&ns, "cron", "busybox:1.37", 2, None, &[]).await;
    let dir = std::env::temp_dir().join(format!("{}-templates", ns.name));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("names.jsonpath");
    std::fs::write(&file, "{range .items[*]}{.metadata.name}{' '}{end}\n").unwrap();
    let jsonpath_file = format!("jsonpath-file={}", file.display());
    let cases: Vec<Vec<&str>> = vec![
        vec!["-o", "jsonpath={@}"],
        vec!["-o", "jsonpath={.items[*].metadata.name}"],
        vec!["-o", r#"jsonpath={range .items[*]}{.metadata.name}{"\t"}{.spec.replicas}{"\n"}{end}"#],
        vec!["-o", "jsonpath={.items[?(@.spec.replicas>1)].metadata.name}"],
        vec!["-o", r#"jsonpath={.items[?(@.metadata.labels.team=="web")].spec}"#],
        vec!["-o", "jsonpath=kind {.kind}: {.items[*].metadata.labels} {.items[-1:].spec.image}"],
        vec!["-o", "jsonpath={.items[*].metadata.managedFields[0].manager}"],
        vec!["-o", &jsonpath_file],
        vec![
            "-o",
            "custom-columns=NAME:.metadata.name,IMAGE:.spec.image,HOSTS:.spec.expose.hosts,LABELS:.metadata.labels",
        ],
        vec!["-o", "custom-columns=N:{.metadata.name},R:spec.replicas", "--sort-by=.spec.replicas"],
        vec!["-o", "name", "--sort-by={.spec.image}"],
        vec!["-o", "jsonpath={.items[*].metadata.name}", "--sort-by=.metadata.labels.team"],
        vec!["-o", "custom-columns=NAME:.metadata.name", "--sort-by=.metadata.creationTimestamp"],
        vec!["-l", "team", "-o", "jsonpath={.items[*].metadata.name}"],
        vec!["web", "-o", "jsonpath={@}"],
        vec!["web", "-o", "custom-columns=NAME:.metadata.name,TEAM:.metadata.labels.team"],
        vec!["-o", "jsonpath={.items[9].metadata.name}"],
    ];
    let kubectl = kubectl();
    for args in &cases {
        let theirs = Command::new(&kubectl)
            .args(["get", "runners.lab.cloudlab.training", "-n", &ns.name])
            .args(args)
            .output()
            .expect("run kubectl");
        let ours = cli(&[&["-n", &ns.name, "get"], &args[..]].concat()).await;
        // Only the out-of-range index fails, for both.
        assert_eq!(theirs.status.success(), !args[1].contains("[9]"), "kubectl {args:?}: {}", err(&theirs));
        assert_eq!(ours.status.code(), theirs.status.code(), "{args:?}: {}", err(&ours));
        assert_eq!(out(&ours), out(&theirs), "{args:?}");
    }
    // The tables differ in columns (kubectl shows the CRD's); the labels and
    // names they print must not.
    let first_and_last = |o: &Output| -> Vec<(String, String)> {
        let text = out(o);
        let cols = |l: &str| l.split_whitespace().map(String::from).collect::<Vec<_>>();
        text.lines().map(|l| (cols(l)[0].clone(), cols(l).last().cloned().unwrap_or_default())).collect()
    };
    let theirs = Command::new(&kubectl)
        .args(["get", "runners.lab.cloudlab.training", "-n", &ns.name, "--show-labels"])
        .output()
        .expect("run kubectl");
    let ours = cli(&["-n", &ns.name, "get", "--show-labels"]).await;
    ok(&ours, "get --show-labels");
    assert_eq!(first_and_last(&ours), first_and_last(&theirs));
    assert!(out(&ours).contains("team=web,tier=front"), "{}", out(&ours));
    std::fs::remove_dir_all(dir).unwrap();
}

#[tokio::test]
async fn sorting_many_runners_with_ties_gives_kubectls_order() {
    let ns = TestNs::new("verbs-sort").await;
    ensure_crd(&ns.client).await;
    // Past 12 objects Go's sort is a quicksort that is not stable: only
    // the same algorithm puts tied Runners where kubectl does.
    for i in 0..40 {
        let (image, team) = (format!("img-{}:1", i % 3), format!("t{}", i % 4));
        let labels: &[(&str, &str)] = if i % 5 == 0 { &[] } else { &[("team", &team)] };
        make(&ns, &format!("r{:02}", (i * 7) % 40), &image, 1 + i % 3, None, labels).await;
    }
    let kubectl = kubectl();
    for sort_by in ["--sort-by=.spec.replicas", "--sort-by=.metadata.labels.team", "--sort-by={.spec.image}"]
    {
        let theirs = Command::new(&kubectl)
            .args(["get", "runners.lab.cloudlab.training", "-n", &ns.name, "-o", "name", sort_by])
            .output()
            .expect("run kubectl");
        ok(&theirs, "kubectl get --sort-by");
        let ours = cli(&["-n", &ns.name, "get", "-o", "name", sort_by]).await;
        ok(&ours, "get --sort-by");
        assert_eq!(out(&ours), out(&theirs), "{sort_by}");
        assert_eq!(out(&ours).lines().count(), 40);
    }
}

#[tokio::test]
async fn bad_templates_and_flag_mixes_are_usage_errors_naming_the_flag() {
    let ns = TestNs::new("verbs-usage").await;
    ensure_crd(&ns.client).await;
    make(&ns, "web", "nginx:1.27", 1, None, &[]).await;
    for (args, needle) in [
        (vec!["get", "-o", "jsonpath={.items["], "--output"),
        (vec!["get", "-o", "custom-columns=NAME"], "--output"),
        (vec!["get", "--sort-by={}"], "--sort-by"),
        (vec!["get", "-o", "name", "--show-labels"], "--show-labels"),
        (vec!["delete", "web", "--all"], "only one of NAME, -l SELECTOR and --all"),
        (vec!["delete"], "NAME, -l SELECTOR or --all"),
        (vec!["scale", "web", "-l", "a=b", "--replicas", "2"], "only one of"),
        (vec!["scale", "--all", "--replicas", "2", "--current-replicas=-2"], "--current-replicas"),
    ] {
        let o = cli(&[&["-n", &ns.name][..], &args].concat()).await;
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", err(&o));
        assert!(err(&o).contains(needle), "{args:?}: {}", err(&o));
    }
    assert_eq!(names(&ns).await, vec!["web"]);
    assert_eq!(replicas(&ns, "web").await, 1);
}

#[tokio::test]
async fn delete_by_selector_and_all_deletes_exactly_what_they_select() {
    let ns = TestNs::new("verbs-delete").await;
    ensure_crd(&ns.client).await;
    make(&ns, "a", "nginx:1.27", 1, None, &[("team", "x")]).await;
    make(&ns, "b", "nginx:1.27", 1, None, &[("team", "y")]).await;
    make(&ns, "c", "nginx:1.27", 1, None, &[]).await;
    let o = cli(&["-n", &ns.name, "delete", "-l", "team=x"]).await;
    ok(&o, "delete -l team=x");
    assert_eq!(out(&o), "runner.lab.cloudlab.training/a deleted\n");
    assert_eq!(names(&ns).await, vec!["b", "c"]);
    let none = cli(&["-n", &ns.name, "delete", "-l", "team=x"]).await;
    ok(&none, "delete -l matching nothing");
    assert!(err(&none).contains("No Runners found"), "{}", err(&none));
    let o = cli(&["-n", &ns.name, "delete", "--all"]).await;
    ok(&o, "delete --all");
    assert_eq!(out(&o), "runner.lab.cloudlab.training/b deleted\nrunner.lab.cloudlab.training/c deleted\n");
    assert!(names(&ns).await.is_empty());
}

/// `delete -i NAME` on a terminal that `script` (util-linux) provides,
/// with `answer` typed into it.
fn delete_interactively(ns: &str, name: &str, answer: &[u8]) -> Output {
    use std::io::Write;
    let cmd = format!("{} -n {ns} delete -i {name}", env!("CARGO_BIN_EXE_kubectl-runner"));
    let mut child = Command::new("script")
        .args(["-qec", &cmd, "/dev/null"])
        .env("NO_COLOR", "1")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("run script (util-linux)");
    child.stdin.take().expect("script's stdin").write_all(answer).expect("type the answer");
    child.wait_with_output().expect("wait for script")
}

#[tokio::test]
async fn delete_interactive_asks_on_a_terminal_and_refuses_without_one() {
    let ns = TestNs::new("verbs-interactive").await;
    ensure_crd(&ns.client).await;
    make(&ns, "web", "nginx:1.27", 1, None, &[]).await;
    let o = cli(&["-n", &ns.name, "delete", "-i", "web"]).await;
    assert_eq!(o.status.code(), Some(2), "{}", err(&o));
    assert!(err(&o).contains("--interactive") && err(&o).contains("not one"), "{}", err(&o));
    assert_eq!(names(&ns).await, vec!["web"]);
    let no = tokio::task::spawn_blocking({
        let ns = ns.name.clone();
        move || delete_interactively(&ns, "web", b"n")
    })
    .await
    .unwrap();
    ok(&no, "delete -i answered n");
    assert!(out(&no).contains("runner.lab.cloudlab.training/web\r\n"), "{}", out(&no));
    assert!(out(&no).contains("deletion is cancelled"), "{}", out(&no));
    assert_eq!(names(&ns).await, vec!["web"]);
    let yes = tokio::task::spawn_blocking({
        let ns = ns.name.clone();
        move || delete_interactively(&ns, "web", b"y")
    })
    .await
    .unwrap();
    ok(&yes, "delete -i answered y");
    assert!(out(&yes).contains("runner.lab.cloudlab.training/web deleted"), "{}", out(&yes));
    assert!(names(&ns).await.is_empty());
}

#[tokio::test]
async fn scale_with_current_replicas_scales_only_from_that_count_and_by_selector() {
    let ns = TestNs::new("verbs-scale").await;
    ensure_crd(&ns.client).await;
    make(&ns, "web", "nginx:1.27", 1, None, &[("team", "x")]).await;
    make(&ns, "api", "nginx:1.27", 1, None, &[]).await;
    let refused = cli(&["-n", &ns.name, "scale", "web", "--replicas", "3", "--current-replicas", "2"]).await;
    assert_eq!(refused.status.code(), Some(1), "{}", err(&refused));
    assert!(err(&refused).contains("has 1 replicas, not 2"), "{}", err(&refused));
    assert_eq!(replicas(&ns, "web").await, 1);
    let o = cli(&["-n", &ns.name, "scale", "web", "--replicas", "3", "--current-replicas", "1"]).await;
    ok(&o, "scale --current-replicas 1");
    assert_eq!(replicas(&ns, "web").await, 3);
    let o = cli(&["-n", &ns.name, "scale", "-l", "team=x", "--replicas", "2", "-o", "name"]).await;
    ok(&o, "scale -l team=x");
    assert_eq!(out(&o), "runner.lab.cloudlab.training/web\n");
    assert_eq!((replicas(&ns, "web").await, replicas(&ns, "api").await), (2, 1));
    let o = cli(&["-n", &ns.name, "scale", "--all", "--replicas", "3", "--current-replicas", "1"]).await;
    assert_eq!(o.status.code(), Some(1), "the first Runner (api) matches, the second (web) does not");
    assert_eq!(out(&o), "runner.lab.cloudlab.training/api scaled\n");
    assert_eq!((replicas(&ns, "web").await, replicas(&ns, "api").await), (2, 3));
}
