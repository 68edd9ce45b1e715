//go:build test_performance

// Runs upstream Karpenter's scheduler (sigs.k8s.io/karpenter, the version compare.sh copies)
// once on pods given as JSON, with the catalog and NodePool of upstream's scheduling
// benchmark (setupScheduler in scheduling_benchmark_test.go), and writes the plan as JSON:
// per new NodeClaim its pods and the cheapest offering that can launch it (what the fake
// cloud provider's Create picks). compare.sh copies this file into a scratch copy of the
// module's pkg/controllers/provisioning/scheduling; it is never built inside this repository.
package scheduling_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/uuid"

	"sigs.k8s.io/karpenter/pkg/controllers/provisioning/scheduling"
	"sigs.k8s.io/karpenter/pkg/operator/injection"
	"sigs.k8s.io/karpenter/pkg/operator/options"
	"sigs.k8s.io/karpenter/pkg/test"
)

// kcapiPod is one pod as crates/workloads/examples/upstream_plan.rs exports it.
type kcapiPod struct {
	Name     string `json:"name"`
	CPUMilli int64  `json:"cpu_milli"`
	MemMiB   int64  `json:"memory_mib"`
	// generic, zone-spread, host-spread, zone-affinity, host-anti-affinity
	Group string `json:"group"`
	// The pod's own label value (my-label, or my-affininity for zone-affinity pods).
	Label string `json:"label"`
	// The spread constraint's selector value (spread groups only).
	Selector string `json:"selector"`
}

type kcapiNode struct {
	Pods         []string `json:"pods"`
	InstanceType string   `json:"instance_type"`
	Zone         string   `json:"zone"`
	CapacityType string   `json:"capacity_type"`
	Price        float64  `json:"price"`
	Options      int      `json:"options"`
}

type kcapiPlan struct {
	Nodes     []kcapiNode `json:"nodes"`
	PodErrors int         `json:"pod_errors"`
}

func kcapiBuild(p kcapiPod) (*corev1.Pod, error) {
	// Upstream's queue breaks ties in CPU and memory by creation time, then UID: random
	// UIDs make the order among equal pods (and so the plan) vary between runs.
	// KCAPI_UID=name uses the pod's name instead, the order our core's queue uses.
	uid := uuid.NewUUID()
	if os.Getenv("KCAPI_UID") == "name" {
		uid = types.UID(p.Name)
	}
	opts := test.PodOptions{
		ObjectMeta: metav1.ObjectMeta{Name: p.Name, UID: uid},
		ResourceRequirements: corev1.ResourceRequirements{Requests: corev1.ResourceList{
			corev1.ResourceCPU:    resource.MustParse(fmt.Sprintf("%dm", p.CPUMilli)),
			corev1.ResourceMemory: resource.MustParse(fmt.Sprintf("%dMi", p.MemMiB)),
		}},
	}
	spread := func(key string) {
		opts.Labels = map[string]string{"my-label": p.Label}
		opts.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{
			MaxSkew: 1, TopologyKey: key, WhenUnsatisfiable: corev1.DoNotSchedule,
			LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"my-label": p.Selector}},
		}}
	}
	switch p.Group {
	case "generic":
		opts.Labels = map[string]string{"my-label": p.Label}
	case "zone-spread":
		spread(corev1.LabelTopologyZone)
	case "host-spread":
		spread(corev1.LabelHostname)
	case "zone-affinity":
		opts.Labels = map[string]string{"my-affininity": p.Label}
		opts.PodRequirements = []corev1.PodAffinityTerm{{
			LabelSelector: &metav1.LabelSelector{MatchLabels: opts.Labels},
			TopologyKey:   corev1.LabelTopologyZone,
		}}
	case "host-anti-affinity":
		opts.Labels = map[string]string{"app": "nginx"}
		opts.PodAntiRequirements = []corev1.PodAffinityTerm{{
			LabelSelector: &metav1.LabelSelector{MatchLabels: opts.Labels},
			TopologyKey:   corev1.LabelHostname,
		}}
	default:
		return nil, fmt.Errorf("pod %s: unknown group %q", p.Name, p.Group)
	}
	return test.Pod(opts), nil
}

func TestKcapiPlan(t *testing.T) {
	in, out := os.Getenv("KCAPI_PODS"), os.Getenv("KCAPI_PLAN")
	if in == "" || out == "" {
		t.Skip("KCAPI_PODS and KCAPI_PLAN not set (run benches/upstream/compare.sh)")
	}
	raw, err := os.ReadFile(in)
	if err != nil {
		t.Fatal(err)
	}
	var spec []kcapiPod
	if err := json.Unmarshal(raw, &spec); err != nil {
		t.Fatalf("%s: %v", in, err)
	}
	var pods []*corev1.Pod
	for _, p := range spec {
		pod, err := kcapiBuild(p)
		if err != nil {
			t.Fatal(err)
		}
		pods = append(pods, pod)
	}
	ctx = options.ToContext(injection.WithControllerName(context.Background(), "provisioner"), test.Options())
	s, err := setupScheduler(ctx, pods, scheduling.NumConcurrentReconciles(5))
	if err != nil {
		t.Fatal(err)
	}
	results, err := s.Solve(ctx, pods)
	if err != nil {
		t.Fatal(err)
	}
	plan := kcapiPlan{PodErrors: len(results.PodErrors)}
	for _, n := range results.NewNodeClaims {
		node := kcapiNode{Price: math.Inf(1), Options: len(n.InstanceTypeOptions)}
		for _, p := range n.Pods {
			node.Pods = append(node.Pods, p.Name)
		}
		for _, it := range n.InstanceTypeOptions {
			offs := it.Offerings.Available().Compatible(n.Requirements)
			if len(offs) == 0 {
				continue
			}
			if c := offs.Cheapest(); c.Price < node.Price {
				node.Price, node.InstanceType = c.Price, it.Name
				node.Zone = c.Requirements.Get(corev1.LabelTopologyZone).Any()
				node.CapacityType = c.CapacityType()
			}
		}
		plan.Nodes = append(plan.Nodes, node)
	}
	b, err := json.MarshalIndent(plan, "", " ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(out, b, 0o644); err != nil {
		t.Fatal(err)
	}
}
