//! The core's snapshot from the reflectors, through the one shared conversion
//! (`karpenter-capi-snapshot`), so what the controller decides on is exactly what
//! `karpenter-capi snapshot` writes and the simulator replays.

use kcapi_snapshot::{Built, Objects, VolumeIndex};

use crate::catalogs::Catalogs;
use crate::context::Context;

/// Builds the snapshot at `now` (seconds since the epoch), with the managed NodePools and
/// their NodeClaims only.
pub fn build(ctx: &Context, catalogs: &Catalogs, now: i64) -> Built {
    let state = &ctx.state;
    let pods = state.pods.state();
    let nodes = state.nodes.state();
    let claims = ctx.nodeclaims();
    let nodepools = ctx.nodepools();
    let daemonsets = state.daemonsets.state();
    let pdbs = state.pdbs.state();
    let namespaces = state.namespaces.state();
    let csinodes = state.csinodes.state();
    let volumes = VolumeIndex::new(
        state.pvcs.state().iter().map(|x| (**x).clone()),
        state.pvs.state().iter().map(|x| (**x).clone()),
        state.storageclasses.state().iter().map(|x| (**x).clone()),
    );
    let objects = Objects {
        now,
        pods: pods.iter().map(|p| &p.0).collect(),
        nodes: nodes.iter().map(AsRef::as_ref).collect(),
        nodeclaims: claims.iter().map(AsRef::as_ref).collect(),
        nodepools: nodepools.iter().map(AsRef::as_ref).collect(),
        daemonsets: daemonsets.iter().map(AsRef::as_ref).collect(),
        pdbs: pdbs.iter().map(AsRef::as_ref).collect(),
        namespaces: namespaces.iter().map(AsRef::as_ref).collect(),
        csinodes: csinodes.iter().map(AsRef::as_ref).collect(),
        volumes,
        instance_types: catalogs.instance_types(),
        nodepool_instance_types: catalogs.nodepool_types(&nodepools),
        all_pending: false,
    };
    let mut built = kcapi_snapshot::build(&objects);
    built.snapshot.ended_pods = state.lifetimes.recent();
    built.snapshot.observed_since = state.lifetimes.observed_since();
    built.snapshot.recent_evictions = state.lifetimes.recent_evictions(built.snapshot.now);
    state.lifetimes.note_replacements(&built.snapshot);
    built
}
