//! Real inputs for the optimiser benchmarks and the quality report: the EC2 us-east-1 catalog
//! and the Alibaba openb pod trace (`../shared/data`, see its README), turned directly into a
//! [`PackingProblem`] (one NodePool, one zone, on-demand), plus synthetic CPU-/memory-heavy
//! mixes.
//!
//! Allocatable follows Karpenter's AWS provider defaults:
//! - memory capacity = the type's memory less the VM overhead, `ceil(7.5%)` of it
//!   (`VM_MEMORY_OVERHEAD_PERCENT` = 0.075);
//! - kube-reserved CPU: 6% of the first core, 1% of the second, 0.5% of cores 3-4, 0.25% of
//!   every core above 4;
//! - kube-reserved memory: `11 MiB x maxPods + 255 MiB`;
//! - eviction threshold (`memory.available`): 100 MiB;
//! - maxPods: 110 for every type (Karpenter's rule derives it from ENI limits, which the CSV does
//!   not carry; 110 is the kubelet default and never binds for the pods used here).
//!
//! No daemonsets: every pod slot and every millicore past the overhead is for the round's pods.

use std::path::{Path, PathBuf};

use provisioner_core::packing::{PackItem, PackPool, PackingProblem, Shape};
use provisioner_core::{CapacityType, Resources};

const MIB: i64 = 1 << 20;

/// Pods per node (see the module doc).
pub const MAX_PODS: i64 = 110;

/// Why an input could not be read.
#[derive(Debug, thiserror::Error)]
pub enum CatalogError {
    #[error("reading {path}: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
    #[error("{path} line {line}: {message}")]
    Parse {
        path: String,
        line: usize,
        message: String,
    },
}

/// One EC2 instance type from the catalog.
#[derive(Debug, Clone, PartialEq)]
pub struct Ec2Type {
    pub name: String,
    pub vcpu: i64,
    pub memory_mib: i64,
    pub gpu: i64,
    pub arch: String,
    pub price: f64,
}

/// A pod's requests from the openb trace.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TracePod {
    pub cpu_milli: i64,
    pub memory_mib: i64,
    pub num_gpu: i64,
}

/// `../shared/data` relative to the workspace root, or `$KCAPI_DATA` when set.
pub fn data_dir() -> PathBuf {
    if let Some(d) = std::env::var_os("KCAPI_DATA") {
        return PathBuf::from(d);
    }
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/data")
}

fn read(path: &Path) -> Result<String, CatalogError> {
    std::fs::read_to_string(path).map_err(|source| CatalogError::Io {
        path: path.display().to_string(),
        source,
    })
}

/// Parses a CSV with a header and no quoting (both inputs are plain) into rows of fields by
/// header name.
fn rows(path: &Path, text: &str, need: &[&str]) -> Result<Vec<Vec<String>>, CatalogError> {
    let mut lines = text.lines();
    let header: Vec<&str> = lines
        .next()
        .unwrap_or_default()
        .split(',')
        .map(str::trim)
        .collect();
    let mut idx = Vec::new();
    for n in need {
        let Some(i) = header.iter().position(|h| h == n) else {
            return Err(CatalogError::Parse {
                path: path.display().to_string(),
                line: 1,
                message: format!("no column {n}"),
            });
        };
        idx.push(i);
    }
    let mut out = Vec::new();
    for (ln, line) in lines.enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let fields: Vec<&str> = line.split(',').collect();
        let mut row = Vec::with_capacity(idx.len());
        for &i in &idx {
            match fields.get(i) {
                Some(f) => row.push(f.trim().to_string()),
                None => {
                    return Err(CatalogError::Parse {
                        path: path.display().to_string(),
                        line: ln + 2,
                        message: format!("missing field {i}"),
                    });
                }
            }
        }
        out.push(row);
    }
    Ok(out)
}

fn num<T: std::str::FromStr>(path: &Path, line: usize, s: &str) -> Result<T, CatalogError> {
    s.parse().map_err(|_| CatalogError::Parse {
        path: path.display().to_string(),
        line,
        message: format!("not a number: {s:?}"),
    })
}

/// Loads `aws-ec2-us-east-1.csv`.
pub fn load_ec2(path: &Path) -> Result<Vec<Ec2Type>, CatalogError> {
    let text = read(path)?;
    let rows = rows(
        path,
        &text,
        &[
            "instance_type",
            "vcpu",
            "memory_mib",
            "gpu",
            "arch",
            "on_demand_usd_per_hour",
        ],
    )?;
    let mut out = Vec::with_capacity(rows.len());
    for (i, r) in rows.iter().enumerate() {
        let line = i + 2;
        let [name, vcpu, mem, gpu, arch, price] = r.as_slice() else {
            continue;
        };
        out.push(Ec2Type {
            name: name.clone(),
            vcpu: num(path, line, vcpu)?,
            memory_mib: num(path, line, mem)?,
            gpu: num(path, line, gpu)?,
            arch: arch.clone(),
            price: num(path, line, price)?,
        });
    }
    Ok(out)
}

/// Loads the openb pod list (`openb_pod_list_default.csv`).
pub fn load_openb(path: &Path) -> Result<Vec<TracePod>, CatalogError> {
    let text = read(path)?;
    let rows = rows(path, &text, &["cpu_milli", "memory_mib", "num_gpu"])?;
    let mut out = Vec::with_capacity(rows.len());
    for (i, r) in rows.iter().enumerate() {
        let line = i + 2;
        let [cpu, mem, gpu] = r.as_slice() else {
            continue;
        };
        out.push(TracePod {
            cpu_milli: num(path, line, cpu)?,
            memory_mib: num(path, line, mem)?,
            num_gpu: num(path, line, gpu)?,
        });
    }
    Ok(out)
}

/// Karpenter's kube-reserved CPU in millicores for `vcpu` cores.
pub fn kube_reserved_cpu_milli(vcpu: i64) -> i64 {
    let cpu = vcpu * 1000;
    let ranges: [(i64, i64, f64); 4] = [
        (0, 1000, 0.06),
        (1000, 2000, 0.01),
        (2000, 4000, 0.005),
        (4000, i64::MAX, 0.0025),
    ];
    let mut reserved = 0;
    for (start, end, pct) in ranges {
        if cpu >= start {
            let span = if cpu < end { cpu - start } else { end - start };
            reserved += (span as f64 * pct) as i64;
        }
    }
    reserved
}

/// Capacity and allocatable of an EC2 type (see the module doc).
pub fn allocatable(t: &Ec2Type) -> (Resources, Resources) {
    let mem_mib = t.memory_mib - (t.memory_mib as f64 * 0.075).ceil() as i64;
    let capacity = Resources::with_pods(t.vcpu * 1000, mem_mib * MIB, MAX_PODS);
    let reserved_mem = (11 * MAX_PODS + 255) * MIB + 100 * MIB;
    let alloc = Resources::with_pods(
        capacity.cpu_milli - kube_reserved_cpu_milli(t.vcpu),
        capacity.memory - reserved_mem,
        MAX_PODS,
    );
    (capacity, alloc)
}

/// The catalog as launch shapes of one unlimited NodePool in one zone, on-demand.
pub fn shapes(types: &[Ec2Type]) -> Vec<Shape> {
    types
        .iter()
        .enumerate()
        .filter(|(_, t)| t.price > 0.0 && t.vcpu > 0)
        .map(|(i, t)| {
            let (capacity, alloc) = allocatable(t);
            Shape {
                pool: 0,
                instance_type: i as u32,
                instance_type_name: t.name.clone(),
                zone: "us-east-1a".into(),
                capacity_type: CapacityType::OnDemand,
                price: t.price,
                capacity,
                allocatable: alloc,
                daemonset_requests: Resources::default(),
                min_value_labels: Default::default(),
            }
        })
        .collect()
}

/// A packing problem of `requests` on `shapes` (one pool, every item may use every shape).
pub fn problem(shapes: Vec<Shape>, requests: &[Resources]) -> PackingProblem {
    let items = requests
        .iter()
        .enumerate()
        .map(|(i, r)| PackItem {
            pods: vec![i as u32],
            requests: Resources {
                pods: 1,
                ..r.clone()
            },
            shape_set: 0,
            member_of: Vec::new(),
            limits: Vec::new(),
            arrival_limits: Vec::new(),
        })
        .collect();
    PackingProblem::new(shapes, vec![PackPool::unlimited("default")], items)
}

/// The requests of trace pods (CPU and memory only: GPUs are ignored, as the issue asks).
pub fn trace_requests(pods: &[TracePod]) -> Vec<Resources> {
    pods.iter()
        .map(|p| Resources::with_pods(p.cpu_milli, p.memory_mib * MIB, 1))
        .collect()
}

/// A deterministic mix of deployments: `cpu_heavy` pods drawn from 8 CPU-heavy templates (1, 2,
/// 4 or 8 vCPU at 1 or 2 GiB per vCPU) and `mem_heavy` pods from 12 memory-heavy ones (0.25,
/// 0.5, 1 or 2 vCPU at 6, 8 or 16 GiB per vCPU). Replicas of a deployment share their
/// requests, so a round has few distinct request vectors; `synthetic_random` covers the
/// opposite case.
pub fn synthetic_mix(cpu_heavy: usize, mem_heavy: usize, seed: u64) -> Vec<Resources> {
    let mut rng = Rng(seed);
    let cpu_templates: Vec<(i64, i64)> = [1000, 2000, 4000, 8000]
        .iter()
        .flat_map(|c| [1024, 2048].map(move |g| (*c, g)))
        .collect();
    let mem_templates: Vec<(i64, i64)> = [250, 500, 1000, 2000]
        .iter()
        .flat_map(|c| [6144, 8192, 16384].map(move |g| (*c, g)))
        .collect();
    let mut out = Vec::with_capacity(cpu_heavy + mem_heavy);
    for (n, templates) in [(cpu_heavy, &cpu_templates), (mem_heavy, &mem_templates)] {
        for _ in 0..n {
            let (cpu, per) = templates[rng.below(templates.len())];
            out.push(Resources::with_pods(cpu, cpu * per / 1000 * MIB, 1));
        }
    }
    // Interleave deterministically so the input order carries no hint.
    let n = out.len();
    for i in (1..n).rev() {
        let j = rng.below(i + 1);
        out.swap(i, j);
    }
    out
}

/// Continuous random requests (every pod distinct): exercises coarsening of large rounds.
pub fn synthetic_random(n: usize, seed: u64) -> Vec<Resources> {
    let mut rng = Rng(seed);
    (0..n)
        .map(|_| {
            let cpu = 100 + rng.below(7900) as i64;
            let mem = 128 + rng.below(32 * 1024 - 128) as i64;
            Resources::with_pods(cpu, mem * MIB, 1)
        })
        .collect()
}

/// splitmix64: a deterministic generator so every run sees the same workload.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: usize) -> usize {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        ((z ^ (z >> 31)) % n.max(1) as u64) as usize
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kube_reserved_cpu_matches_karpenter() {
        assert_eq!(kube_reserved_cpu_milli(1), 60);
        assert_eq!(kube_reserved_cpu_milli(2), 70);
        assert_eq!(kube_reserved_cpu_milli(4), 80);
        assert_eq!(kube_reserved_cpu_milli(8), 90);
        assert_eq!(kube_reserved_cpu_milli(96), 310);
    }

    #[test]
    fn m5_large_allocatable() {
        let t = Ec2Type {
            name: "m5.large".into(),
            vcpu: 2,
            memory_mib: 8192,
            gpu: 0,
            arch: "amd64".into(),
            price: 0.096,
        };
        let (cap, alloc) = allocatable(&t);
        assert_eq!(cap.memory, (8192 - 615) * MIB);
        assert_eq!(alloc.cpu_milli, 1930);
        assert_eq!(alloc.memory, (8192 - 615 - 1210 - 255 - 100) * MIB);
    }
}
