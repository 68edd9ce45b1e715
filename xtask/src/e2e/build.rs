//! Builds the end-to-end environment's Go binaries, once per machine, into `<cache>/bin`
//! next to kube-apiserver and etcd:
//!
//! - `kube-scheduler`, `kube-controller-manager`, `kubectl`: from `k8s.io/kubernetes` at the pinned
//!   release, in a Go module of ours with the same staging `replace`s as kube-apiserver
//!   ([`gobuild::prepare_module`], directory `<cache>/gobuild-e2e`). Go's build cache shares
//!   the packages they have in common with kube-apiserver. kubectl is there so that the
//!   guides' commands (`tests/e2e/tests/guides.rs`) run with a client of the server's version,
//!   whatever kubectl the machine has.
//! - `capi-manager`: the Cluster API core manager, `go install sigs.k8s.io/cluster-api@<pin>`
//!   (its `main` package is the module root; the module has no `replace` directives, so
//!   `go install pkg@version` builds it with exactly upstream's dependency versions).
//! - `kwok`: `go install sigs.k8s.io/kwok/cmd/kwok@<pin>`.
//!
//! Each binary has its own stamp file (`<name>.stamp`: recipe, versions, Go version) and is
//! rebuilt only when the stamp differs; builds go to `<name>.partial` (or a scratch GOBIN) and
//! are renamed into place, so an interrupted build never leaves a binary that looks complete.
//! A lock file serialises concurrent builds from several worktrees.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use anyhow::{Context, Result, bail};
use testenv::versions;

use crate::gobuild;

/// Bumped when the way we build changes.
const RECIPE: u32 = 1;

/// Paths of the e2e binaries.
#[derive(Debug, Clone)]
pub struct E2eBinaries {
    pub kube_scheduler: PathBuf,
    pub kube_controller_manager: PathBuf,
    pub kubectl: PathBuf,
    pub capi_manager: PathBuf,
    pub kwok: PathBuf,
}

/// One build, with what it took (printed; the cold times are in docs/e2e.md).
#[derive(Debug)]
struct Built {
    name: &'static str,
    seconds: f64,
}

/// Returns the binaries, building the ones whose stamp is missing or stale.
pub fn ensure_e2e_binaries() -> Result<E2eBinaries> {
    let bin = gobuild::bin_dir();
    std::fs::create_dir_all(&bin)?;
    let binaries = E2eBinaries {
        kube_scheduler: bin.join("kube-scheduler"),
        kube_controller_manager: bin.join("kube-controller-manager"),
        kubectl: bin.join("kubectl"),
        capi_manager: bin.join("capi-manager"),
        kwok: bin.join("kwok"),
    };
    let go_version = gobuild::go_version()?;
    let k8s = format!("kubernetes={}", versions::KUBERNETES);
    let capi = format!("cluster-api={}", versions::CLUSTER_API.1);
    let kwok = format!("kwok={}", versions::KWOK.1);
    let wanted = |what: &str| format!("recipe={RECIPE}\n{what}\ngo={go_version}\n");
    let stale = |path: &Path, what: &str| {
        !path.is_file()
            || std::fs::read_to_string(stamp_path(path)).unwrap_or_default() != wanted(what)
    };
    let todo = [
        stale(&binaries.kube_scheduler, &k8s),
        stale(&binaries.kube_controller_manager, &k8s),
        stale(&binaries.kubectl, &k8s),
        stale(&binaries.capi_manager, &capi),
        stale(&binaries.kwok, &kwok),
    ];
    if !todo.iter().any(|t| *t) {
        return Ok(binaries);
    }
    // One builder at a time per machine; the others wait and then find fresh stamps.
    let lock = File::create(bin.join(".e2e-build.lock"))?;
    eprintln!("xtask: waiting for the e2e build lock");
    lock.lock().context("locking the e2e build")?;
    let mut built = Vec::new();
    if stale(&binaries.capi_manager, &capi) {
        let (module, version) = versions::CLUSTER_API;
        let ldflags = format!("-s -w -X {module}/version.gitVersion={version}");
        let started = Instant::now();
        go_install(
            &bin,
            &format!("{module}@{version}"),
            &ldflags,
            "cluster-api",
            &binaries.capi_manager,
            &wanted(&capi),
        )?;
        built.push(Built {
            name: "capi-manager",
            seconds: started.elapsed().as_secs_f64(),
        });
    }
    if stale(&binaries.kwok, &kwok) {
        let (module, version) = versions::KWOK;
        let started = Instant::now();
        go_install(
            &bin,
            &format!("{module}/cmd/kwok@{version}"),
            "-s -w",
            "kwok",
            &binaries.kwok,
            &wanted(&kwok),
        )?;
        built.push(Built {
            name: "kwok",
            seconds: started.elapsed().as_secs_f64(),
        });
    }
    if stale(&binaries.kube_scheduler, &k8s)
        || stale(&binaries.kube_controller_manager, &k8s)
        || stale(&binaries.kubectl, &k8s)
    {
        eprintln!(
            "xtask: building kube-scheduler, kube-controller-manager and kubectl {} with {go_version} (once per machine; several minutes on 2 cores)",
            versions::KUBERNETES
        );
        let module = gobuild::prepare_module(
            "gobuild-e2e",
            &[
                "k8s.io/kubernetes/cmd/kube-scheduler",
                "k8s.io/kubernetes/cmd/kube-controller-manager",
                "k8s.io/kubernetes/cmd/kubectl",
            ],
            &[],
        )?;
        let ldflags = gobuild::version_ldflags();
        for (name, path) in [
            ("kube-scheduler", &binaries.kube_scheduler),
            ("kube-controller-manager", &binaries.kube_controller_manager),
            ("kubectl", &binaries.kubectl),
        ] {
            if !stale(path, &k8s) {
                continue;
            }
            let started = Instant::now();
            let partial = path.with_extension("partial");
            gobuild::go(
                &module,
                &["build", "-ldflags", &ldflags, "-o"],
                Some(&partial),
                &format!("k8s.io/kubernetes/cmd/{name}"),
            )?;
            install(&partial, path, &wanted(&k8s))?;
            built.push(Built {
                name,
                seconds: started.elapsed().as_secs_f64(),
            });
        }
    }
    for b in &built {
        eprintln!("xtask: built {} in {:.0} s", b.name, b.seconds);
    }
    Ok(binaries)
}

fn stamp_path(binary: &Path) -> PathBuf {
    binary.with_extension("stamp")
}

fn install(partial: &Path, path: &Path, stamp: &str) -> Result<()> {
    std::fs::rename(partial, path)
        .with_context(|| format!("renaming {} into place", partial.display()))?;
    std::fs::write(stamp_path(path), stamp)?;
    Ok(())
}

/// `go install <spec>` into a scratch GOBIN, then the binary (`produced`) renamed to `path`.
fn go_install(
    bin: &Path,
    spec: &str,
    ldflags: &str,
    produced: &str,
    path: &Path,
    stamp: &str,
) -> Result<()> {
    let scratch = bin.join(".partial-gobin");
    let _ = std::fs::remove_dir_all(&scratch);
    std::fs::create_dir_all(&scratch)?;
    eprintln!("xtask: go install {spec}");
    let status = Command::new("go")
        .args(["install", "-ldflags", ldflags, spec])
        .current_dir(std::env::temp_dir())
        .env("GOBIN", &scratch)
        .env("GOTOOLCHAIN", "local")
        .env("GOFLAGS", "-buildvcs=false")
        .status()
        .with_context(|| format!("running go install {spec}"))?;
    if !status.success() {
        bail!("go install {spec} failed ({status})");
    }
    install(&scratch.join(produced), path, stamp)?;
    let _ = std::fs::remove_dir_all(&scratch);
    Ok(())
}
