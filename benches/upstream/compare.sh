#!/usr/bin/env bash
# Upstream Karpenter's plan vs our `karpenter` baseline's on identical pods (Karpenter's
# scheduling-benchmark catalog and "diverse" pods). Same seed, same pods and the same plan
# from us; upstream's plan varies a few percent between runs (random UIDs, concurrent
# reconciles): run it more than once. Usage: benches/upstream/compare.sh [SEED] [PODS...]   (default: 42, 500 2000 5000)
#
# Upstream is sigs.k8s.io/karpenter at $KARPENTER_VERSION from the Go module cache, copied to
# a scratch dir under ~/.cache/karpenter-capi (never into this repository); our harness
# (kcapi_plan_test.go) is dropped into its scheduling package. One `go test` build (slow on
# 2 cores: several minutes the first time, cached after).
set -euo pipefail
KARPENTER_VERSION=${KARPENTER_VERSION:-v1.14.1}
seed=${1:-42}; shift || true
if [ $# -gt 0 ]; then sizes=("$@"); else sizes=(500 2000 5000); fi
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
modcache=$(go env GOMODCACHE)
src="$modcache/sigs.k8s.io/karpenter@$KARPENTER_VERSION"
if [ ! -d "$src" ]; then
  (cd "$(mktemp -d)" && go mod init tmp >/dev/null 2>&1 && go mod download "sigs.k8s.io/karpenter@$KARPENTER_VERSION")
fi
scratch="$HOME/.cache/karpenter-capi/upstream-karpenter-$KARPENTER_VERSION"
if [ ! -d "$scratch" ]; then
  cp -r "$src" "$scratch.tmp" && chmod -R u+w "$scratch.tmp" && mv "$scratch.tmp" "$scratch"
fi
cp "$here/kcapi_plan_test.go" "$scratch/pkg/controllers/provisioning/scheduling/"
work="$HOME/.cache/karpenter-capi/upstream-compare"
mkdir -p "$work"
(cd "$scratch" && go test -tags test_performance -c -o "$work/scheduling.test" ./pkg/controllers/provisioning/scheduling/)
for n in "${sizes[@]}"; do
  pods="$work/pods-$seed-$n.json"
  (cd "$repo" && cargo run --release -q -p kcapi-workloads --example upstream_plan -- export "$seed" "$n" "$pods")
  (cd "$scratch/pkg/controllers/provisioning/scheduling" && \
    KCAPI_PODS="$pods" KCAPI_PLAN="$work/upstream-$seed-$n.json" "$work/scheduling.test" -test.run '^TestKcapiPlan$' -test.count=1 >/dev/null)
  (cd "$repo" && cargo run --release -q -p kcapi-workloads --example upstream_plan -- compare "$pods" "$work/upstream-$seed-$n.json")
done
