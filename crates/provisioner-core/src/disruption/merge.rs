//! Merge search: which groups of nodes are worth replacing by one cheaper node.
//!
//! Karpenter's multi-node consolidation gets most of its saving from *merges*: several
//! partly used nodes replaced by one node that holds all their pods. It finds them only as
//! prefixes of one sorted list; our repack phase ([`super::consolidation`]) tried only groups
//! of the emptiest nodes. Under the payback rule ([`super::payback`]) a merge is taken only
//! when its saving over the horizon beats the evictions, so the merges that matter are those
//! that save the most *per evicted pod*: few, busy-enough pods on nodes much larger (dearer)
//! than what they use. Neighbours in one order are rarely those.
//!
//! This module estimates a merge's net value without a scheduling simulation: the cheapest
//! single instance type whose allocatable holds the group's pods plus the daemonset overhead
//! (priced at its dearest available offering, the worst case the price rule uses), the
//! group's eviction value and horizon as the payback rule computes them. From every
//! seed among the most promising candidates a group grows greedily by the candidate that
//! raises the estimated net value most, while it rises. The best distinct groups are then
//! simulated for real by the caller, which decides: the estimate only chooses what to
//! simulate, so a wrong estimate costs a simulation, never a bad command.
//!
//! Everything here is a pure function of its inputs (no snapshot), so it is tested on its own.

use crate::model::Resources;

/// One consolidation candidate as the merge estimate sees it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Member {
    /// The node's price per hour.
    pub price: f64,
    /// Summed requests of the pods that would move (pod slots included).
    pub need: Resources,
    /// What evicting its pods costs under the payback rule (0 without the rule).
    pub eviction: f64,
    /// Expected remaining hours of the pods that would move ([`super::lifetime`]).
    pub remaining: Vec<f64>,
    /// Karpenter's disruption cost (used when the payback rule is off).
    pub disruption_cost: f64,
}

/// An instance type a replacement could be: what its pods may use and its worst-case price.
#[derive(Debug, Clone, PartialEq)]
pub struct Shape {
    pub allocatable: Resources,
    pub price: f64,
}

/// How the estimate values a group.
#[derive(Debug, Clone, PartialEq)]
pub enum Valuation {
    /// The payback rule: horizon cap (hours) and replacement ready time (seconds).
    Payback {
        horizon_cap_hours: f64,
        replacement_ready_seconds: i64,
        /// How much the cluster is shrinking ([`super::lifetime::horizon_hours`]).
        shrink: f64,
    },
    /// `saving - weight x disruption cost`.
    Weighted { weight: f64 },
}

/// Knobs of the search (deterministic work bounds).
#[derive(Debug, Clone, PartialEq)]
pub struct Knobs {
    /// Daemonset requests every new node carries.
    pub daemon_overhead: Resources,
    pub valuation: Valuation,
    /// Candidates considered at all (the most promising by single-node waste).
    pub pool: usize,
    /// Seeds a group grows from.
    pub seeds: usize,
    /// Largest group.
    pub max_group: usize,
}

/// Shapes sorted by price (then by allocatable CPU, memory), the order [`cheapest_fit`] scans.
pub fn sort_shapes(shapes: &mut [Shape]) {
    shapes.sort_by(|a, b| {
        a.price
            .total_cmp(&b.price)
            .then(a.allocatable.cpu_milli.cmp(&b.allocatable.cpu_milli))
            .then(a.allocatable.memory.cmp(&b.allocatable.memory))
    });
}

/// The price of the cheapest shape (sorted by [`sort_shapes`]) that holds `need`.
pub fn cheapest_fit(shapes: &[Shape], need: &Resources) -> Option<f64> {
    shapes
        .iter()
        .find(|s| need.fits_in(&s.allocatable))
        .map(|s| s.price)
}

/// The estimated net value of replacing `group` (indices into `members`) by one node (negative
/// when it does not pay, e.g. when it saves nothing), or `None` when no shape holds its pods.
/// The value is defined for groups that save nothing yet so a group can grow through them: two
/// nodes 56% used need a node as dear as both, three fit one twice the size.
pub fn estimate(
    members: &[Member],
    group: &[usize],
    shapes: &[Shape],
    knobs: &Knobs,
) -> Option<f64> {
    let mut need = knobs.daemon_overhead.clone();
    let mut price = 0.0;
    let mut eviction = 0.0;
    let mut disruption = 0.0;
    let mut remaining: Vec<f64> = Vec::new();
    for &i in group {
        let m = members.get(i)?;
        need.add_assign(&m.need);
        price += m.price;
        eviction += m.eviction;
        disruption += m.disruption_cost;
        remaining.extend_from_slice(&m.remaining);
    }
    let replacement = cheapest_fit(shapes, &need)?;
    let saving = price - replacement;
    Some(match &knobs.valuation {
        Valuation::Payback {
            horizon_cap_hours,
            replacement_ready_seconds,
            shrink,
        } => {
            let horizon =
                super::lifetime::horizon_hours(&mut remaining, *horizon_cap_hours, *shrink);
            saving * horizon
                - eviction
                - replacement * (*replacement_ready_seconds).max(0) as f64 / 3600.0
        }
        Valuation::Weighted { weight } => saving - weight * disruption,
    })
}

/// Groups of at least two members worth simulating as "replace with one node", best
/// estimate first, at most `limit`. `allowed` vetoes a group (budgets, PDBs, headroom).
pub fn groups(
    members: &[Member],
    shapes: &[Shape],
    knobs: &Knobs,
    limit: usize,
    allowed: &dyn Fn(&[usize]) -> bool,
) -> Vec<(Vec<usize>, f64)> {
    if members.len() < 2 || limit == 0 {
        return Vec::new();
    }
    // Waste: what a member's own smallest replacement would save; the most wasteful nodes
    // are where merges save most.
    let waste = |i: usize| -> f64 {
        let m = &members[i];
        let need = knobs.daemon_overhead.add(&m.need);
        m.price - cheapest_fit(shapes, &need).unwrap_or(m.price)
    };
    let mut pool: Vec<(f64, usize)> = (0..members.len()).map(|i| (waste(i), i)).collect();
    pool.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
    pool.truncate(knobs.pool.max(2));
    let pool: Vec<usize> = pool.into_iter().map(|(_, i)| i).collect();
    let mut out: Vec<(Vec<usize>, f64)> = Vec::new();
    for &seed in pool.iter().take(knobs.seeds) {
        let mut group = vec![seed];
        let mut current = f64::NEG_INFINITY;
        let mut best: Option<(Vec<usize>, f64)> = None;
        while group.len() < knobs.max_group.max(2) {
            let mut pick: Option<(usize, f64)> = None;
            for &j in &pool {
                if group.contains(&j) {
                    continue;
                }
                group.push(j);
                let v = if allowed(&group) {
                    estimate(members, &group, shapes, knobs)
                } else {
                    None
                };
                group.pop();
                if let Some(v) = v
                    && pick.is_none_or(|(_, pv)| v > pv)
                {
                    pick = Some((j, v));
                }
            }
            // Keep growing while the value rises (from a seed alone, always): a single member's
            // own replacement is the single-node search's business.
            match pick {
                Some((j, v)) if group.len() < 2 || v > current => {
                    group.push(j);
                    current = v;
                    if v > 0.0 && best.as_ref().is_none_or(|(_, bv)| v > *bv) {
                        let mut g = group.clone();
                        g.sort_unstable();
                        best = Some((g, v));
                    }
                }
                _ => break,
            }
        }
        // Valued again in sorted order: the same group always gets the same value.
        if let Some((g, _)) = best
            && !out.iter().any(|(o, _)| *o == g)
            && let Some(v) = estimate(members, &g, shapes, knobs)
            && v > 0.0
        {
            out.push((g, v));
        }
    }
    out.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    out.truncate(limit);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const GI: i64 = 1 << 30;

    fn res(cpu: i64, mem_gi: i64) -> Resources {
        Resources {
            cpu_milli: cpu,
            memory: mem_gi * GI,
            pods: 110,
            ..Resources::default()
        }
    }

    fn need(cpu: i64, mem_gi: i64, pods: i64) -> Resources {
        Resources {
            cpu_milli: cpu,
            memory: mem_gi * GI,
            pods,
            ..Resources::default()
        }
    }

    /// A linear-price catalog: 2, 4, 8, 16 vCPU at 0.05/h per vCPU, 4 GiB per vCPU.
    fn shapes() -> Vec<Shape> {
        let mut s: Vec<Shape> = [2, 4, 8, 16]
            .iter()
            .map(|&c| Shape {
                allocatable: res(c * 1000, c * 4),
                price: 0.05 * c as f64,
            })
            .collect();
        sort_shapes(&mut s);
        s
    }

    fn knobs() -> Knobs {
        Knobs {
            daemon_overhead: Resources::default(),
            valuation: Valuation::Payback {
                horizon_cap_hours: 4.0,
                replacement_ready_seconds: 90,
                shrink: 0.0,
            },
            pool: 64,
            seeds: 16,
            max_group: 16,
        }
    }

    /// `remaining`: the pods' expected remaining life in seconds.
    fn member(price: f64, cpu: i64, mem_gi: i64, pods: usize, remaining: i64) -> Member {
        Member {
            price,
            need: need(cpu, mem_gi, pods as i64),
            eviction: 0.01 * pods as f64,
            remaining: vec![remaining as f64 / 3600.0; pods],
            disruption_cost: pods as f64,
        }
    }

    #[test]
    fn cheapest_fit_takes_the_first_shape_that_holds() {
        let s = shapes();
        assert_eq!(cheapest_fit(&s, &need(3000, 4, 2)), Some(0.2));
        assert_eq!(cheapest_fit(&s, &need(17000, 4, 2)), None);
    }

    /// Four 8-vCPU nodes each a quarter used merge into one 8-vCPU node: the search finds the
    /// whole group, not a pair. Emptiest-first neighbours would pick the two 2-vCPU nodes
    /// that are nearly full and save nothing by merging.
    #[test]
    fn finds_the_group_that_saves_most_per_eviction() {
        let members = vec![
            member(0.1, 1900, 7, 1, 7200), // 2 vCPU, nearly full
            member(0.1, 1900, 7, 1, 7200),
            member(0.4, 2000, 8, 2, 7200), // 8 vCPU, a quarter used
            member(0.4, 2000, 8, 2, 7200),
            member(0.4, 2000, 8, 2, 7200),
            member(0.4, 1500, 6, 2, 7200),
        ];
        let g = groups(&members, &shapes(), &knobs(), 4, &|_| true);
        let (best, value) = g.first().expect("a group");
        assert_eq!(best, &vec![2, 3, 4, 5]);
        // Saves 1.6 - 0.4 = 1.2/h over 2 h, less 8 evictions and 90 s of the new node.
        assert!((value - (1.2 * 2.0 - 0.08 - 0.4 * 90.0 / 3600.0)).abs() < 1e-9);
    }

    #[test]
    fn young_pods_make_merges_worthless() {
        // Same nodes, pods expected to leave in a minute: the saving lasts a minute.
        let members: Vec<Member> = (0..4).map(|_| member(0.4, 2000, 8, 2, 60)).collect();
        let g = groups(&members, &shapes(), &knobs(), 4, &|_| true);
        assert!(g.is_empty(), "{g:?}");
    }

    #[test]
    fn vetoed_groups_are_not_proposed() {
        let members: Vec<Member> = (0..4).map(|_| member(0.4, 2000, 8, 2, 7200)).collect();
        let g = groups(&members, &shapes(), &knobs(), 4, &|g: &[usize]| {
            !g.contains(&0)
        });
        assert!(!g.is_empty());
        assert!(g.iter().all(|(m, _)| !m.contains(&0)));
    }

    proptest! {
        /// Every proposed group has at least two distinct members, fits one shape, and its
        /// value is the estimate's; groups come best first and never repeat.
        #[test]
        fn groups_are_valid_and_ordered(
            raw in proptest::collection::vec((1usize..5, 100i64..8000, 1i64..30, 0usize..6, 0i64..20_000), 2..14),
        ) {
            let s = shapes();
            let members: Vec<Member> = raw
                .iter()
                .map(|&(size, cpu, mem, pods, age)| {
                    let c = [2, 4, 8, 16][size.min(4) - 1];
                    member(0.05 * c as f64, cpu.min(c * 1000), mem.min(c * 4), pods, age)
                })
                .collect();
            let k = knobs();
            let g = groups(&members, &s, &k, 8, &|_| true);
            for w in g.windows(2) {
                prop_assert!(w[0].1 >= w[1].1);
            }
            for (i, (m, v)) in g.iter().enumerate() {
                prop_assert!(m.len() >= 2);
                prop_assert!(m.windows(2).all(|w| w[0] < w[1]));
                prop_assert!(*v > 0.0);
                let e = estimate(&members, m, &s, &k);
                prop_assert_eq!(e, Some(*v));
                prop_assert!(g.iter().skip(i + 1).all(|(o, _)| o != m));
            }
        }

        /// The estimate is never positive when the group's price does not exceed its cheapest
        /// replacement.
        #[test]
        fn estimate_needs_a_saving(cpu in 100i64..16000, pods in 1i64..20) {
            let s = shapes();
            let n = need(cpu, cpu / 1000 * 4, pods);
            let fit = cheapest_fit(&s, &n);
            let members = vec![
                Member { price: fit.unwrap_or(1.0) / 2.0, need: n.clone(), ..Member::default() },
                Member { price: fit.unwrap_or(1.0) / 2.0, need: Resources::default(), ..Member::default() },
            ];
            prop_assert!(estimate(&members, &[0, 1], &s, &knobs()).is_none_or(|v| v <= 0.0));
        }
    }
}
