//! The Alibaba cluster-trace-gpu-v2023 "openb" pod list: `name, cpu_milli, memory_mib,
//! num_gpu, gpu_milli, gpu_spec, qos, pod_phase, creation_time, deletion_time,
//! scheduled_time`, times in seconds from the trace start.

use std::collections::BTreeMap;
use std::path::Path;

use provisioner_core as core;

use super::Arrival;
use crate::catalog::GPU;
use crate::csv_table::CsvTable;
use crate::error::Result;
use crate::scenario::{GpuMode, OpenbSpec};

/// Read the trace. Rows are returned in arrival order (ties by name), so runs are
/// deterministic whatever the file's order.
pub fn load(path: &Path, spec: &OpenbSpec) -> Result<Vec<Arrival>> {
    let table = CsvTable::open(path)?;
    let c_name = table.column("name")?;
    let c_cpu = table.column("cpu_milli")?;
    let c_mem = table.column("memory_mib")?;
    let c_gpu = table.column("num_gpu")?;
    let c_create = table.column("creation_time")?;
    let c_delete = table.column("deletion_time")?;
    let c_qos = table.optional_column("qos");
    let mut out = Vec::new();
    for row in table.rows() {
        let row = row?;
        let get = |i: usize| row.text(i);
        let int = |i: usize, what: &str| row.integer(i, what);
        let cpu = int(c_cpu, "cpu_milli")?;
        let mem = int(c_mem, "memory_mib")?;
        let gpus = int(c_gpu, "num_gpu")?;
        let at = int(c_create, "creation_time")?;
        let leave = match get(c_delete) {
            "" => None,
            _ => Some(int(c_delete, "deletion_time")?),
        };
        let mut extended = BTreeMap::new();
        if spec.gpu == GpuMode::Whole && gpus > 0 {
            extended.insert(GPU.to_string(), gpus);
        }
        let mut labels: core::Labels = [("app".to_string(), "openb".to_string())]
            .into_iter()
            .collect();
        if let Some(q) = c_qos.map(get).filter(|q| !q.is_empty()) {
            labels.insert("qos".into(), q.to_string());
        }
        let pod = core::Pod {
            namespace: "openb".into(),
            name: get(c_name).to_string(),
            labels,
            containers: vec![core::Resources {
                cpu_milli: cpu,
                memory: mem << 20,
                extended,
                ..Default::default()
            }],
            owner_kind: Some("ReplicaSet".into()),
            created_at: at,
            ..Default::default()
        };
        out.push(Arrival {
            pod,
            at,
            leave: leave.map(|l| l.max(at)),
            work_seconds: None,
            bound_to: None,
        });
    }
    out.sort_by(|a, b| a.at.cmp(&b.at).then_with(|| a.pod.name.cmp(&b.pod.name)));
    if let Some(limit) = spec.limit {
        out.truncate(limit);
    }
    if spec.shift_to_first_arrival
        && let Some(first) = out.first().map(|a| a.at)
    {
        for a in &mut out {
            a.at -= first;
            a.pod.created_at = a.at;
            a.leave = a.leave.map(|l| l - first);
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::SimError;

    pub(crate) fn trace_path() -> std::path::PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../../shared/data/alibaba-openb/openb_pod_list_default.csv")
    }

    #[test]
    fn reads_small_file() -> Result<()> {
        let dir = std::env::temp_dir().join(format!("openb-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).map_err(|e| SimError::io(&dir, e))?;
        let p = dir.join("t.csv");
        std::fs::write(
            &p,
            "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time\n\
             b,2000,1024,1,500,,LS,Running,100,200,100\n\
             a,1000,512,0,0,,BE,Running,50,,50\n",
        )
        .map_err(|e| SimError::io(&p, e))?;
        let spec = OpenbSpec {
            path: String::new(),
            gpu: GpuMode::Whole,
            limit: None,
            shift_to_first_arrival: true,
        };
        let a = load(&p, &spec)?;
        assert_eq!(a.len(), 2);
        assert_eq!(a[0].pod.name, "a");
        assert_eq!(a[0].at, 0);
        assert_eq!(a[0].leave, None);
        assert_eq!(a[1].at, 50);
        assert_eq!(a[1].leave, Some(150));
        assert_eq!(a[1].pod.containers[0].extended.get(GPU), Some(&1));
        std::fs::write(&p, "name,cpu_milli\nx,abc\n").map_err(|e| SimError::io(&p, e))?;
        let e = load(&p, &spec)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(e.contains("missing column"), "{e}");
        Ok(())
    }

    #[test]
    fn reads_shared_trace() -> Result<()> {
        let p = trace_path();
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
        let spec = OpenbSpec {
            path: String::new(),
            gpu: GpuMode::Ignore,
            limit: None,
            shift_to_first_arrival: true,
        };
        let a = load(&p, &spec)?;
        assert_eq!(a.len(), 8152);
        Ok(())
    }
}
