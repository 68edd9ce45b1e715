//! Instance catalogs: built-in samples, the shared CSV format, inline types; and the node
//! overhead that turns capacity into allocatable (without it the simulation overpacks nodes).

use std::collections::BTreeMap;
use std::path::Path;

use provisioner_core as core;

use crate::csv_table::CsvTable;
use crate::error::Result;
use crate::quantity;
use crate::scenario::{
    BuiltinCatalog, CapacityTypeName, InstanceTypeSpec, LoadedScenario, OverheadSpec,
};

/// Extended resource name GPUs are requested under.
pub const GPU: &str = "nvidia.com/gpu";
const MIB: i64 = 1 << 20;

/// The project's own EC2-like sample: three families (general 4 GiB/vCPU, compute 2 GiB/vCPU,
/// memory 8 GiB/vCPU) in seven sizes (2 to 128 vCPU), on amd64 and on a ~20% cheaper arm64. Prices are round
/// per-vCPU rates chosen to sit in the range of public list prices; they are illustrative.
pub fn ec2_sample() -> Vec<InstanceTypeSpec> {
    let families: [(&str, i64, f64); 3] =
        [("gen1", 4, 0.048), ("cpu1", 2, 0.0425), ("mem1", 8, 0.063)];
    let sizes: [(&str, i64); 7] = [
        ("large", 2),
        ("xlarge", 4),
        ("2xlarge", 8),
        ("4xlarge", 16),
        ("8xlarge", 32),
        ("16xlarge", 64),
        ("32xlarge", 128),
    ];
    let mut out = Vec::new();
    for (arch, suffix, factor) in [("amd64", "", 1.0), ("arm64", "g", 0.8)] {
        for (fam, gib_per_cpu, per_cpu) in families {
            for (size, vcpu) in sizes {
                out.push(InstanceTypeSpec {
                    name: format!("{fam}{suffix}.{size}"),
                    vcpu: vcpu as f64,
                    memory_mib: vcpu * gib_per_cpu * 1024,
                    gpu: 0,
                    arch: arch.to_string(),
                    price: round4(vcpu as f64 * per_cpu * factor),
                    spot_price: None,
                    zones: None,
                    labels: BTreeMap::new(),
                });
            }
        }
    }
    out
}

/// Karpenter's scheduling benchmark catalog: 400 types, type i with i+1 vCPU and 2(i+1) GiB,
/// priced linearly in size so larger is never cheaper per unit.
pub fn karpenter_benchmark() -> Vec<InstanceTypeSpec> {
    (0..400)
        .map(|i| {
            let n = (i + 1) as f64;
            InstanceTypeSpec {
                name: format!("fake-it-{i}"),
                vcpu: n,
                memory_mib: 2 * (i + 1) * 1024,
                gpu: 0,
                arch: "amd64".into(),
                // A small per-node fixed cost makes many tiny nodes worse than one fitting node.
                price: round4(0.01 + 0.04 * n),
                spot_price: None,
                zones: None,
                labels: BTreeMap::new(),
            }
        })
        .collect()
}

fn round4(x: f64) -> f64 {
    (x * 10_000.0).round() / 10_000.0
}

/// Read `instance_type, vcpu, memory_mib, gpu, arch, on_demand_usd_per_hour` rows.
pub fn load_csv(path: &Path) -> Result<Vec<InstanceTypeSpec>> {
    let table = CsvTable::open(path)?;
    let (c_name, c_vcpu, c_mem, c_price) = (
        table.column("instance_type")?,
        table.column("vcpu")?,
        table.column("memory_mib")?,
        table.column("on_demand_usd_per_hour")?,
    );
    let c_gpu = table.optional_column("gpu");
    let c_arch = table.optional_column("arch");
    let mut out = Vec::new();
    for row in table.rows() {
        let row = row?;
        out.push(InstanceTypeSpec {
            name: row.required(c_name, "instance_type")?.to_string(),
            vcpu: row.number(c_vcpu, "vcpu")?,
            memory_mib: row.number(c_mem, "memory_mib")? as i64,
            gpu: match c_gpu {
                Some(i) => row.number(i, "gpu")? as i64,
                None => 0,
            },
            arch: match c_arch {
                Some(i) => row.required(i, "arch")?.to_string(),
                None => "amd64".into(),
            },
            price: row.number(c_price, "on_demand_usd_per_hour")?,
            spot_price: None,
            zones: None,
            labels: BTreeMap::new(),
        });
    }
    Ok(out)
}

/// kube-reserved + system-reserved + eviction threshold for a node of this size.
pub fn overhead(spec: &OverheadSpec, vcpu: f64, max_pods: i64) -> Result<core::Resources> {
    Ok(match spec {
        OverheadSpec::None => core::Resources::default(),
        OverheadSpec::Fixed { cpu, memory } => core::Resources {
            cpu_milli: quantity::cpu_milli(cpu)?,
            memory: quantity::count(memory)?,
            ..Default::default()
        },
        OverheadSpec::Karpenter => {
            let cores = vcpu;
            let mut cpu = 0.0;
            // (up to core count, fraction reserved of each core in that band)
            for (lo, hi, frac) in [
                (0.0, 1.0, 0.06),
                (1.0, 2.0, 0.01),
                (2.0, 4.0, 0.005),
                (4.0, f64::MAX, 0.0025),
            ] {
                if cores > lo {
                    cpu += (cores.min(hi) - lo) * 1000.0 * frac;
                }
            }
            core::Resources {
                cpu_milli: cpu.ceil() as i64,
                memory: (11 * max_pods + 255 + 100) * MIB,
                ..Default::default()
            }
        }
    })
}

/// Every catalog type of the scenario as core instance types with offerings.
pub fn build(ls: &LoadedScenario) -> Result<Vec<core::InstanceType>> {
    let s = &ls.scenario;
    let cat = &s.catalog;
    let mut specs: Vec<InstanceTypeSpec> = Vec::new();
    match cat.builtin {
        Some(BuiltinCatalog::Ec2Sample) => specs.extend(ec2_sample()),
        Some(BuiltinCatalog::KarpenterBenchmark) => specs.extend(karpenter_benchmark()),
        None => {}
    }
    if let Some(csv_path) = &cat.csv {
        let p = ls.resolve(csv_path);
        // Name the scenario and its field: the CSV's own path alone does not say who asked.
        let mut loaded = load_csv(&p).map_err(|e| ls.invalid("catalog.csv", e.to_string()))?;
        if !cat.name_prefixes.is_empty() {
            loaded.retain(|t| {
                cat.name_prefixes
                    .iter()
                    .any(|p| t.name.starts_with(p.as_str()))
            });
        }
        specs.extend(loaded);
    }
    specs.extend(cat.types.iter().cloned());
    if specs.is_empty() {
        return Err(ls.invalid(
            "catalog",
            "the catalog is empty: set `builtin`, `csv` or `types`",
        ));
    }
    if s.zones.is_empty() {
        return Err(ls.invalid("zones", "at least one zone is needed"));
    }
    let max_pods = cat.max_pods.unwrap_or(110);
    let mut seen = BTreeMap::new();
    let mut out = Vec::with_capacity(specs.len());
    for (i, t) in specs.iter().enumerate() {
        let field = format!(
            "catalog.types[{}]",
            i.saturating_sub(specs.len() - cat.types.len())
        );
        if seen.insert(t.name.clone(), ()).is_some() {
            return Err(ls.invalid(
                &field,
                format!("instance type `{}` is listed twice", t.name),
            ));
        }
        let positive = t.vcpu > 0.0 && t.price >= 0.0 && t.price.is_finite();
        if !positive || t.memory_mib <= 0 || t.gpu < 0 {
            return Err(ls.invalid(
                &field,
                format!(
                    "instance type `{}` needs vcpu > 0, memoryMib > 0, price >= 0, gpu >= 0",
                    t.name
                ),
            ));
        }
        let capacity = core::Resources {
            cpu_milli: (t.vcpu * 1000.0).round() as i64,
            memory: t.memory_mib * MIB,
            pods: max_pods,
            ephemeral_storage: 0,
            extended: if t.gpu > 0 {
                BTreeMap::from([(GPU.to_string(), t.gpu)])
            } else {
                BTreeMap::new()
            },
        };
        let ov = overhead(&cat.overhead, t.vcpu, max_pods)
            .map_err(|e| ls.invalid("catalog.overhead", e.to_string()))?;
        let mut labels = t.labels.clone();
        labels.insert(core::labels::ARCH.into(), t.arch.clone());
        labels.insert(core::labels::OS.into(), "linux".into());
        let zones = t.zones.clone().unwrap_or_else(|| s.zones.clone());
        let mut offerings = Vec::new();
        for z in &zones {
            for ct in &s.capacity_types {
                let price = match ct {
                    CapacityTypeName::OnDemand | CapacityTypeName::Reserved => Some(t.price),
                    CapacityTypeName::Spot => t
                        .spot_price
                        .or(cat.spot_price_factor.map(|f| round4(f * t.price))),
                };
                if let Some(price) = price {
                    offerings.push(core::Offering {
                        zone: z.clone(),
                        capacity_type: (*ct).into(),
                        price,
                        priced: true,
                        available: true,
                    });
                }
            }
        }
        out.push(core::InstanceType {
            name: t.name.clone(),
            capacity,
            overhead: ov,
            labels,
            taints: Vec::new(),
            offerings,
            csi_limits: BTreeMap::new(),
        });
    }
    Ok(out)
}

/// Allocatable of a type: capacity minus overhead, never negative.
pub fn allocatable(it: &core::InstanceType) -> core::Resources {
    let c = &it.capacity;
    let o = &it.overhead;
    core::Resources {
        cpu_milli: (c.cpu_milli - o.cpu_milli).max(0),
        memory: (c.memory - o.memory).max(0),
        pods: (c.pods - o.pods).max(0),
        ephemeral_storage: (c.ephemeral_storage - o.ephemeral_storage).max(0),
        extended: c
            .extended
            .iter()
            .map(|(k, v)| {
                (
                    k.clone(),
                    (v - o.extended.get(k).copied().unwrap_or(0)).max(0),
                )
            })
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sample_has_three_dozen_types() {
        let s = ec2_sample();
        assert_eq!(s.len(), 42);
        assert!(s.iter().all(|t| t.price > 0.0));
    }

    #[test]
    fn benchmark_catalog_shape() {
        let b = karpenter_benchmark();
        assert_eq!(b.len(), 400);
        assert_eq!(b[0].vcpu, 1.0);
        assert_eq!(b[399].memory_mib, 800 * 1024);
    }

    #[test]
    fn karpenter_overhead() -> Result<()> {
        let o = overhead(&OverheadSpec::Karpenter, 2.0, 110)?;
        assert_eq!(o.cpu_milli, 70);
        assert_eq!(o.memory, (11 * 110 + 355) * MIB);
        let o = overhead(&OverheadSpec::Karpenter, 8.0, 110)?;
        assert_eq!(o.cpu_milli, 90);
        Ok(())
    }

    #[test]
    fn loads_shared_csv_when_present() -> Result<()> {
        let p = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../../shared/data/aws-ec2-us-east-1.csv");
        if !p.exists() {
            // Absent data is a failure, not a silent pass, unless asked (as the simulator's
            // integration tests do).
            assert!(
                std::env::var("KCAPI_ALLOW_MISSING_DATA").is_ok_and(|v| v == "1"),
                "{} not found: the shared data directory must sit beside the checkout (or set KCAPI_ALLOW_MISSING_DATA=1 to skip)",
                p.display()
            );
            println!("SKIPPED: {} not found", p.display());
            return Ok(());
        }
        let types = load_csv(&p)?;
        assert!(types.len() > 1000, "{}", types.len());
        assert!(types.iter().any(|t| t.name == "m5.large" && t.vcpu == 2.0));
        Ok(())
    }
}
