//! Instance types per NodeClass, read from the management cluster and cached for a few
//! seconds: one provisioning round and the launches that follow it share one read instead of
//! listing every scalable resource and template per NodeClaim.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use capi_adapter::Catalog;
use karpenter_api::NodePool;
use karpenter_api::nodeclass::ClusterAPINodeClass;
use kube::ResourceExt;
use provisioner_core::InstanceType;
use tokio::sync::Mutex;
use tokio::time::Instant;

use crate::cloudprovider::CloudProvider;

/// The catalogs of every NodeClass at one instant.
#[derive(Debug, Clone, Default)]
pub struct Catalogs {
    pub by_nodeclass: BTreeMap<String, Arc<Catalog>>,
    /// NodeClasses whose catalog could not be read (the management API refused, CAPI CRDs
    /// missing, ...), with the error.
    pub errors: BTreeMap<String, String>,
}

impl Catalogs {
    /// Every instance type of every NodeClass, each name once.
    pub fn instance_types(&self) -> Vec<InstanceType> {
        let mut seen = BTreeMap::new();
        for c in self.by_nodeclass.values() {
            for it in &c.instance_types {
                seen.entry(it.name.clone()).or_insert_with(|| it.clone());
            }
        }
        seen.into_values().collect()
    }

    /// The NodeClass a NodePool launches through, if it is ours.
    pub fn nodeclass_of(np: &NodePool) -> Option<String> {
        let r = &np.spec.template.spec.node_class_ref;
        (r.kind == karpenter_api::wellknown::NODECLASS_KIND).then(|| r.name.clone())
    }

    /// Per NodePool, the instance types its NodeClass offers (none when the NodeClass is
    /// missing or not ours: such a pool launches nothing).
    pub fn nodepool_types(&self, nodepools: &[Arc<NodePool>]) -> BTreeMap<String, Vec<String>> {
        nodepools
            .iter()
            .map(|np| {
                let types = Self::nodeclass_of(np)
                    .and_then(|nc| self.by_nodeclass.get(&nc))
                    .map(|c| c.instance_types.iter().map(|t| t.name.clone()).collect())
                    .unwrap_or_default();
                (np.name_any(), types)
            })
            .collect()
    }
}

/// A short-lived cache in front of [`CloudProvider::catalog`].
#[derive(Debug)]
pub struct CatalogCache {
    ttl: Duration,
    cached: Mutex<Option<(Instant, Catalogs)>>,
}

impl CatalogCache {
    pub fn new(ttl: Duration) -> Self {
        CatalogCache {
            ttl,
            cached: Mutex::new(None),
        }
    }

    /// Forget the cache (after a launch changed replicas, or a NodeClass changed).
    pub async fn invalidate(&self) {
        *self.cached.lock().await = None;
    }

    /// The catalogs of these NodeClasses, from cache when fresh.
    pub async fn get(
        &self,
        cloud: &CloudProvider,
        nodeclasses: &[Arc<ClusterAPINodeClass>],
        now: i64,
    ) -> Catalogs {
        let mut guard = self.cached.lock().await;
        if let Some((at, c)) = guard.as_ref()
            && at.elapsed() < self.ttl
            && nodeclasses.iter().all(|nc| {
                c.by_nodeclass.contains_key(&nc.name_any()) || c.errors.contains_key(&nc.name_any())
            })
        {
            return c.clone();
        }
        let mut out = Catalogs::default();
        for nc in nodeclasses {
            match cloud.catalog(nc, now).await {
                Ok(c) => {
                    out.by_nodeclass.insert(nc.name_any(), Arc::new(c));
                }
                Err(e) => {
                    tracing::warn!(nodeclass = %nc.name_any(), error = %e, "could not read scalable resources");
                    out.errors.insert(nc.name_any(), e.to_string());
                }
            }
        }
        *guard = Some((Instant::now(), out.clone()));
        out
    }
}
