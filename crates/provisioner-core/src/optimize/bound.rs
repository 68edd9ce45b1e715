//! The simple lower bound: price per unit of resource.
//!
//! Every node costs at least what its used resources are worth at the cheapest rate any shape
//! offers for them, so the cost of any plan is at least `Σ_classes count · (λ·size) · min over
//! compatible shapes of price / (λ·allocatable)` for any weights λ >= 0 over the resources
//! (each λ gives a "resource" that is a blend of the real ones). A few blends are tried and the
//! best bound kept. Cheap, always available, and the fallback when column generation has no
//! time.

use super::pattern::PatternProblem;

/// The best price-per-unit bound over a fixed set of resource blends.
pub(crate) fn price_per_unit(pp: &PatternProblem) -> f64 {
    if pp.dims.is_empty() || pp.classes.is_empty() {
        return 0.0;
    }
    best_blend(pp).0
}

/// The best blend's bound and its per-class prices (a class's size in the blend at the
/// cheapest rate a compatible shape offers; 0 where none does). The prices are feasible duals
/// for every pattern, which is why column generation can start from them.
pub(crate) fn best_blend(pp: &PatternProblem) -> (f64, Vec<f64>) {
    let class_shapes = class_shapes(pp);
    let mut best: (f64, Vec<f64>) = (0.0, vec![0.0; pp.classes.len()]);
    for w in &blends(pp) {
        let rate = unit_rates(pp, w);
        let prices: Vec<f64> = pp
            .classes
            .iter()
            .zip(&class_shapes)
            .map(|(c, shapes)| {
                let units: f64 = c.size_lo.iter().zip(w).map(|(s, w)| *s as f64 * w).sum();
                let r = shapes
                    .iter()
                    .filter_map(|s| rate.get(*s))
                    .copied()
                    .fold(f64::INFINITY, f64::min);
                if units > 0.0 && r.is_finite() {
                    units * r
                } else {
                    0.0
                }
            })
            .collect();
        let value: f64 = prices
            .iter()
            .zip(&pp.classes)
            .map(|(p, c)| p * c.count() as f64)
            .sum();
        if value > best.0 {
            best = (value, prices);
        }
    }
    best
}

/// The blends tried: each resource alone, then for two or more resources nine mixes of the
/// first two and one of all, each resource normalised by the total demand for it so that the
/// blends weigh them comparably.
fn blends(pp: &PatternProblem) -> Vec<Vec<f64>> {
    let dims = pp.dims.len();
    let mut total = vec![0f64; dims];
    for c in &pp.classes {
        for (d, s) in c.size_lo.iter().enumerate() {
            if let Some(t) = total.get_mut(d) {
                *t += *s as f64 * c.count() as f64;
            }
        }
    }
    let mut blends: Vec<Vec<f64>> = (0..dims)
        .map(|d| (0..dims).map(|e| if e == d { 1.0 } else { 0.0 }).collect())
        .collect();
    if dims >= 2 {
        for k in 1..10 {
            let a = k as f64 / 10.0;
            let mut w = vec![0.0; dims];
            w[0] = a / total[0].max(1.0);
            w[1] = (1.0 - a) / total[1].max(1.0);
            blends.push(w);
        }
        blends.push(total.iter().map(|t| 1.0 / t.max(1.0)).collect());
    }
    blends
}

/// Per class, the shapes it fits with its smallest members.
fn class_shapes(pp: &PatternProblem) -> Vec<Vec<usize>> {
    let mut class_shapes: Vec<Vec<usize>> = vec![Vec::new(); pp.classes.len()];
    for (s, list) in pp.compat_lo.iter().enumerate() {
        for c in list {
            if let Some(v) = class_shapes.get_mut(*c as usize) {
                v.push(s);
            }
        }
    }
    class_shapes
}

/// Each shape's price per unit of the blend `w` (infinite for a shape with none of it).
fn unit_rates(pp: &PatternProblem, w: &[f64]) -> Vec<f64> {
    pp.shapes
        .iter()
        .map(|sh| {
            let units: f64 = sh
                .cap
                .iter()
                .zip(w)
                .map(|(c, w)| (*c).max(0) as f64 * w)
                .sum();
            if units > 0.0 {
                sh.price / units
            } else {
                f64::INFINITY
            }
        })
        .collect()
}
