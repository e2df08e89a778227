package main

import (
	"crypto/sha256"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"strings"
)

// The fault kinds of the soak's schedule. test/soak/soak.bash has one
// function per kind (fault_<kind with - as _>); the report names them.
const (
	// kPluginKill: the plugin's process SIGKILLed; the kubelet restarts it.
	kPluginKill = "plugin-kill"
	// kPluginHang: the plugin holds every gated request past the runtime's
	// request timeout for the hold (nri-faulty's control file), then
	// answers again.
	kPluginHang = "plugin-hang"
	// kPluginRoll: the plugin's DaemonSet rolled to the other image tag and
	// the other NRI index (10 <-> 15), one node at a time (maxUnavailable 1).
	kPluginRoll = "plugin-roll"
	// kRuntimeKill: the node's runtime SIGKILLed, started again after the
	// hold (as systemd restarts a crashed unit).
	kRuntimeKill = "runtime-kill"
	// kRuntimeKillHeld: the same while the plugin holds a RunPodSandbox of
	// a pod the fault creates on that node.
	kRuntimeKillHeld = "runtime-kill-held"
	// kKubeletRestart: the node's kubelet stopped and started after the hold.
	kKubeletRestart = "kubelet-restart"
	// kNodeRestart: kubelet and runtime stopped, every process of the
	// node's pods killed, runtime and kubelet started after the hold.
	kNodeRestart = "node-restart"
	// kIgnoreFlip: CRI-O reloaded (SIGHUP) with fail_policy "ignore", the
	// plugin killed meanwhile, reloaded back to "fail" after the hold.
	kIgnoreFlip = "ignore-flip"
	// kPlugin2Down: the second required plugin's DaemonSet deleted, applied
	// again after the hold (both nodes).
	kPlugin2Down = "plugin2-down"
)

// faultKinds is every kind, in the order the report lists them.
var faultKinds = []string{kPluginKill, kPluginHang, kPluginRoll, kRuntimeKill, kRuntimeKillHeld,
	kKubeletRestart, kNodeRestart, kIgnoreFlip, kPlugin2Down}

// holdRange is the hold of each kind, in seconds: [min, max]. A kind whose
// end the cluster decides (the plugin back, the rollout done) has none.
var holdRange = map[string][2]float64{
	kPluginHang:      {5, 25},
	kRuntimeKill:     {0, 5},
	kRuntimeKillHeld: {0, 5},
	kKubeletRestart:  {0, 10},
	kNodeRestart:     {2, 10},
	kIgnoreFlip:      {10, 30},
	kPlugin2Down:     {10, 30},
}

// clusterWide kinds act on every node at once (node 0 in the plan).
var clusterWide = map[string]bool{kPluginRoll: true, kPlugin2Down: true}

// restartKinds start a node's runtime again: its RSS, goroutines and open fds
// then begin anew in another process, which the growth check judges only
// past its warm-up.
var restartKinds = map[string]bool{kRuntimeKill: true, kRuntimeKillHeld: true, kNodeRestart: true}

// A soak of growthPlanMin seconds or longer restarts runtimes only in the
// first quarter of its planned time (gaps and holds; the faults themselves
// take longer, up to a minute for a runtime kill). Otherwise a runtime is
// killed every few minutes, no process outlives its warm-up by the growth
// check's span, and growth over the second half is never judged. A shorter
// soak cannot be judged anyway and keeps every kind throughout.
const growthPlanMin = 1200.0

// A soak of growthPlanMin seconds or longer rests its churn at restAt (fractions
// of its duration, all in the second half) for up to restWindow seconds: the
// soak (test/soak/soak.bash's soak_rest) waits for the fault in progress to
// end, scales the Deployments to zero, deletes the Jobs, waits until no pod
// of the soak is left, and samples each runtime for restHold seconds with
// nothing of the soak running; it samples once more the same way after the
// soak's namespace is deleted. The growth check compares the runtimes at
// these rests: like with like. Under churn, open fds and goroutines follow
// the requests in flight and RSS the heap's cycle, which a slope over every
// sample measures as much as a leak (docs/reliability.md, defect 3).
var restAt = []float64{0.5, 0.625, 0.75, 0.875}

const (
	restWindow = 120.0
	restHold   = 30.0
	// restSettle: soak.bash's REST_SETTLE, the wait between the last pod
	// gone and the samples (the report says it).
	restSettle = 30.0
)

// The quiet time before each fault, in seconds; the first fault comes
// after firstGap, so that the churn has started.
const (
	firstGap       = 20.0
	gapMin, gapMax = 10.0, 30.0
)

// churnOps are the churn's operations with their weights:
//
//	scale-web N R     Deployment web-N (pinned to node N) to R replicas, 0..5
//	scale-init N R    Deployment init-N (an init container first) to R, 0..3
//	scale-probe N R   Deployment probe-N (a liveness probe that fails
//	                  ~20 s after each start) to R, 0..2
//	job N K           Job job-N-K pinned to node N, 2 pods
//	delete N R        one of node N's soak pods deleted (the R-th, modulo
//	                  their number)
var churnOps = []struct {
	op     string
	weight int
	maxArg int
}{
	{"scale-web", 4, 5},
	{"scale-init", 2, 3},
	{"scale-probe", 1, 2},
	{"job", 2, 0},
	{"delete", 1, 1 << 20},
}

// The time between churn operations, in seconds.
const churnMin, churnMax = 1.5, 4.0

// fault is one entry of the fault schedule: after Gap seconds without a
// fault, Kind on Node (0: every node) for Hold seconds.
type fault struct {
	Gap  float64
	Kind string
	Node int
	Hold float64
}

// churn is one churn operation at At seconds from the start (op "rest": the
// churn rests for Arg seconds of sampling, Node 0).
type churn struct {
	At   float64
	Op   string
	Node int
	Arg  int
}

// plan is the seeded schedule of a soak.
type plan struct {
	Faults []fault
	Churn  []churn
}

// makePlan draws the schedule of a soak of duration seconds on nodes (each
// node's runtime, "crio" or "containerd", in order) from seed. The same
// seed, duration and nodes give the same plan (math/rand/v2's PCG is
// specified). Faults are drawn from a shuffled bag of every kind that
// applies (ignore-flip needs a CRI-O node), so that each kind comes once
// before any comes twice; there are more than the duration can take: the
// soak stops at its deadline. Faults and churn are drawn from streams of
// their own, so that a longer run of a seed begins as the shorter one (up to
// the restart cutoff of growthPlanMin).
func makePlan(seed uint64, duration float64, nodes []string) plan {
	return makePlanOf(seed, duration, nodes, faultKinds)
}

// makePlanOf draws the plan with faults of the given kinds only.
func makePlanOf(seed uint64, duration float64, nodes []string, only []string) plan {
	rng := rand.New(rand.NewPCG(seed, 0x736f616b01))
	var crio []int
	for i, rt := range nodes {
		if rt == "crio" {
			crio = append(crio, i+1)
		}
	}
	var kinds []string
	for _, k := range faultKinds {
		if (k == kIgnoreFlip && len(crio) == 0) || !slices.Contains(only, k) {
			continue
		}
		kinds = append(kinds, k)
	}
	uniform := func(lo, hi float64) float64 { return round1(lo + rng.Float64()*(hi-lo)) }
	var p plan
	var bag []string
	isRestart := func(k string) bool { return restartKinds[k] }
	planned, restarts := 0.0, true
	// A fault takes at least its gap, so duration/gapMin bounds how many
	// can start.
	for i := 0; float64(i)*gapMin <= duration; i++ {
		if restarts && duration >= growthPlanMin && planned > duration/4 {
			restarts = false
			kinds = slices.DeleteFunc(kinds, isRestart)
			bag = slices.DeleteFunc(bag, isRestart)
		}
		if len(kinds) == 0 {
			break
		}
		if len(bag) == 0 {
			bag = append(bag, kinds...)
			rng.Shuffle(len(bag), func(a, b int) { bag[a], bag[b] = bag[b], bag[a] })
		}
		k := bag[0]
		bag = bag[1:]
		f := fault{Kind: k, Gap: uniform(gapMin, gapMax)}
		if i == 0 {
			f.Gap = firstGap
		}
		switch {
		case clusterWide[k]:
		case k == kIgnoreFlip:
			f.Node = crio[rng.IntN(len(crio))]
		default:
			f.Node = 1 + rng.IntN(len(nodes))
		}
		if r, ok := holdRange[k]; ok {
			f.Hold = uniform(r[0], r[1])
		}
		planned += f.Gap + f.Hold
		p.Faults = append(p.Faults, f)
	}
	rng = rand.New(rand.NewPCG(seed, 0x736f616b02))
	total := 0
	for _, o := range churnOps {
		total += o.weight
	}
	var rests []float64
	if duration >= growthPlanMin {
		for _, f := range restAt {
			rests = append(rests, round1(f*duration))
		}
	}
	resting := func(at float64) bool {
		return slices.ContainsFunc(rests, func(r float64) bool { return at >= r && at < r+restWindow })
	}
	jobs, next := 0, 0
	for at := uniform(0, 1); at < duration; at += uniform(churnMin, churnMax) {
		for ; next < len(rests) && rests[next] <= at; next++ {
			p.Churn = append(p.Churn, churn{At: rests[next], Op: "rest", Arg: restHold})
		}
		w := rng.IntN(total)
		for _, o := range churnOps {
			if w -= o.weight; w >= 0 {
				continue
			}
			c := churn{At: round1(at), Op: o.op, Node: 1 + rng.IntN(len(nodes))}
			switch o.op {
			case "job":
				jobs++
				c.Arg = jobs
			default:
				c.Arg = rng.IntN(o.maxArg + 1)
			}
			// The draws go on during a rest, so that the churn after it is
			// the one of the same seed without rests.
			if !resting(c.At) {
				p.Churn = append(p.Churn, c)
			}
			break
		}
	}
	return p
}

func round1(x float64) float64 { return float64(int64(x*10+0.5)) / 10 }

// writeFaults writes the fault schedule as "GAP KIND NODE HOLD" lines.
func (p plan) writeFaults(w io.Writer) error {
	for _, f := range p.Faults {
		if _, err := fmt.Fprintf(w, "%.1f %s %d %.1f\n", f.Gap, f.Kind, f.Node, f.Hold); err != nil {
			return err
		}
	}
	return nil
}

// writeChurn writes the churn as "AT OP NODE ARG" lines.
func (p plan) writeChurn(w io.Writer) error {
	for _, c := range p.Churn {
		if _, err := fmt.Fprintf(w, "%.1f %s %d %d\n", c.At, c.Op, c.Node, c.Arg); err != nil {
			return err
		}
	}
	return nil
}

// digest is a short hash of the whole plan, printed with the seed: the same
// digest on another machine means the same schedule.
func (p plan) digest() string {
	var b strings.Builder
	_ = p.writeFaults(&b)
	_ = p.writeChurn(&b)
	return fmt.Sprintf("%x", sha256.Sum256([]byte(b.String())))[:12]
}
