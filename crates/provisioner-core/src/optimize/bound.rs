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
    let dims = pp.dims.len();
    if dims == 0 || pp.classes.is_empty() {
        return 0.0;
    }
    // Normalise each resource by the total demand so blends weigh them comparably.
    let mut total = vec![0f64; dims];
    for c in &pp.classes {
        for (d, s) in c.size_lo.iter().enumerate() {
            if let Some(t) = total.get_mut(d) {
                *t += *s as f64 * c.count() as f64;
            }
        }
    }
    let mut blends: Vec<Vec<f64>> = Vec::new();
    for d in 0..dims {
        let mut w = vec![0.0; dims];
        w[d] = 1.0;
        blends.push(w);
    }
    if dims >= 2 {
        for k in 1..10 {
            let a = k as f64 / 10.0;
            let mut w = vec![0.0; dims];
            w[0] = a / total[0].max(1.0);
            w[1] = (1.0 - a) / total[1].max(1.0);
            blends.push(w);
        }
        let all: Vec<f64> = total.iter().map(|t| 1.0 / t.max(1.0)).collect();
        blends.push(all);
    }
    // Per class, its compatible shapes.
    let mut class_shapes: Vec<Vec<usize>> = vec![Vec::new(); pp.classes.len()];
    for (s, list) in pp.compat_lo.iter().enumerate() {
        for c in list {
            if let Some(v) = class_shapes.get_mut(*c as usize) {
                v.push(s);
            }
        }
    }
    let mut best: f64 = 0.0;
    for w in &blends {
        let rate: Vec<f64> = pp
            .shapes
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
            .collect();
        let mut lb = 0.0;
        for (ci, c) in pp.classes.iter().enumerate() {
            let units: f64 = c.size_lo.iter().zip(w).map(|(s, w)| *s as f64 * w).sum();
            if units <= 0.0 {
                continue;
            }
            let r = class_shapes
                .get(ci)
                .into_iter()
                .flatten()
                .filter_map(|s| rate.get(*s))
                .copied()
                .fold(f64::INFINITY, f64::min);
            if r.is_finite() {
                lb += c.count() as f64 * units * r;
            }
        }
        best = best.max(lb);
    }
    best
}
