//! Installable the way kubectl users install plugins: `scripts/release.sh`
//! builds this platform's archive and renders the krew manifest, and the
//! real krew (built from Go modules by tests/krew/build.sh, cached) installs
//! it into a temporary KREW_ROOT; `kubectl runner --version` then runs the
//! plugin through krew's bin directory. The manifest template also keeps
//! krew's review rules.
//!
//! The archive is built with the dev profile: the release profile (fat LTO)
//! takes ~10 min on 2 cores and packages the same files the same way.

mod nested_cargo;

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Instant;

const REPO: &str = env!("CARGO_MANIFEST_DIR");

/// A temporary directory, removed on drop (also when the test panics).
struct TempDir(PathBuf);

impl TempDir {
    fn new(prefix: &str) -> TempDir {
        let dir = std::env::temp_dir().join(format!("{prefix}-{:08x}", rand::random::<u32>()));
        std::fs::create_dir_all(&dir).expect("create a temporary directory");
        TempDir(dir)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Runs `cmd`, panicking with its output unless it succeeds.
fn run(what: &str, cmd: &mut Command) -> Output {
    let start = Instant::now();
    let out = cmd.stdin(Stdio::null()).output().unwrap_or_else(|e| panic!("{what}: cannot start: {e}"));
    eprintln!("{what}: {:?}", start.elapsed());
    assert!(
        out.status.success(),
        "{what} failed ({}):\n{}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// The last stdout line of a build script that prints a path.
fn built_path(what: &str, script: &str) -> PathBuf {
    let out = run(what, Command::new("bash").arg(format!("{REPO}/{script}")));
    let stdout = String::from_utf8_lossy(&out.stdout);
    PathBuf::from(stdout.lines().last().unwrap_or_default().trim())
}

/// `os_arch` as krew and the archive names spell it.
fn platform() -> String {
    let os = match std::env::consts::OS {
        "macos" => "darwin",
        other => other,
    };
    let arch = match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        other => other,
    };
    format!("{os}_{arch}")
}

fn template() -> serde_yaml::Value {
    let text =
        std::fs::read_to_string(format!("{REPO}/plugins/runner.yaml")).expect("read plugins/runner.yaml");
    serde_yaml::from_str(&text).expect("plugins/runner.yaml is YAML")
}

#[test]
fn the_krew_manifest_template_keeps_krews_review_rules() {
    let spec = &template()["spec"];
    let short = spec["shortDescription"].as_str().expect("shortDescription");
    assert!(short.len() < 50, "shortDescription is {} characters: {short:?}", short.len());
    assert!(!short.contains('\n'), "{short:?}");
    let description = spec["description"].as_str().expect("description");
    for line in description.lines().map(str::trim) {
        let example = line.starts_with("kubectl ") || line.starts_with("$ ") || line.starts_with("# ");
        assert!(!example, "description holds a usage example: {line:?}");
    }
    let platforms = spec["platforms"].as_sequence().expect("platforms");
    assert!(!platforms.is_empty());
    for p in platforms {
        let files: Vec<&str> =
            p["files"].as_sequence().unwrap().iter().filter_map(|f| f["from"].as_str()).collect();
        assert_eq!(files, ["kubectl-runner", "kubectl_complete-runner", "LICENSE"], "{p:?}");
        assert_eq!(p["bin"].as_str(), Some("kubectl-runner"));
    }
}

#[test]
fn the_release_archive_installs_with_krew_and_runs_as_kubectl_runner() {
    let krew = built_path("tests/krew/build.sh", "tests/krew/build.sh");
    let kubectl = built_path("tests/cluster/build.sh", "tests/cluster/build.sh").join("kubectl");
    assert!(krew.is_file() && kubectl.is_file(), "{krew:?} {kubectl:?}");

    let tmp = TempDir::new("kubectl-runner-krew");
    let dist = tmp.0.join("dist");
    run(
        "scripts/release.sh (dev profile)",
        nested_cargo::without_crate_env(&mut Command::new("bash"))
            .arg(format!("{REPO}/scripts/release.sh"))
            .env("RELEASE_PROFILE", "dev")
            .env("RELEASE_REPO", "https://example.invalid/kubectl-runner")
            .env("DIST", &dist),
    );
    let version = format!("v{}", env!("CARGO_PKG_VERSION"));
    let archive = dist.join(format!("kubectl-runner_{version}_{}.tar.gz", platform()));
    let manifest = dist.join("runner.yaml");
    let listing = run("tar tzf", Command::new("tar").arg("tzf").arg(&archive));
    let mut files: Vec<String> = String::from_utf8_lossy(&listing.stdout).lines().map(String::from).collect();
    files.sort();
    assert_eq!(files, ["LICENSE", "kubectl-runner", "kubectl_complete-runner"]);
    let sha = std::fs::read_to_string(
        dist.join(format!("{}.sha256", archive.file_name().unwrap().to_string_lossy())),
    )
    .expect("the .sha256 file");
    let rendered = std::fs::read_to_string(&manifest).expect("dist/runner.yaml");
    assert!(rendered.contains(&format!("sha256: {}", sha.trim())), "{rendered}");
    assert!(!rendered.contains("${"), "placeholders left:\n{rendered}");

    // kubectl finds `kubectl krew` and, once installed, `kubectl runner` on
    // PATH; nothing else of this machine's PATH is visible.
    let tools = tmp.0.join("tools");
    std::fs::create_dir_all(&tools).unwrap();
    std::os::unix::fs::symlink(&kubectl, tools.join("kubectl")).unwrap();
    std::os::unix::fs::symlink(&krew, tools.join("kubectl-krew")).unwrap();
    let krew_root = tmp.0.join("krew");
    let path = format!("{}:{}:/usr/bin:/bin", krew_root.join("bin").display(), tools.display());
    let kubectl_cmd = |args: &[&str]| {
        let mut c = Command::new(tools.join("kubectl"));
        c.args(args).env("PATH", &path).env("KREW_ROOT", &krew_root).env("KREW_NO_UPGRADE_CHECK", "1");
        c
    };
    let manifest_arg = format!("--manifest={}", manifest.display());
    let archive_arg = format!("--archive={}", archive.display());
    run("kubectl krew install", &mut kubectl_cmd(&["krew", "install", &manifest_arg, &archive_arg]));

    let out = run("kubectl runner --version", &mut kubectl_cmd(&["runner", "--version"]));
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        format!("kubectl-runner {}", env!("CARGO_PKG_VERSION"))
    );
    // It ran from krew's bin dir, a link into krew's store, next to the LICENSE.
    let link = std::fs::read_link(krew_root.join("bin/kubectl-runner")).expect("krew links the plugin");
    let store = krew_root.join("store/runner").join(&version);
    assert!(link.starts_with(&store), "{link:?} is not in {store:?}");
    assert!(Path::new(&store.join("LICENSE")).is_file(), "no LICENSE in {store:?}");
    // krew's record of the install (what `krew upgrade` and `uninstall` read).
    let receipt = std::fs::read_to_string(krew_root.join("receipts/runner.yaml")).expect("krew's receipt");
    assert!(receipt.contains(&format!("version: {version}")), "{receipt}");
}
