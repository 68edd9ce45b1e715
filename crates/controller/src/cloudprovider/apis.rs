//! Typed access to the three scalable kinds and their Machines in the management cluster.
//!
//! Every write here is either a merge patch on metadata or a write of the scale subresource
//! carrying the resourceVersion the caller read, so nothing the adapter's subset types do not
//! model is ever overwritten, and a concurrent change fails with 409 instead of being lost.

use capi_adapter::objects::capi::{self, CapiVersion};
use capi_adapter::objects::openshift;
use capi_adapter::{
    MachineApi, MachineKey, MachineView, ResourceId, ResourceKind, ScalableResource,
};
use k8s_openapi::api::autoscaling::v1::{Scale, ScaleSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{ListParams, Patch, PatchParams, PostParams};
use kube::{Api, Client};

use super::Error;

/// A scale write that lost a race.
#[derive(Debug)]
pub(crate) enum WriteError {
    /// 409: someone changed the resource since we read it; re-read and recompute.
    Conflict,
    Other(Error),
}

impl From<kube::Error> for WriteError {
    fn from(e: kube::Error) -> Self {
        if is_conflict(&e) {
            WriteError::Conflict
        } else {
            WriteError::Other(e.into())
        }
    }
}

pub(crate) fn is_conflict(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.is_conflict())
}

pub(crate) fn is_not_found(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 404)
}

/// The API groups are not installed at all (a CAPI-only or OpenShift-only cluster). Such a
/// list answers a bare `404 page not found`, which kube-rs turns into a Status with reason
/// "Failed to parse error data"; `Status::is_not_found` then says no (it only falls back to
/// the code for reasons it does not know), hence the code. Found by the two-cluster test:
/// a CAPI management cluster has no `machine.openshift.io`, and every catalog failed.
fn kind_not_served(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 404)
}

#[derive(Clone)]
pub(crate) struct Apis {
    pub(crate) client: Client,
    pub(crate) version: CapiVersion,
    /// See [`super::Config::namespaces`].
    pub(crate) namespaces: Option<Vec<String>>,
}

impl std::fmt::Debug for Apis {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Apis")
            .field("version", &self.version)
            .finish_non_exhaustive()
    }
}

impl Apis {
    fn md(&self, ns: &str) -> Api<capi::MachineDeployment> {
        Api::namespaced_with(self.client.clone(), ns, &self.version)
    }
    fn ms(&self, ns: &str) -> Api<capi::MachineSet> {
        Api::namespaced_with(self.client.clone(), ns, &self.version)
    }
    fn os_ms(&self, ns: &str) -> Api<openshift::MachineSet> {
        Api::namespaced(self.client.clone(), ns)
    }
    fn capi_machines(&self, ns: &str) -> Api<capi::Machine> {
        Api::namespaced_with(self.client.clone(), ns, &self.version)
    }
    fn os_machines(&self, ns: &str) -> Api<openshift::Machine> {
        Api::namespaced(self.client.clone(), ns)
    }

    /// Every resource of the given kinds in the configured namespaces (all without a list).
    /// A kind whose API is not served contributes nothing (not an error: most clusters run
    /// only one of the two APIs).
    pub(crate) async fn list_resources(
        &self,
        kinds: &[ResourceKind],
    ) -> Result<Vec<ScalableResource>, Error> {
        let mut out = Vec::new();
        let scopes: Vec<Option<&str>> = match &self.namespaces {
            None => vec![None],
            Some(list) => list.iter().map(|n| Some(n.as_str())).collect(),
        };
        for kind in kinds {
            for ns in &scopes {
                match self.list_kind(*kind, *ns).await {
                    Ok(items) => out.extend(items),
                    Err(e) if kind_not_served(&e) => {}
                    Err(e) => return Err(e.into()),
                }
            }
        }
        Ok(out)
    }

    /// One kind in one namespace (`None`: all namespaces).
    async fn list_kind(
        &self,
        kind: ResourceKind,
        ns: Option<&str>,
    ) -> Result<Vec<ScalableResource>, kube::Error> {
        let lp = ListParams::default();
        Ok(match kind {
            ResourceKind::MachineDeployment => {
                let api = match ns {
                    Some(ns) => self.md(ns),
                    None => Api::all_with(self.client.clone(), &self.version),
                };
                api.list(&lp)
                    .await?
                    .items
                    .iter()
                    .map(ScalableResource::from)
                    .collect()
            }
            ResourceKind::MachineSet => {
                let api = match ns {
                    Some(ns) => self.ms(ns),
                    None => Api::all_with(self.client.clone(), &self.version),
                };
                api.list(&lp)
                    .await?
                    .items
                    .iter()
                    .map(ScalableResource::from)
                    .collect()
            }
            ResourceKind::OpenShiftMachineSet => {
                let api = match ns {
                    Some(ns) => self.os_ms(ns),
                    None => Api::all(self.client.clone()),
                };
                api.list(&lp)
                    .await?
                    .items
                    .iter()
                    .map(ScalableResource::from)
                    .collect()
            }
        })
    }

    /// The resource and the resourceVersion it was read at (the scale subresource shares it).
    pub(crate) async fn get_resource(
        &self,
        id: &ResourceId,
    ) -> Result<Option<(ScalableResource, String)>, Error> {
        let (ns, name) = (id.namespace.as_str(), id.name.as_str());
        let got = match id.kind {
            ResourceKind::MachineDeployment => self
                .md(ns)
                .get_opt(name)
                .await?
                .map(|o| (ScalableResource::from(&o), rv(&o.metadata))),
            ResourceKind::MachineSet => self
                .ms(ns)
                .get_opt(name)
                .await?
                .map(|o| (ScalableResource::from(&o), rv(&o.metadata))),
            ResourceKind::OpenShiftMachineSet => self
                .os_ms(ns)
                .get_opt(name)
                .await?
                .map(|o| (ScalableResource::from(&o), rv(&o.metadata))),
        };
        Ok(got)
    }

    /// The MachineSets a MachineDeployment owns (by CAPI's deployment-name label).
    pub(crate) async fn machinesets_of(
        &self,
        namespace: &str,
        deployment: &str,
    ) -> Result<Vec<capi::MachineSet>, Error> {
        let lp = ListParams::default().labels(&format!(
            "{}={}",
            capi_adapter::keys::capi::DEPLOYMENT_NAME,
            deployment
        ));
        Ok(self.ms(namespace).list(&lp).await?.items)
    }

    /// The Machines of a resource (by CAPI's / OpenShift's owner label), any state.
    pub(crate) async fn list_machines(&self, id: &ResourceId) -> Result<Vec<MachineView>, Error> {
        let lp =
            ListParams::default().labels(&format!("{}={}", id.kind.machine_owner_label(), id.name));
        Ok(match id.kind.machine_api() {
            MachineApi::Capi => self
                .capi_machines(&id.namespace)
                .list(&lp)
                .await?
                .items
                .iter()
                .map(MachineView::from)
                .collect(),
            MachineApi::OpenShift => self
                .os_machines(&id.namespace)
                .list(&lp)
                .await?
                .items
                .iter()
                .map(MachineView::from)
                .collect(),
        })
    }

    pub(crate) async fn get_machine(
        &self,
        api: MachineApi,
        key: &MachineKey,
    ) -> Result<Option<MachineView>, Error> {
        Ok(match api {
            MachineApi::Capi => self
                .capi_machines(&key.namespace)
                .get_opt(&key.name)
                .await?
                .as_ref()
                .map(MachineView::from),
            MachineApi::OpenShift => self
                .os_machines(&key.namespace)
                .get_opt(&key.name)
                .await?
                .as_ref()
                .map(MachineView::from),
        })
    }

    /// Sets `spec.replicas` through the scale subresource, only if the resource is still at
    /// `resource_version`.
    pub(crate) async fn write_replicas(
        &self,
        id: &ResourceId,
        resource_version: &str,
        replicas: i32,
    ) -> Result<(), WriteError> {
        let scale = Scale {
            metadata: ObjectMeta {
                name: Some(id.name.clone()),
                namespace: Some(id.namespace.clone()),
                resource_version: Some(resource_version.to_string()),
                ..ObjectMeta::default()
            },
            spec: Some(ScaleSpec {
                replicas: Some(replicas),
            }),
            status: None,
        };
        let pp = PostParams::default();
        let (ns, name) = (id.namespace.as_str(), id.name.as_str());
        match id.kind {
            ResourceKind::MachineDeployment => {
                self.md(ns).replace_scale(name, &pp, &scale).await?;
            }
            ResourceKind::MachineSet => {
                self.ms(ns).replace_scale(name, &pp, &scale).await?;
            }
            ResourceKind::OpenShiftMachineSet => {
                self.os_ms(ns).replace_scale(name, &pp, &scale).await?;
            }
        }
        Ok(())
    }

    /// Removes the taints with `key` from an OpenShift Machine's `spec.taints`, guarded by its
    /// resourceVersion. `Ok(false)`: the Machine is gone or has no such taint.
    pub(crate) async fn drop_openshift_machine_taint(
        &self,
        machine: &MachineKey,
        key: &str,
    ) -> Result<bool, kube::Error> {
        let api = self.os_machines(&machine.namespace);
        let Some(m) = api.get_opt(&machine.name).await? else {
            return Ok(false);
        };
        let before = m.spec.taints.len();
        let rest: Vec<_> = m.spec.taints.into_iter().filter(|t| t.key != key).collect();
        if rest.len() == before {
            return Ok(false);
        }
        let patch = serde_json::json!({
            "metadata": {"resourceVersion": m.metadata.resource_version},
            "spec": {"taints": rest},
        });
        api.patch(
            &machine.name,
            &PatchParams::default(),
            &Patch::Merge(&patch),
        )
        .await?;
        Ok(true)
    }

    /// A JSON merge patch on a Machine (metadata only, by contract of the callers).
    pub(crate) async fn patch_machine(
        &self,
        api: MachineApi,
        key: &MachineKey,
        patch: &serde_json::Value,
    ) -> Result<(), kube::Error> {
        let pp = PatchParams::default();
        let patch = Patch::Merge(patch);
        match api {
            MachineApi::Capi => {
                self.capi_machines(&key.namespace)
                    .patch(&key.name, &pp, &patch)
                    .await?;
            }
            MachineApi::OpenShift => {
                self.os_machines(&key.namespace)
                    .patch(&key.name, &pp, &patch)
                    .await?;
            }
        }
        Ok(())
    }
}

fn rv(meta: &ObjectMeta) -> String {
    meta.resource_version.clone().unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unserved_kind_is_not_an_error() {
        let bare = kube::Error::Api(Box::new(
            kube::core::Status::failure("404 page not found", "Failed to parse error data")
                .with_code(404),
        ));
        assert!(kind_not_served(&bare));
        assert!(is_not_found(&bare));
        let forbidden = kube::Error::Api(Box::new(
            kube::core::Status::failure("forbidden", "Forbidden").with_code(403),
        ));
        assert!(!kind_not_served(&forbidden));
    }
}
