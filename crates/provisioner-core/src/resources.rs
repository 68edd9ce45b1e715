//! Resource arithmetic and the kube-scheduler's way of counting a pod's requests.
//!
//! Every fit check in the simulation goes through [`Resources::fits_in`], so it is written to
//! touch the four first-class fields before the (usually empty) extended map.

use std::fmt;

use crate::model::{Pod, Resources};

const GIB: f64 = 1024.0 * 1024.0 * 1024.0;
const MIB: f64 = 1024.0 * 1024.0;

impl Resources {
    /// CPU and memory only; the common case in tests and generators.
    pub fn new(cpu_milli: i64, memory: i64) -> Resources {
        Resources {
            cpu_milli,
            memory,
            ..Resources::default()
        }
    }

    /// CPU, memory and pod slots.
    pub fn with_pods(cpu_milli: i64, memory: i64, pods: i64) -> Resources {
        Resources {
            cpu_milli,
            memory,
            pods,
            ..Resources::default()
        }
    }

    /// Builder: set one extended resource (e.g. `nvidia.com/gpu`).
    pub fn with_extended(mut self, name: &str, amount: i64) -> Resources {
        self.extended.insert(name.to_string(), amount);
        self
    }

    /// Amount of a resource by its Kubernetes name.
    pub fn get(&self, name: &str) -> i64 {
        match name {
            crate::model::resource_names::CPU => self.cpu_milli,
            crate::model::resource_names::MEMORY => self.memory,
            crate::model::resource_names::PODS => self.pods,
            crate::model::resource_names::EPHEMERAL_STORAGE => self.ephemeral_storage,
            other => self.extended.get(other).copied().unwrap_or(0),
        }
    }

    /// True when every amount is zero.
    pub fn is_zero(&self) -> bool {
        self.cpu_milli == 0
            && self.memory == 0
            && self.pods == 0
            && self.ephemeral_storage == 0
            && self.extended.values().all(|v| *v == 0)
    }

    /// Saturating element-wise sum (extended resources merged by name).
    pub fn add(&self, other: &Resources) -> Resources {
        let mut out = self.clone();
        out.add_assign(other);
        out
    }

    /// In-place saturating sum.
    pub fn add_assign(&mut self, other: &Resources) {
        self.cpu_milli = self.cpu_milli.saturating_add(other.cpu_milli);
        self.memory = self.memory.saturating_add(other.memory);
        self.pods = self.pods.saturating_add(other.pods);
        self.ephemeral_storage = self
            .ephemeral_storage
            .saturating_add(other.ephemeral_storage);
        for (k, v) in &other.extended {
            let e = self.extended.entry(k.clone()).or_insert(0);
            *e = e.saturating_add(*v);
        }
    }

    /// Element-wise difference; may go negative (callers check with [`Resources::fits_in`]).
    pub fn sub(&self, other: &Resources) -> Resources {
        let mut out = self.clone();
        out.sub_assign(other);
        out
    }

    /// In-place saturating difference.
    pub fn sub_assign(&mut self, other: &Resources) {
        self.cpu_milli = self.cpu_milli.saturating_sub(other.cpu_milli);
        self.memory = self.memory.saturating_sub(other.memory);
        self.pods = self.pods.saturating_sub(other.pods);
        self.ephemeral_storage = self
            .ephemeral_storage
            .saturating_sub(other.ephemeral_storage);
        for (k, v) in &other.extended {
            let e = self.extended.entry(k.clone()).or_insert(0);
            *e = e.saturating_sub(*v);
        }
    }

    /// Element-wise maximum, used for init containers.
    pub fn max(&self, other: &Resources) -> Resources {
        let mut out = self.clone();
        out.cpu_milli = out.cpu_milli.max(other.cpu_milli);
        out.memory = out.memory.max(other.memory);
        out.pods = out.pods.max(other.pods);
        out.ephemeral_storage = out.ephemeral_storage.max(other.ephemeral_storage);
        for (k, v) in &other.extended {
            let e = out.extended.entry(k.clone()).or_insert(0);
            *e = (*e).max(*v);
        }
        out
    }

    /// Whether `self` (a request) fits in `available`: every requested amount is at most what
    /// is available; an extended resource missing from `available` is zero.
    #[inline]
    pub fn fits_in(&self, available: &Resources) -> bool {
        self.cpu_milli <= available.cpu_milli
            && self.memory <= available.memory
            && self.pods <= available.pods
            && self.ephemeral_storage <= available.ephemeral_storage
            && (self.extended.is_empty()
                || self
                    .extended
                    .iter()
                    .all(|(k, v)| *v <= 0 || *v <= available.extended.get(k).copied().unwrap_or(0)))
    }

    /// Whether `used + add` fits in `available`, without allocating.
    #[inline]
    pub fn fits_with(&self, add: &Resources, available: &Resources) -> bool {
        self.cpu_milli.saturating_add(add.cpu_milli) <= available.cpu_milli
            && self.memory.saturating_add(add.memory) <= available.memory
            && self.pods.saturating_add(add.pods) <= available.pods
            && self.ephemeral_storage.saturating_add(add.ephemeral_storage)
                <= available.ephemeral_storage
            && (add.extended.is_empty()
                || add.extended.iter().all(|(k, v)| {
                    *v <= 0
                        || self
                            .extended
                            .get(k)
                            .copied()
                            .unwrap_or(0)
                            .saturating_add(*v)
                            <= available.extended.get(k).copied().unwrap_or(0)
                }))
    }

    /// [`Resources::fits_with`] for a node that has no shape yet: `self` was checked against
    /// other shapes than `available`, so its own extended resources count too. Without it a
    /// node holding a GPU pod narrowed to a shape without GPUs when the next pod (asking for
    /// none) allowed only that shape, and the plan lost the node (found by
    /// `placements_satisfy_hard_constraints`). A bound node keeps the kube-scheduler's check,
    /// which reads only what the incoming pod asks for.
    #[inline]
    pub fn fits_with_all(&self, add: &Resources, available: &Resources) -> bool {
        self.fits_with(add, available)
            && (self.extended.is_empty()
                || self.extended.iter().all(|(k, v)| {
                    *v <= 0
                        || add.extended.get(k).is_some_and(|a| *a > 0)
                        || *v <= available.extended.get(k).copied().unwrap_or(0)
                }))
    }

    /// The first first-class resource where `self` exceeds `available`, for human reasons
    /// (extended resources: [`Resources::first_excess_extended`]).
    pub fn first_excess(&self, available: &Resources) -> Option<(&'static str, i64, i64)> {
        if self.cpu_milli > available.cpu_milli {
            return Some(("cpu", self.cpu_milli, available.cpu_milli));
        }
        if self.memory > available.memory {
            return Some(("memory", self.memory, available.memory));
        }
        if self.pods > available.pods {
            return Some(("pods", self.pods, available.pods));
        }
        if self.ephemeral_storage > available.ephemeral_storage {
            return Some((
                "ephemeral-storage",
                self.ephemeral_storage,
                available.ephemeral_storage,
            ));
        }
        None
    }

    /// The extended resource `self` exceeds in `available`, by name.
    pub fn first_excess_extended(&self, available: &Resources) -> Option<(String, i64, i64)> {
        self.extended.iter().find_map(|(k, v)| {
            let have = available.extended.get(k).copied().unwrap_or(0);
            (*v > 0 && *v > have).then(|| (k.clone(), *v, have))
        })
    }

    /// Largest of each resource over an iterator (per-dimension maximum), for fast rejects.
    pub fn elementwise_max<'a>(iter: impl IntoIterator<Item = &'a Resources>) -> Resources {
        let mut out = Resources::default();
        for r in iter {
            out = out.max(r);
        }
        out
    }
}

/// Formats one amount of a named resource the way a person reads it.
pub fn format_amount(resource: &str, amount: i64) -> String {
    match resource {
        "cpu" => {
            if amount % 1000 == 0 {
                format!("{} vCPU", amount / 1000)
            } else {
                format!("{amount}m CPU")
            }
        }
        "memory" | "ephemeral-storage" => {
            let a = amount as f64;
            if a >= GIB {
                format!("{} GiB {resource}", trim(a / GIB))
            } else {
                format!("{} MiB {resource}", trim(a / MIB))
            }
        }
        "pods" => format!("{amount} pods"),
        other => format!("{amount} {other}"),
    }
}

fn trim(v: f64) -> String {
    let s = format!("{v:.2}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    s.to_string()
}

impl fmt::Display for Resources {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}, {}, {}",
            format_amount("cpu", self.cpu_milli),
            format_amount("memory", self.memory),
            format_amount("pods", self.pods)
        )?;
        for (k, v) in &self.extended {
            write!(f, ", {v} {k}")?;
        }
        Ok(())
    }
}

/// A pod's effective requests the way the kube-scheduler counts them: the larger of
/// (app containers + sidecars) and each regular init container (+ the sidecars started before
/// it), plus the RuntimeClass overhead, plus one pod slot.
pub fn pod_requests(pod: &Pod) -> Resources {
    let mut app = Resources::default();
    for c in &pod.containers {
        app.add_assign(c);
    }
    let mut sidecars = Resources::default();
    let mut init_peak = Resources::default();
    for ic in &pod.init_containers {
        if ic.restart_always {
            sidecars.add_assign(&ic.requests);
            init_peak = init_peak.max(&sidecars);
        } else {
            init_peak = init_peak.max(&sidecars.add(&ic.requests));
        }
    }
    let mut total = app.add(&sidecars).max(&init_peak);
    if let Some(o) = &pod.overhead {
        total.add_assign(o);
    }
    total.pods = total.pods.max(0).saturating_add(1);
    total
}

/// Sum of many requests; deterministic regardless of input order for the numeric fields.
pub fn sum<'a>(iter: impl IntoIterator<Item = &'a Resources>) -> Resources {
    let mut out = Resources::default();
    for r in iter {
        out.add_assign(r);
    }
    out
}

/// Drop extended entries that are zero so equal amounts compare equal.
pub fn normalized(mut r: Resources) -> Resources {
    r.extended.retain(|_, v| *v != 0);
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fits_with_counts_what_is_used() {
        let alloc = Resources::with_pods(4000, 8 << 30, 10).with_extended("nvidia.com/gpu", 2);
        let used = Resources::with_pods(3000, 4 << 30, 9).with_extended("nvidia.com/gpu", 1);
        assert!(used.fits_with(&Resources::with_pods(1000, 4 << 30, 1), &alloc));
        assert!(!used.fits_with(&Resources::with_pods(1001, 0, 0), &alloc));
        assert!(!used.fits_with(&Resources::with_pods(0, (4 << 30) + 1, 0), &alloc));
        assert!(!used.fits_with(&Resources::with_pods(0, 0, 2), &alloc));
        let one_gpu = Resources::new(0, 0).with_extended("nvidia.com/gpu", 1);
        assert!(used.fits_with(&one_gpu, &alloc));
        let two_gpus = Resources::new(0, 0).with_extended("nvidia.com/gpu", 2);
        assert!(!used.fits_with(&two_gpus, &alloc), "one of the two is used");
        // A request for a resource the node does not have, with nothing of it used: the case
        // the simulator's swapped arguments let through.
        let plain = Resources::with_pods(4000, 8 << 30, 10);
        assert!(!Resources::default().fits_with(&one_gpu, &plain));
        // Resources used but not requested do not matter.
        assert!(used.fits_with(&Resources::new(100, 0), &alloc));
        let mut eph = Resources::new(0, 0);
        eph.ephemeral_storage = 1;
        let mut full = used.clone();
        full.ephemeral_storage = 10;
        let mut cap = alloc.clone();
        cap.ephemeral_storage = 10;
        assert!(!full.fits_with(&eph, &cap));
    }
    use crate::model::InitContainer;

    #[test]
    fn requests_take_the_larger_of_app_and_init() {
        let mut pod = Pod::new("ns", "p", 500, 1 << 30);
        pod.init_containers.push(InitContainer {
            requests: Resources::new(2000, 1 << 20),
            restart_always: false,
        });
        let r = pod_requests(&pod);
        assert_eq!(r.cpu_milli, 2000);
        assert_eq!(r.memory, 1 << 30);
        assert_eq!(r.pods, 1);
    }

    #[test]
    fn sidecars_add_to_app_and_to_later_inits() {
        let mut pod = Pod::new("ns", "p", 500, 100);
        pod.init_containers.push(InitContainer {
            requests: Resources::new(200, 10),
            restart_always: true,
        });
        pod.init_containers.push(InitContainer {
            requests: Resources::new(600, 10),
            restart_always: false,
        });
        let r = pod_requests(&pod);
        // app + sidecar = 700m; init 600m + sidecar 200m = 800m.
        assert_eq!(r.cpu_milli, 800);
        assert_eq!(r.memory, 110);
    }

    #[test]
    fn overhead_is_added() {
        let mut pod = Pod::new("ns", "p", 500, 100);
        pod.overhead = Some(Resources::new(100, 50));
        assert_eq!(pod_requests(&pod).cpu_milli, 600);
        assert_eq!(pod_requests(&pod).memory, 150);
    }

    #[test]
    fn fits_checks_extended() {
        let gpu = Resources::new(100, 100).with_extended("nvidia.com/gpu", 1);
        assert!(!gpu.fits_in(&Resources::new(1000, 1000)));
        assert!(gpu.fits_in(&Resources::new(1000, 1000).with_extended("nvidia.com/gpu", 2)));
        assert!(Resources::default().fits_with(
            &gpu,
            &Resources::new(1000, 1000).with_extended("nvidia.com/gpu", 1)
        ));
    }

    #[test]
    fn formats_for_people() {
        assert_eq!(format_amount("memory", 96 << 30), "96 GiB memory");
        assert_eq!(format_amount("cpu", 1500), "1500m CPU");
        assert_eq!(format_amount("cpu", 4000), "4 vCPU");
    }
}
