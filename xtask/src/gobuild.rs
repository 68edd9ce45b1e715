//! Builds kube-apiserver and etcd from their Go modules with the machine's Go, once per
//! machine, into `<cache>/bin`.
//!
//! A small Go module of ours requires `k8s.io/kubernetes` and the etcd server at the pinned
//! versions; `k8s.io/kubernetes` refers to its staging modules (`k8s.io/api`, ...) through
//! `replace` directives pointing into its own tree, which Go ignores in a dependency, so our
//! module repeats each of them with the matching `v0.Y.Z` release. The list of staging
//! modules is read from Kubernetes' own go.mod, so a version bump needs no code change.
//! A stamp file records what the binaries were built from; a build happens only when it
//! differs.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use anyhow::{Context, Result, bail};
use testenv::versions;

/// Paths of the built binaries.
#[derive(Debug, Clone)]
pub struct Binaries {
    pub kube_apiserver: PathBuf,
    pub etcd: PathBuf,
}

/// Bumped when the way we build changes (flags), so old binaries are rebuilt.
const RECIPE: u32 = 1;

fn stamp_text(go_version: &str) -> String {
    format!(
        "recipe={RECIPE}\nkubernetes={}\netcd={}\ngo={go_version}\n",
        versions::KUBERNETES,
        versions::ETCD
    )
}

pub fn bin_dir() -> PathBuf {
    testenv::cache_dir().join("bin")
}

/// Returns the binaries, building them first if they are missing or were built from other
/// versions.
pub fn ensure_binaries() -> Result<Binaries> {
    let bin = bin_dir();
    let binaries = Binaries {
        kube_apiserver: bin.join("kube-apiserver"),
        etcd: bin.join("etcd"),
    };
    let go_version = go_version()?;
    let stamp_path = bin.join("VERSIONS");
    let wanted = stamp_text(&go_version);
    let current = std::fs::read_to_string(&stamp_path).unwrap_or_default();
    if current == wanted && binaries.kube_apiserver.is_file() && binaries.etcd.is_file() {
        return Ok(binaries);
    }
    eprintln!(
        "xtask: building kube-apiserver {} and etcd {} with {go_version} (once per machine; ~10 min on 2 cores)",
        versions::KUBERNETES,
        versions::ETCD
    );
    let started = Instant::now();
    std::fs::create_dir_all(&bin)?;
    let module = prepare_module(
        "gobuild",
        &[
            versions::ETCD_MODULE,
            "k8s.io/kubernetes/cmd/kube-apiserver",
        ],
        &[(versions::ETCD_MODULE, versions::ETCD)],
    )?;
    // Build to temporary names, then rename: an interrupted build never leaves a binary
    // that looks complete.
    let ldflags = version_ldflags();
    let tmp_api = bin.join("kube-apiserver.partial");
    go(
        &module,
        &["build", "-ldflags", &ldflags, "-o"],
        Some(&tmp_api),
        "k8s.io/kubernetes/cmd/kube-apiserver",
    )?;
    let tmp_etcd = bin.join("etcd.partial");
    go(
        &module,
        &["build", "-o"],
        Some(&tmp_etcd),
        versions::ETCD_MODULE,
    )?;
    std::fs::rename(&tmp_api, &binaries.kube_apiserver)?;
    std::fs::rename(&tmp_etcd, &binaries.etcd)?;
    std::fs::write(&stamp_path, wanted)?;
    eprintln!(
        "xtask: built kube-apiserver and etcd in {:.0?}",
        started.elapsed()
    );
    Ok(binaries)
}

/// The Go version, from `go env GOVERSION`. A failure is retried once after a pause (it was
/// seen once in CI, then never again by hand) and reported with the exit status and what
/// `go` printed, so that a second occurrence says why.
pub fn go_version() -> Result<String> {
    let run = || {
        Command::new("go")
            .arg("env")
            .arg("GOVERSION")
            .output()
            .context("Go is needed to build the test control plane; install it (see .ci/run)")
    };
    let mut out = run()?;
    if !out.status.success() {
        eprintln!(
            "xtask: `go env GOVERSION` failed ({}; stderr: {:?}; cwd {:?}); retrying in 2 s",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim(),
            std::env::current_dir().ok()
        );
        std::thread::sleep(std::time::Duration::from_secs(2));
        out = run()?;
    }
    if !out.status.success() {
        bail!(
            "`go env GOVERSION` failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// `-X` flags so `kube-apiserver --version` and `/version` report the real release (without
/// them a plain `go build` reports v0.0.0-master).
pub fn version_ldflags() -> String {
    let version = versions::KUBERNETES;
    let mut parts = version.trim_start_matches('v').split('.');
    let major = parts.next().unwrap_or("1");
    let minor = parts.next().unwrap_or("0");
    let mut flags = String::from("-s -w");
    for package in [
        "k8s.io/component-base/version",
        "k8s.io/client-go/pkg/version",
    ] {
        let _ = write!(
            flags,
            " -X {package}.gitVersion={version} -X {package}.gitMajor={major} -X {package}.gitMinor={minor} -X {package}.gitTreeState=clean"
        );
    }
    flags
}

/// Writes one of our Go modules (go.mod with requires and replaces, tools.go importing
/// `packages`) into `<cache>/<dir_name>` and tidies it. It requires `k8s.io/kubernetes` and
/// `extra_requires`, and replaces every Kubernetes staging module with its release.
pub fn prepare_module(
    dir_name: &str,
    packages: &[&str],
    extra_requires: &[(&str, &str)],
) -> Result<PathBuf> {
    let dir = testenv::cache_dir().join(dir_name);
    std::fs::create_dir_all(&dir)?;
    let kubernetes_gomod = download_gomod(versions::KUBERNETES_MODULE, versions::KUBERNETES)?;
    let staging = staging_modules(&kubernetes_gomod)?;
    if staging.is_empty() {
        bail!("no staging replace directives found in k8s.io/kubernetes' go.mod");
    }
    let mut gomod = String::from(
        "// Generated by `cargo xtask`: builds the test environment's binaries.\nmodule karpenter-capi/testbins\n\ngo 1.25.0\n\nrequire (\n",
    );
    let _ = writeln!(
        gomod,
        "\t{} {}",
        versions::KUBERNETES_MODULE,
        versions::KUBERNETES
    );
    for (module, version) in extra_requires {
        let _ = writeln!(gomod, "\t{module} {version}");
    }
    gomod.push_str(")\n\nreplace (\n");
    for module in &staging {
        let _ = writeln!(
            gomod,
            "\t{module} => {module} {}",
            versions::KUBERNETES_STAGING
        );
    }
    gomod.push_str(")\n");
    let mut tools = String::from("//go:build tools\n\npackage tools\n\nimport (\n");
    for package in packages {
        let _ = writeln!(tools, "\t_ \"{package}\"");
    }
    tools.push_str(")\n");
    let gomod_path = dir.join("go.mod");
    // Keep go.sum and the tidied go.mod when the inputs did not change.
    let inputs = format!("{gomod}\n{tools}");
    let inputs_path = dir.join("go.mod.in");
    if std::fs::read_to_string(&inputs_path).ok().as_deref() != Some(inputs.as_str())
        || !gomod_path.is_file()
    {
        std::fs::write(&gomod_path, &gomod)?;
        let _ = std::fs::remove_file(dir.join("go.sum"));
        std::fs::write(dir.join("tools.go"), &tools)?;
        go(&dir, &["mod", "tidy"], None, "")?;
        std::fs::write(&inputs_path, &inputs)?;
    }
    Ok(dir)
}

/// The staging module paths from the `replace` block of Kubernetes' go.mod
/// (`k8s.io/api => ./staging/src/k8s.io/api`).
pub fn staging_modules(gomod: &str) -> Result<Vec<String>> {
    let mut modules: Vec<String> = gomod
        .lines()
        .filter_map(|line| {
            let line = line.trim().trim_start_matches("replace").trim();
            let (from, to) = line.split_once("=>")?;
            let to = to.trim();
            to.starts_with("./staging/")
                .then(|| from.split_whitespace().next().unwrap_or("").to_string())
        })
        .filter(|m| !m.is_empty())
        .collect();
    modules.sort();
    modules.dedup();
    Ok(modules)
}

fn download_gomod(module: &str, version: &str) -> Result<String> {
    let spec = format!("{module}@{version}");
    let out = Command::new("go")
        .args(["mod", "download", "-json", &spec])
        .current_dir(std::env::temp_dir())
        .env("GOTOOLCHAIN", "local")
        .output()
        .with_context(|| format!("running go mod download {spec}"))?;
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).with_context(|| {
        format!(
            "go mod download {spec}: {}",
            String::from_utf8_lossy(&out.stderr)
        )
    })?;
    if let Some(error) = json.get("Error").and_then(|e| e.as_str()) {
        bail!("go mod download {spec}: {error}");
    }
    let path = json
        .get("GoMod")
        .and_then(|p| p.as_str())
        .with_context(|| format!("go mod download {spec}: no GoMod in {json}"))?;
    Ok(std::fs::read_to_string(path)?)
}

pub fn go(dir: &Path, args: &[&str], output: Option<&Path>, package: &str) -> Result<()> {
    let mut command = Command::new("go");
    command.args(args);
    if let Some(output) = output {
        command.arg(output);
    }
    if !package.is_empty() {
        command.arg(package);
    }
    command
        .current_dir(dir)
        .env("GOTOOLCHAIN", "local")
        .env("GOFLAGS", "-buildvcs=false");
    eprintln!(
        "xtask: go {} {} {package}",
        args.join(" "),
        output.map(|o| o.display().to_string()).unwrap_or_default()
    );
    let status = command
        .status()
        .with_context(|| format!("running go {}", args.join(" ")))?;
    if !status.success() {
        bail!("go {} {package} failed ({status})", args.join(" "));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_staging_modules_from_kubernetes_gomod() {
        let gomod = "module k8s.io/kubernetes\n\nreplace (\n\tk8s.io/api => ./staging/src/k8s.io/api\n\tk8s.io/apiserver => ./staging/src/k8s.io/apiserver\n\tgithub.com/x/y => github.com/x/y v1.0.0\n)\nreplace k8s.io/kms => ./staging/src/k8s.io/kms\n";
        let modules = staging_modules(gomod).expect("parse");
        assert_eq!(modules, ["k8s.io/api", "k8s.io/apiserver", "k8s.io/kms"]);
    }

    #[test]
    fn version_flags_name_the_release() {
        let flags = version_ldflags();
        assert!(flags.contains(&format!("gitVersion={}", versions::KUBERNETES)));
    }
}
