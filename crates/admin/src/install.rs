//! `install`: renders the Helm chart with the `helm` binary and applies the output with
//! server-side apply, or prints it.
//!
//! The chart is compiled into the binary ([`CHART_FILES`]) and written to a temporary
//! directory for `helm template`, so `install` works from an installed binary without the
//! source tree. On OpenShift, `--openshift` switches the values to its namespace convention
//! and an SCC-compatible pod security context (no fixed UID; `restricted-v2` assigns one).

use std::path::{Path, PathBuf};

use kube::api::{ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams};
use kube::discovery::{Discovery, Scope};
use kube::{Api, Client};

use crate::Error;
use crate::progress::Progress;

macro_rules! chart_files {
    ($($path:literal),* $(,)?) => {
        &[$(($path, include_str!(concat!("../../../charts/karpenter-capi/", $path)))),*]
    };
}

/// Every file of `charts/karpenter-capi`, by path inside the chart.
pub const CHART_FILES: &[(&str, &str)] = chart_files!(
    "Chart.yaml",
    "values.yaml",
    "templates/_helpers.tpl",
    "templates/serviceaccount.yaml",
    "templates/rbac-workload.yaml",
    "templates/rbac-management.yaml",
    "templates/deployment.yaml",
    "templates/pdb.yaml",
    "templates/service.yaml",
    "templates/NOTES.txt",
    "crds/karpenter.cluster.x-k8s.io_clusterapinodeclasses.yaml",
    "crds/karpenter.sh_nodeclaims.yaml",
    "crds/karpenter.sh_nodepools.yaml",
);

/// What OpenShift needs and why (printed by `install --openshift`).
pub const OPENSHIFT_NOTES: &str = "\
OpenShift:
- namespace: the chart goes into its own namespace (default karpenter-capi; openshift-* names are the platform's); the
  Machine API objects stay in openshift-machine-api, which the management Role covers.
- pod security: no fixed runAsUser/fsGroup; runAsNonRoot, no privilege escalation, all
  capabilities dropped and the RuntimeDefault seccomp profile, which the restricted-v2 SCC admits.
- unregistered taint: Karpenter needs every new node to register with the taint
  karpenter.sh/unregistered:NoExecute, so no pod lands before the node is bound to its NodeClaim.
  OpenShift's machine-config adds no such taint: add it to the MachineSet's
  spec.template.spec.taints (MachineSets that take part), or launched nodes are used before we
  have seen them and consolidation may miscount them.
";

/// Options of `install`.
#[derive(Debug, Clone, Default)]
pub struct InstallOptions {
    pub release: String,
    pub namespace: String,
    pub openshift: bool,
    /// A kubeconfig Secret (key `kubeconfig`) for a separate management cluster.
    pub management_kubeconfig_secret: Option<String>,
    /// Extra `--set k=v` values.
    pub set: Vec<String>,
    /// The helm binary (default: `helm` on PATH).
    pub helm: Option<PathBuf>,
}

/// Writes the embedded chart under `dir` and returns the chart's path.
pub fn write_chart(dir: &Path) -> Result<PathBuf, Error> {
    let root = dir.join("karpenter-capi");
    for (path, text) in CHART_FILES {
        let p = root.join(path);
        if let Some(parent) = p.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::write(p, text)?;
    }
    Ok(root)
}

/// `helm template` of the chart with the options; returns the YAML stream.
pub fn render(opts: &InstallOptions) -> Result<String, Error> {
    // One directory per call: renders may run concurrently (the UI, tests).
    static RENDERS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = RENDERS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("karpenter-capi-chart-{}-{n}", std::process::id()));
    let chart = write_chart(&dir)?;
    let mut cmd = std::process::Command::new(opts.helm.clone().unwrap_or_else(|| "helm".into()));
    cmd.args(["template", &opts.release]).arg(&chart).args([
        "--namespace",
        &opts.namespace,
        "--include-crds",
    ]);
    if opts.openshift {
        cmd.args(["--set", "openshift.enabled=true"]);
    }
    if let Some(secret) = &opts.management_kubeconfig_secret {
        cmd.args(["--set", &format!("management.kubeconfigSecret={secret}")]);
    }
    for s in &opts.set {
        cmd.args(["--set", s]);
    }
    let out = cmd.output().map_err(|e| {
        Error::Helm(format!(
            "cannot run {} ({e}); install helm or pass --helm (developers: `cargo xtask helm`)",
            opts.helm.as_deref().unwrap_or(Path::new("helm")).display()
        ))
    })?;
    let _ = std::fs::remove_dir_all(&dir);
    if !out.status.success() {
        return Err(Error::Helm(
            String::from_utf8_lossy(&out.stderr).into_owned(),
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Splits a YAML stream into objects (empty documents dropped).
pub fn documents(yaml: &str) -> Result<Vec<DynamicObject>, Error> {
    let values: Vec<serde_json::Value> = serde_saphyr::from_multiple(yaml)
        .map_err(|e| Error::Invalid(format!("rendered chart is not YAML: {e}")))?;
    values
        .into_iter()
        .filter(|v| !v.is_null())
        .map(|v| serde_json::from_value(v).map_err(Error::from))
        .collect()
}

/// Server-side applies every object (CRDs first, so the rest can use them), as field manager
/// `karpenter-capi-install`. `dry_run` asks the server to validate without persisting.
pub async fn apply(
    client: &Client,
    objects: &[DynamicObject],
    namespace: &str,
    dry_run: bool,
) -> Result<Vec<String>, Error> {
    apply_with(client, objects, namespace, dry_run, &Progress::none()).await
}

/// [`apply`], reporting each object.
pub async fn apply_with(
    client: &Client,
    objects: &[DynamicObject],
    namespace: &str,
    dry_run: bool,
    progress: &Progress,
) -> Result<Vec<String>, Error> {
    let mut ordered: Vec<&DynamicObject> = objects.iter().collect();
    ordered.sort_by_key(|o| {
        let kind = o.types.as_ref().map(|t| t.kind.as_str()).unwrap_or("");
        match kind {
            "CustomResourceDefinition" => 0,
            "Namespace" => 1,
            _ => 2,
        }
    });
    let mut done = Vec::new();
    let mut discovery = Discovery::new(client.clone()).run().await?;
    let total = ordered.len();
    for (i, obj) in ordered.into_iter().enumerate() {
        let types = obj
            .types
            .as_ref()
            .ok_or_else(|| Error::Invalid("rendered object without apiVersion/kind".into()))?;
        progress.step(
            i,
            total,
            format!(
                "applying {} {}",
                types.kind,
                obj.metadata.name.as_deref().unwrap_or("?")
            ),
        );
        let (group, version) = match types.api_version.split_once('/') {
            Some((g, v)) => (g.to_string(), v.to_string()),
            None => (String::new(), types.api_version.clone()),
        };
        let gvk = GroupVersionKind::gvk(&group, &version, &types.kind);
        let mut found = discovery.resolve_gvk(&gvk);
        if found.is_none() {
            // A CRD applied just before: refresh discovery once.
            discovery = Discovery::new(client.clone()).run().await?;
            found = discovery.resolve_gvk(&gvk);
        }
        let (ar, caps): (ApiResource, _) = found.ok_or_else(|| {
            Error::Invalid(format!(
                "{} {} is not served by the cluster",
                types.api_version, types.kind
            ))
        })?;
        let name = obj.metadata.name.clone().unwrap_or_default();
        let api: Api<DynamicObject> = if caps.scope == Scope::Namespaced {
            let ns = obj
                .metadata
                .namespace
                .clone()
                .unwrap_or_else(|| namespace.to_string());
            Api::namespaced_with(client.clone(), &ns, &ar)
        } else {
            Api::all_with(client.clone(), &ar)
        };
        let mut pp = PatchParams::apply("karpenter-capi-install").force();
        if dry_run {
            pp = pp.dry_run();
        }
        api.patch(&name, &pp, &Patch::Apply(obj)).await?;
        done.push(format!("{} {name}", types.kind));
    }
    Ok(done)
}

/// What to render for each cluster: one release with everything when the management cluster
/// is the workload cluster; otherwise the controller and workload RBAC for the workload
/// cluster and only the management identity for the management cluster.
pub fn plan_renders(
    same_cluster: bool,
    opts: &InstallOptions,
) -> Result<Vec<(ClusterTarget, InstallOptions)>, Error> {
    if same_cluster {
        return Ok(vec![(ClusterTarget::Workload, opts.clone())]);
    }
    if opts.management_kubeconfig_secret.is_none() {
        return Err(Error::Invalid(
            "a separate management cluster needs --management-kubeconfig-secret: a Secret (key `kubeconfig`) in the workload cluster holding a kubeconfig for the ServiceAccount this command creates in the management cluster".into(),
        ));
    }
    let mut workload = opts.clone();
    workload.set.push("components=workload".into());
    let mut management = opts.clone();
    management.management_kubeconfig_secret = None;
    management.set.push("components=management".into());
    Ok(vec![
        (ClusterTarget::Workload, workload),
        (ClusterTarget::Management, management),
    ])
}

/// Which cluster a rendering is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClusterTarget {
    Workload,
    Management,
}

/// Renders and applies (or, with `render_only`, returns the YAML of) the chart for the
/// chosen clusters.
pub async fn install(
    clusters: &crate::Clusters,
    opts: &InstallOptions,
    render_only: bool,
    dry_run: bool,
) -> Result<Vec<String>, Error> {
    install_with(clusters, opts, render_only, dry_run, &Progress::none()).await
}

/// [`install`], reporting each applied object.
pub async fn install_with(
    clusters: &crate::Clusters,
    opts: &InstallOptions,
    render_only: bool,
    dry_run: bool,
    progress: &Progress,
) -> Result<Vec<String>, Error> {
    let mut out = Vec::new();
    for (target, o) in plan_renders(clusters.same, opts)? {
        let yaml = render(&o)?;
        let name = match target {
            ClusterTarget::Workload => "workload",
            ClusterTarget::Management => "management",
        };
        if render_only {
            out.push(format!("# ---- {name} cluster ----\n{yaml}"));
            continue;
        }
        let client = match target {
            ClusterTarget::Workload => &clusters.workload,
            ClusterTarget::Management => &clusters.management,
        };
        for d in apply_with(client, &documents(&yaml)?, &o.namespace, dry_run, progress).await? {
            out.push(format!(
                "{name} cluster: applied{} {d}",
                if dry_run { " (dry run)" } else { "" }
            ));
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn two_clusters_get_two_renders_and_need_the_kubeconfig_secret() {
        let opts = InstallOptions {
            release: "r".into(),
            namespace: "n".into(),
            ..Default::default()
        };
        assert_eq!(plan_renders(true, &opts).unwrap().len(), 1);
        assert!(matches!(plan_renders(false, &opts), Err(Error::Invalid(_))));
        let opts = InstallOptions {
            management_kubeconfig_secret: Some("s".into()),
            ..opts
        };
        let r = plan_renders(false, &opts).unwrap();
        assert_eq!(r[0].0, ClusterTarget::Workload);
        assert!(r[0].1.set.contains(&"components=workload".to_string()));
        assert_eq!(r[0].1.management_kubeconfig_secret.as_deref(), Some("s"));
        assert!(r[1].1.set.contains(&"components=management".to_string()));
        assert!(r[1].1.management_kubeconfig_secret.is_none());
    }
}
