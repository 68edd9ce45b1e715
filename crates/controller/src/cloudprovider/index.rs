//! Machines by providerID, kept current by watches, so finding the Machine behind a Node or
//! NodeClaim is a map lookup instead of a list scan over every Machine.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};

use capi_adapter::objects::capi::{self, CapiVersion};
use capi_adapter::objects::openshift;
use capi_adapter::{MachineApi, MachineKey, MachineView};
use futures::StreamExt;
use kube::runtime::watcher::{self, Event};
use kube::{Api, Client};
use tokio::task::JoinHandle;

/// Where a providerID's Machine is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndexedMachine {
    pub api: MachineApi,
    pub key: MachineKey,
}

type Map = HashMap<String, IndexedMachine>;

/// providerID -> Machine. Cheap to clone (shared map).
#[derive(Debug, Clone, Default)]
pub struct ProviderIdIndex {
    map: Arc<RwLock<Map>>,
}

/// The watch tasks feeding an index; dropping it stops them.
#[derive(Debug)]
pub struct IndexWatches {
    tasks: Vec<JoinHandle<()>>,
}

impl Drop for IndexWatches {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

impl ProviderIdIndex {
    pub fn get(&self, provider_id: &str) -> Option<IndexedMachine> {
        self.map
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(provider_id)
            .cloned()
    }

    pub fn len(&self) -> usize {
        self.map.read().unwrap_or_else(|e| e.into_inner()).len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Records (or forgets, when it has no providerID or is gone) one Machine.
    pub fn upsert(&self, m: &MachineView) {
        let mut map = self.map.write().unwrap_or_else(|e| e.into_inner());
        let key = m.key();
        map.retain(|_, v| !(v.api == m.api && v.key == key));
        if let Some(pid) = &m.provider_id {
            map.insert(pid.clone(), IndexedMachine { api: m.api, key });
        }
    }

    pub fn remove(&self, m: &MachineView) {
        let key = m.key();
        self.map
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .retain(|_, v| !(v.api == m.api && v.key == key));
    }

    fn replace_api(&self, api: MachineApi, machines: &[MachineView]) {
        let mut map = self.map.write().unwrap_or_else(|e| e.into_inner());
        map.retain(|_, v| v.api != api);
        for m in machines {
            if let Some(pid) = &m.provider_id {
                map.insert(pid.clone(), IndexedMachine { api, key: m.key() });
            }
        }
    }

    /// Starts watches on CAPI Machines (at `version`) and, if asked, OpenShift Machines,
    /// across namespaces. A watch on an API that is not served just keeps retrying with
    /// back-off, so starting both is harmless.
    pub fn watch(&self, client: Client, version: CapiVersion, openshift: bool) -> IndexWatches {
        let mut tasks = Vec::new();
        let idx = self.clone();
        let capi_api: Api<capi::Machine> = Api::all_with(client.clone(), &version);
        tasks.push(tokio::spawn(async move {
            run(idx, MachineApi::Capi, capi_api, |m: &capi::Machine| {
                MachineView::from(m)
            })
            .await
        }));
        if openshift {
            let idx = self.clone();
            let os_api: Api<openshift::Machine> = Api::all(client);
            tasks.push(tokio::spawn(async move {
                run(
                    idx,
                    MachineApi::OpenShift,
                    os_api,
                    |m: &openshift::Machine| MachineView::from(m),
                )
                .await
            }));
        }
        IndexWatches { tasks }
    }
}

async fn run<K>(
    idx: ProviderIdIndex,
    api_kind: MachineApi,
    api: Api<K>,
    view: fn(&K) -> MachineView,
) where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug + Send + 'static,
    K::DynamicType: Default + Clone + Eq + std::hash::Hash,
{
    use kube::runtime::WatchStreamExt;
    let mut initial: Vec<MachineView> = Vec::new();
    let stream = watcher::watcher(api, watcher::Config::default()).default_backoff();
    futures::pin_mut!(stream);
    while let Some(event) = stream.next().await {
        match event {
            Ok(Event::Init) => initial.clear(),
            Ok(Event::InitApply(m)) => initial.push(view(&m)),
            Ok(Event::InitDone) => idx.replace_api(api_kind, &std::mem::take(&mut initial)),
            Ok(Event::Apply(m)) => idx.upsert(&view(&m)),
            Ok(Event::Delete(m)) => idx.remove(&view(&m)),
            Err(e) => tracing::debug!(error = %e, api = ?api_kind, "machine watch error"),
        }
    }
}
