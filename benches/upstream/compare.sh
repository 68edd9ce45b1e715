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
#
# KCAPI_DETERMINISTIC=1 takes upstream's three sources of randomness out, in a second scratch
# copy, so that its plan can be compared decision by decision with ours (the example prints
# the first pod placed differently): pods with equal requests are ordered by name (names as
# UIDs), in-flight NodeClaims are re-sorted with a stable sort (Go's sort.Slice is not stable
# beyond 12 entries), and topology domains are visited in name order instead of Go's random
# map order (which picks the zone among equally loaded ones and bootstraps zone affinity).
set -euo pipefail
KARPENTER_VERSION=${KARPENTER_VERSION:-v1.14.1}
deterministic=${KCAPI_DETERMINISTIC:-}
seed=${1:-42}; shift || true
if [ $# -gt 0 ]; then sizes=("$@"); else sizes=(500 2000 5000); fi
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
modcache=$(go env GOMODCACHE)
src="$modcache/sigs.k8s.io/karpenter@$KARPENTER_VERSION"
if [ ! -d "$src" ]; then
  (cd "$(mktemp -d)" && go mod init tmp >/dev/null 2>&1 && go mod download "sigs.k8s.io/karpenter@$KARPENTER_VERSION")
fi
scratch="$HOME/.cache/karpenter-capi/upstream-karpenter-$KARPENTER_VERSION${deterministic:+-deterministic}"
if [ ! -d "$scratch" ]; then
  cp -r "$src" "$scratch.tmp" && chmod -R u+w "$scratch.tmp"
  if [ -n "$deterministic" ]; then
    sched="$scratch.tmp/pkg/controllers/provisioning/scheduling"
    sed -i 's/\tsort\.Slice(s\.newNodeClaims, /\tsort.SliceStable(s.newNodeClaims, /' "$sched/scheduler.go"
    sed -i -e 's/for domain := range t\.domains {/for _, domain := range slices.Sorted(maps.Keys(t.domains)) {/' \
      -e '0,/^import (/s//import (\n\t"maps"\n\t"slices"/' "$sched/topologygroup.go"
    grep -q 'sort.SliceStable(s.newNodeClaims' "$sched/scheduler.go" && grep -q 'slices.Sorted(maps.Keys(t.domains))' "$sched/topologygroup.go" \
      || { echo "compare.sh: upstream $KARPENTER_VERSION no longer matches the deterministic patch" >&2; exit 1; }
  fi
  mv "$scratch.tmp" "$scratch"
fi
cp "$here/kcapi_plan_test.go" "$scratch/pkg/controllers/provisioning/scheduling/"
work="$HOME/.cache/karpenter-capi/upstream-compare${deterministic:+-deterministic}"
mkdir -p "$work"
(cd "$scratch" && go test -tags test_performance -c -o "$work/scheduling.test" ./pkg/controllers/provisioning/scheduling/)
for n in "${sizes[@]}"; do
  pods="$work/pods-$seed-$n.json"
  (cd "$repo" && cargo run --release -q -p kcapi-workloads --example upstream_plan -- export "$seed" "$n" "$pods")
  (cd "$scratch/pkg/controllers/provisioning/scheduling" && \
    KCAPI_UID=${deterministic:+name} KCAPI_PODS="$pods" KCAPI_PLAN="$work/upstream-$seed-$n.json" "$work/scheduling.test" -test.run '^TestKcapiPlan$' -test.count=1 >/dev/null)
  (cd "$repo" && cargo run --release -q -p kcapi-workloads --example upstream_plan -- compare "$pods" "$work/upstream-$seed-$n.json")
done
