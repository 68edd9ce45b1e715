//! The test control plane: etcd and kube-apiserver on loopback, started from the binaries
//! [`crate::gobuild`] builds, with RBAC on, our CRDs and the third-party CRDs installed.
//!
//! Each instance lives in its own directory under the cache root (PKI, etcd data, logs,
//! kubeconfig, `state.json` with the PIDs and ports). `control-plane up` uses the shared
//! default instance, which later `cargo test` runs find through testenv's default path;
//! `cargo xtask test` starts a private instance when none is running, so its cleanup never
//! stops a control plane someone else is using.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow, bail};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Patch, PatchParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Api, Client, Config};
use serde::{Deserialize, Serialize};
use std::os::unix::process::CommandExt;

use crate::gobuild::{self, Binaries};
use crate::pki;

/// What `state.json` records about a running instance.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct State {
    pub etcd_pid: u32,
    pub apiserver_pid: u32,
    pub etcd_port: u16,
    pub apiserver_port: u16,
    pub kubeconfig: PathBuf,
    pub etcd_binary: PathBuf,
    pub apiserver_binary: PathBuf,
}

/// An instance directory.
#[derive(Debug, Clone)]
pub struct Instance {
    pub dir: PathBuf,
}

/// Children this process started (so it can reap them after stopping them).
#[derive(Debug, Default)]
pub struct Children {
    children: Vec<Child>,
}

impl Children {
    /// The started processes with their names and log files (etcd, then kube-apiserver),
    /// for a caller that supervises them itself (the e2e environment).
    pub fn into_named(self, instance: &Instance) -> Vec<(&'static str, Child, PathBuf)> {
        let names = [
            ("etcd", "etcd.log"),
            ("kube-apiserver", "kube-apiserver.log"),
        ];
        names
            .into_iter()
            .zip(self.children)
            .map(|((name, log), child)| (name, child, instance.dir.join(log)))
            .collect()
    }

    /// Whether a process this run started is still running: `Some` for our own children
    /// (decided by `wait`, not by `/proc`), `None` for a process we did not start.
    ///
    /// Why not `/proc/<pid>/cmdline`: between `fork` and `exec` a child still shows the
    /// parent's command line, so a check made right after spawning (sooner the busier the
    /// machine) took a starting etcd or kube-apiserver for one that had exited and failed
    /// the start with "exited (status unknown)" and empty logs: the flake CI saw about once
    /// in a dozen starts.
    fn alive(&mut self, pid: u32) -> Option<bool> {
        let child = self.children.iter_mut().find(|c| c.id() == pid)?;
        Some(matches!(child.try_wait(), Ok(None)))
    }

    /// The first of the started processes (etcd, then kube-apiserver) that has exited, with
    /// how it ended and its log's last lines: tests that lose their control plane hang on
    /// timeouts and then fail far from the cause (etcd's "no space left on device" when the
    /// disk filled up mid-run), so the supervisor says so when it happens.
    pub fn first_exit(&mut self, instance: &Instance) -> Option<String> {
        let names = [
            ("etcd", "etcd.log"),
            ("kube-apiserver", "kube-apiserver.log"),
        ];
        for ((name, log), child) in names.into_iter().zip(self.children.iter_mut()) {
            if let Ok(Some(status)) = child.try_wait() {
                return Some(format!(
                    "{name} exited during the tests ({}); last log lines:\n{}",
                    crate::e2e::procs::describe(status),
                    tail(&instance.dir.join(log), 20)
                ));
            }
        }
        None
    }

    /// How a started process ended, if it did (for error messages: an empty log with
    /// "killed by signal 9" points at the OOM killer, not at the program).
    fn exit_of(&mut self, pid: u32) -> Option<String> {
        let child = self.children.iter_mut().find(|c| c.id() == pid)?;
        let status = child.try_wait().ok()??;
        Some(crate::e2e::procs::describe(status))
    }
}

impl Instance {
    /// The shared instance whose kubeconfig is testenv's default path.
    pub fn default_instance() -> Self {
        let dir = testenv::kubeconfig_path_default()
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_else(|| testenv::cache_dir().join("control-plane"));
        Self { dir }
    }

    /// A private instance for one `cargo xtask test` run. Private instances left behind by
    /// runs that were killed (their xtask PID is gone) are stopped and removed first.
    pub fn private() -> Self {
        cleanup_orphans();
        Self {
            dir: testenv::cache_dir().join(format!("{PRIVATE_PREFIX}{}", std::process::id())),
        }
    }

    pub fn kubeconfig(&self) -> PathBuf {
        self.dir.join("kubeconfig")
    }

    fn state_path(&self) -> PathBuf {
        self.dir.join("state.json")
    }

    pub fn state(&self) -> Option<State> {
        let text = std::fs::read_to_string(self.state_path()).ok()?;
        serde_json::from_str(&text).ok()
    }

    /// Whether both processes recorded in the state are alive.
    pub fn processes_alive(&self) -> bool {
        self.state().is_some_and(|s| {
            is_our_process(s.etcd_pid, &s.etcd_binary)
                && is_our_process(s.apiserver_pid, &s.apiserver_binary)
        })
    }

    /// Whether the instance is running and its API server answers /readyz.
    pub async fn is_ready(&self) -> bool {
        if !self.processes_alive() {
            return false;
        }
        match client_for(&self.kubeconfig()).await {
            Ok(client) => readyz(&client).await.is_ok(),
            Err(_) => false,
        }
    }

    /// Starts the instance unless it is already running; returns the children started.
    pub async fn up(&self) -> Result<Children> {
        if self.is_ready().await {
            eprintln!(
                "xtask: control plane already running ({})",
                self.dir.display()
            );
            install_crds(&client_for(&self.kubeconfig()).await?).await?;
            return Ok(Children::default());
        }
        let binaries = gobuild::ensure_binaries()?;
        self.down_quiet();
        let started = Instant::now();
        let mut children = Children::default();
        match self.start(&binaries, &mut children).await {
            Ok(()) => {
                eprintln!(
                    "xtask: control plane ready in {:.1?} ({})",
                    started.elapsed(),
                    self.dir.display()
                );
                Ok(children)
            }
            Err(e) => {
                self.stop(children);
                Err(e)
            }
        }
    }

    async fn start(&self, binaries: &Binaries, children: &mut Children) -> Result<()> {
        if self.dir.exists() {
            std::fs::remove_dir_all(&self.dir)
                .with_context(|| format!("removing old {}", self.dir.display()))?;
        }
        std::fs::create_dir_all(&self.dir)?;
        let pki = pki::generate(&self.dir.join("pki"))?;
        let etcd_port = free_port()?;
        let etcd_peer_port = free_port()?;
        let apiserver_port = free_port()?;

        let etcd_url = format!("http://127.0.0.1:{etcd_port}");
        let peer_url = format!("http://127.0.0.1:{etcd_peer_port}");
        let etcd = spawn(
            Command::new(&binaries.etcd)
                .arg(format!(
                    "--data-dir={}",
                    self.dir.join("etcd-data").display()
                ))
                .arg("--name=default")
                .arg(format!("--listen-client-urls={etcd_url}"))
                .arg(format!("--advertise-client-urls={etcd_url}"))
                .arg(format!("--listen-peer-urls={peer_url}"))
                .arg(format!("--initial-advertise-peer-urls={peer_url}"))
                .arg(format!("--initial-cluster=default={peer_url}"))
                .arg("--unsafe-no-fsync=true")
                .arg("--log-level=warn"),
            &self.dir.join("etcd.log"),
        )?;
        let etcd_pid = etcd.id();
        children.children.push(etcd);

        let pki_path = |p: &Path| p.display().to_string();
        let apiserver = spawn(
            Command::new(&binaries.kube_apiserver)
                .arg(format!("--etcd-servers={etcd_url}"))
                .arg("--bind-address=127.0.0.1")
                .arg("--advertise-address=127.0.0.1")
                .arg(format!("--secure-port={apiserver_port}"))
                .arg(format!("--cert-dir={}", self.dir.join("pki").display()))
                .arg(format!("--tls-cert-file={}", pki_path(&pki.serving_cert)))
                .arg(format!(
                    "--tls-private-key-file={}",
                    pki_path(&pki.serving_key)
                ))
                .arg(format!("--client-ca-file={}", pki_path(&pki.ca_cert)))
                .arg(format!(
                    "--service-account-key-file={}",
                    pki_path(&pki.service_account_pub)
                ))
                .arg(format!(
                    "--service-account-signing-key-file={}",
                    pki_path(&pki.service_account_key)
                ))
                .arg("--service-account-issuer=https://kubernetes.default.svc")
                .arg("--authorization-mode=RBAC")
                .arg("--service-cluster-ip-range=10.0.0.0/24")
                .arg("--allow-privileged=true")
                // No controller-manager creates default ServiceAccounts here (as in envtest).
                .arg("--disable-admission-plugins=ServiceAccount")
                .arg("--v=1"),
            &self.dir.join("kube-apiserver.log"),
        )?;
        let apiserver_pid = apiserver.id();
        children.children.push(apiserver);

        let kubeconfig = self.kubeconfig();
        std::fs::write(&kubeconfig, kubeconfig_yaml(apiserver_port, &pki))?;
        let state = State {
            etcd_pid,
            apiserver_pid,
            etcd_port,
            apiserver_port,
            kubeconfig: kubeconfig.clone(),
            etcd_binary: binaries.etcd.clone(),
            apiserver_binary: binaries.kube_apiserver.clone(),
        };
        std::fs::write(self.state_path(), serde_json::to_string_pretty(&state)?)?;

        let client = client_for(&kubeconfig).await?;
        let deadline = Instant::now() + Duration::from_secs(180);
        loop {
            match readyz(&client).await {
                Ok(()) => break,
                Err(e) => {
                    if !children
                        .alive(apiserver_pid)
                        .unwrap_or_else(|| is_our_process(apiserver_pid, &binaries.kube_apiserver))
                    {
                        bail!(
                            "kube-apiserver exited ({}); last log lines:\n{}",
                            children
                                .exit_of(apiserver_pid)
                                .unwrap_or_else(|| "status unknown".into()),
                            tail(&self.dir.join("kube-apiserver.log"), 30)
                        );
                    }
                    if !children
                        .alive(etcd_pid)
                        .unwrap_or_else(|| is_our_process(etcd_pid, &binaries.etcd))
                    {
                        bail!(
                            "etcd exited ({}); last log lines:\n{}",
                            children
                                .exit_of(etcd_pid)
                                .unwrap_or_else(|| "status unknown".into()),
                            tail(&self.dir.join("etcd.log"), 30)
                        );
                    }
                    if Instant::now() > deadline {
                        bail!(
                            "kube-apiserver not ready after 180 s ({e}); last log lines:\n{}",
                            tail(&self.dir.join("kube-apiserver.log"), 30)
                        );
                    }
                    tokio::time::sleep(Duration::from_millis(250)).await;
                }
            }
        }
        install_crds(&client).await
    }

    /// Copies the instance's logs to a directory of their own under the cache (the instance
    /// directory goes when the run ends) and returns it.
    pub fn keep_logs(&self) -> Result<PathBuf> {
        let stamp = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        let to = testenv::cache_dir()
            .join("control-plane-deaths")
            .join(stamp.to_string());
        std::fs::create_dir_all(&to)?;
        for log in ["etcd.log", "kube-apiserver.log"] {
            let from = self.dir.join(log);
            if from.exists() {
                std::fs::copy(&from, to.join(log))?;
            }
        }
        Ok(to)
    }

    /// Stops the processes recorded in the state (started by any earlier `up`) and reaps
    /// `children` if this process started them.
    pub fn stop(&self, mut children: Children) {
        self.down_quiet();
        for child in &mut children.children {
            let _ = child.kill();
            let _ = child.wait();
        }
        // etcd's data is the bulk of the directory; drop it, keep logs for post-mortems.
        let _ = std::fs::remove_dir_all(self.dir.join("etcd-data"));
    }

    /// Stops the recorded processes (only if they are still the binaries we started, so a
    /// reused PID is never hit) and removes the state file. Returns what it stopped.
    pub fn down_quiet(&self) -> Vec<u32> {
        let Some(state) = self.state() else {
            return Vec::new();
        };
        let mut stopped = Vec::new();
        for (pid, binary) in [
            (state.apiserver_pid, &state.apiserver_binary),
            (state.etcd_pid, &state.etcd_binary),
        ] {
            if is_our_process(pid, binary) {
                terminate(pid, binary);
                stopped.push(pid);
            }
        }
        let _ = std::fs::remove_file(self.state_path());
        let _ = std::fs::remove_file(self.kubeconfig());
        stopped
    }
}

const PRIVATE_PREFIX: &str = "control-plane-test-";

fn cleanup_orphans() {
    let Ok(entries) = std::fs::read_dir(testenv::cache_dir()) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().to_string();
        let Some(owner) = name
            .strip_prefix(PRIVATE_PREFIX)
            .and_then(|pid| pid.parse::<u32>().ok())
        else {
            continue;
        };
        let owner_alive = std::fs::read(format!("/proc/{owner}/cmdline"))
            .is_ok_and(|cmdline| String::from_utf8_lossy(&cmdline).contains("xtask"));
        if !owner_alive {
            let orphan = Instance { dir: entry.path() };
            let stopped = orphan.down_quiet();
            if !stopped.is_empty() {
                eprintln!("xtask: stopped orphaned control plane {name} (PIDs {stopped:?})");
            }
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

fn spawn(command: &mut Command, log: &Path) -> Result<Child> {
    let out = File::create(log)?;
    let err = out.try_clone()?;
    command
        .stdin(Stdio::null())
        .stdout(Stdio::from(out))
        .stderr(Stdio::from(err))
        // Own process group: a Ctrl-C meant for xtask or cargo does not reach it; `down`
        // stops it explicitly.
        .process_group(0)
        .spawn()
        .with_context(|| format!("starting {:?}", command.get_program()))
}

pub fn free_port() -> Result<u16> {
    Ok(testenv::ports::free_port()?)
}

/// Whether `pid` is alive (not a zombie) and runs `binary`.
fn is_our_process(pid: u32, binary: &Path) -> bool {
    let proc_dir = PathBuf::from(format!("/proc/{pid}"));
    let Ok(stat) = std::fs::read_to_string(proc_dir.join("stat")) else {
        return false;
    };
    // The state letter follows the parenthesised command name.
    let state = stat
        .rsplit_once(')')
        .map(|(_, rest)| rest.trim_start().chars().next());
    if matches!(state, Some(Some('Z' | 'X'))) {
        return false;
    }
    let Ok(cmdline) = std::fs::read(proc_dir.join("cmdline")) else {
        return false;
    };
    let argv0 = cmdline.split(|b| *b == 0).next().unwrap_or_default();
    argv0 == binary.as_os_str().as_encoded_bytes()
}

fn terminate(pid: u32, binary: &Path) {
    let _ = Command::new("kill")
        .arg("-TERM")
        .arg(pid.to_string())
        .status();
    let deadline = Instant::now() + Duration::from_secs(15);
    while is_our_process(pid, binary) {
        if Instant::now() > deadline {
            let _ = Command::new("kill")
                .arg("-KILL")
                .arg(pid.to_string())
                .status();
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn tail(path: &Path, lines: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

fn kubeconfig_yaml(port: u16, pki: &pki::Pki) -> String {
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: karpenter-capi-test\n  cluster:\n    server: https://127.0.0.1:{port}\n    certificate-authority: {ca}\ncontexts:\n- name: karpenter-capi-test\n  context:\n    cluster: karpenter-capi-test\n    user: kcapi-admin\ncurrent-context: karpenter-capi-test\nusers:\n- name: kcapi-admin\n  user:\n    client-certificate: {cert}\n    client-key: {key}\n",
        ca = pki.ca_cert.display(),
        cert = pki.admin_cert.display(),
        key = pki.admin_key.display(),
    )
}

pub async fn client_for(kubeconfig: &Path) -> Result<Client> {
    let kubeconfig = Kubeconfig::read_from(kubeconfig)?;
    let config = Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default()).await?;
    Ok(Client::try_from(config)?)
}

async fn readyz(client: &Client) -> Result<()> {
    let request = http::Request::get("/readyz").body(Vec::new())?;
    let text = client.request_text(request).await?;
    if text.trim() == "ok" {
        Ok(())
    } else {
        Err(anyhow!("readyz: {text}"))
    }
}

/// Every CRD file to install: ours (generated into `config/crd/`), then the third-party ones
/// read from the Go module cache at their pinned versions.
pub fn crd_files() -> Result<Vec<PathBuf>> {
    let mut files = yaml_files(&crate::repo_root().join("config").join("crd"))?;
    for (pin, paths) in testenv::versions::THIRD_PARTY_CRDS {
        let module = testenv::gomod::try_module_dir(pin.0, pin.1).map_err(|e| anyhow!(e))?;
        for path in *paths {
            let path = module.join(path);
            if path.is_dir() {
                files.extend(yaml_files(&path)?);
            } else if path.is_file() {
                files.push(path);
            } else {
                bail!("{} has no {}", pin.0, path.display());
            }
        }
    }
    Ok(files)
}

fn yaml_files(dir: &Path) -> Result<Vec<PathBuf>> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .with_context(|| format!("reading {}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "yaml" || e == "yml"))
        .collect();
    files.sort();
    Ok(files)
}

/// Parses every CustomResourceDefinition document in a YAML file.
pub fn read_crds(path: &Path) -> Result<Vec<CustomResourceDefinition>> {
    let text = std::fs::read_to_string(path)?;
    let docs: Vec<serde_json::Value> = serde_saphyr::from_multiple(&text)
        .with_context(|| format!("parsing {}", path.display()))?;
    docs.into_iter()
        .filter(|doc| doc.get("kind").and_then(|k| k.as_str()) == Some("CustomResourceDefinition"))
        .map(|doc| {
            serde_json::from_value(doc).with_context(|| format!("CRD in {}", path.display()))
        })
        .collect()
}

/// Applies every CRD (server-side apply, so re-running is harmless) and waits until the
/// API server serves them.
pub async fn install_crds(client: &Client) -> Result<()> {
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    let params = PatchParams::apply("karpenter-capi-xtask").force();
    let mut names = Vec::new();
    for file in crd_files()? {
        for mut crd in read_crds(&file)? {
            let name = crd
                .metadata
                .name
                .clone()
                .with_context(|| format!("CRD without a name in {}", file.display()))?;
            crd.metadata.managed_fields = None;
            crd.metadata.resource_version = None;
            crd.status = None;
            api.patch(&name, &params, &Patch::Apply(&crd))
                .await
                .with_context(|| format!("applying CRD {name} from {}", file.display()))?;
            names.push(name);
        }
    }
    let deadline = Instant::now() + Duration::from_secs(60);
    for name in &names {
        loop {
            let crd = api.get(name).await?;
            let established = crd
                .status
                .as_ref()
                .and_then(|s| s.conditions.as_ref())
                .is_some_and(|c| {
                    c.iter()
                        .any(|c| c.type_ == "Established" && c.status == "True")
                });
            if established {
                break;
            }
            if Instant::now() > deadline {
                bail!("CRD {name} not established after 60 s");
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    eprintln!("xtask: {} CRDs installed", names.len());
    Ok(())
}
