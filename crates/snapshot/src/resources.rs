//! Resource lists (`cpu: 500m`, `memory: 4Gi`) -> the core's integer [`core::Resources`],
//! with the adapter's exact parser (rounded up to the base unit, as the API server does).

use std::collections::BTreeMap;

use capi_adapter::quantity::{self, QuantityError};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use provisioner_core as core;

use crate::error::{ConvertError, Result};

/// Plain-string requests (scenario files) -> core resources.
pub fn resources(map: &BTreeMap<String, String>, field: &str) -> Result<core::Resources> {
    resource_list(map.iter().map(|(k, v)| (k, v.as_str())), field)
}

/// A resource list (name -> quantity text) -> core resources; errors name `field.<name>`. One
/// reader for pod requests (plain strings) and NodePool limits (Kubernetes `Quantity`s).
pub fn resource_list<'a>(
    entries: impl IntoIterator<Item = (&'a String, &'a str)>,
    field: &str,
) -> Result<core::Resources> {
    let mut r = core::Resources::default();
    for (k, v) in entries {
        let err = |e: QuantityError| ConvertError::new(format!("{field}.{k}"), e.to_string());
        match k.as_str() {
            "cpu" => r.cpu_milli = quantity::parse_milli(v).map_err(err)?,
            "memory" => r.memory = quantity::parse_units(v).map_err(err)?,
            "pods" => r.pods = quantity::parse_units(v).map_err(err)?,
            "ephemeral-storage" => r.ephemeral_storage = quantity::parse_units(v).map_err(err)?,
            other => {
                r.extended
                    .insert(other.to_string(), quantity::parse_units(v).map_err(err)?);
            }
        }
    }
    Ok(r)
}

/// A Kubernetes `ResourceList` (pod requests, node capacity, NodeClaim status) -> core
/// resources; errors name `field.<name>`.
pub fn quantities(
    list: Option<&BTreeMap<String, Quantity>>,
    field: &str,
) -> Result<core::Resources> {
    resource_list(
        list.into_iter().flatten().map(|(k, v)| (k, v.0.as_str())),
        field,
    )
}

/// Core resources -> a Kubernetes `ResourceList` (NodeClaim requests, status, NodePool usage).
/// Zero entries are left out, as kubelets and upstream Karpenter do.
pub fn to_quantities(r: &core::Resources) -> BTreeMap<String, Quantity> {
    let mut out = BTreeMap::new();
    let mut put = |k: &str, v: String, nonzero: bool| {
        if nonzero {
            out.insert(k.to_string(), Quantity(v));
        }
    };
    put("cpu", format_milli(r.cpu_milli), r.cpu_milli != 0);
    put("memory", format_bytes(r.memory), r.memory != 0);
    put("pods", r.pods.to_string(), r.pods != 0);
    put(
        "ephemeral-storage",
        format_bytes(r.ephemeral_storage),
        r.ephemeral_storage != 0,
    );
    for (k, v) in &r.extended {
        put(k, v.to_string(), *v != 0);
    }
    out
}

/// Millicores in the shortest exact spelling (`2`, `1500m`).
fn format_milli(m: i64) -> String {
    if m % 1000 == 0 {
        (m / 1000).to_string()
    } else {
        format!("{m}m")
    }
}

/// Bytes in the largest exact binary unit (`4Gi`, `512Mi`, `1000`).
fn format_bytes(b: i64) -> String {
    for (suffix, shift) in [
        ("Ei", 60),
        ("Pi", 50),
        ("Ti", 40),
        ("Gi", 30),
        ("Mi", 20),
        ("Ki", 10),
    ] {
        if b != 0 && b % (1i64 << shift) == 0 {
            return format!("{}{suffix}", b >> shift);
        }
    }
    b.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_through_quantities() {
        let mut r = core::Resources {
            cpu_milli: 1500,
            memory: 4 << 30,
            pods: 110,
            ephemeral_storage: 1000,
            ..Default::default()
        };
        r.extended.insert("nvidia.com/gpu".into(), 2);
        let q = to_quantities(&r);
        assert_eq!(q["cpu"].0, "1500m");
        assert_eq!(q["memory"].0, "4Gi");
        assert_eq!(q["ephemeral-storage"].0, "1000");
        assert_eq!(quantities(Some(&q), "x"), Ok(r));
    }

    #[test]
    fn bad_quantity_names_its_field() {
        let mut m = BTreeMap::new();
        m.insert("cpu".to_string(), Quantity("lots".into()));
        let e = quantities(Some(&m), "spec.containers[0].resources.requests");
        assert_eq!(
            e.map_err(|e| e.field),
            Err("spec.containers[0].resources.requests.cpu".to_string())
        );
    }
}
