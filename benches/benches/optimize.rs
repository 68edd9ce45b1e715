//! Criterion benchmarks of the optimiser on the real catalog (EC2 us-east-1, 1,101 types) and
//! the openb trace: the cost-aware heuristic alone, and heuristic + optimiser at the default
//! budget. The quality (cost, bound, gap) of the same inputs is the `quality` binary's job.

use std::hint::black_box;
use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use kcapi_benches::catalog;
use provisioner_core::optimize::{Optimizer, OptimizerConfig};
use provisioner_core::packing::LaunchPlanner;
use provisioner_core::strategies::cost_aware::CostAwarePlanner;

fn bench(c: &mut Criterion) {
    let dir = catalog::data_dir();
    let (Ok(types), Ok(pods)) = (
        catalog::load_ec2(&dir.join("aws-ec2-us-east-1.csv")),
        catalog::load_openb(&dir.join("alibaba-openb/openb_pod_list_default.csv")),
    ) else {
        eprintln!(
            "shared data not found under {}: skipping the optimiser benches",
            dir.display()
        );
        return;
    };
    let shapes = catalog::shapes(&types);
    let cpu_only: Vec<_> = pods.iter().filter(|p| p.num_gpu == 0).copied().collect();
    let first: Vec<_> = pods.iter().take(1000).copied().collect();
    let inputs = [
        (
            "openb-first-1000",
            catalog::problem(shapes.clone(), &catalog::trace_requests(&first)),
        ),
        (
            "openb-cpu-only",
            catalog::problem(shapes.clone(), &catalog::trace_requests(&cpu_only)),
        ),
        (
            "mix-200-200",
            catalog::problem(shapes.clone(), &catalog::synthetic_mix(200, 200, 1)),
        ),
    ];
    let mut g = c.benchmark_group("optimize");
    g.sample_size(10).measurement_time(Duration::from_secs(10));
    for (name, problem) in &inputs {
        g.bench_function(format!("{name}/heuristic"), |b| {
            b.iter(|| black_box(CostAwarePlanner::default().plan(problem, None)))
        });
        let opt = Optimizer::new(OptimizerConfig::default());
        g.bench_function(format!("{name}/heuristic+optimiser"), |b| {
            b.iter(|| {
                let warm = CostAwarePlanner::default().plan(problem, None);
                black_box(opt.optimize(problem, Some(&warm)))
            })
        });
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
