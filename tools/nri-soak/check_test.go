package main

import (
	"strings"
	"testing"
)

const (
	idA = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	idB = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
	idC = "cccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccc"
	sbS = "5555555555555555555555555555555555555555555555555555555555555555"
)

// testRecords: one CRI-O node, two required plugins, a run from 1000 to
// 2000, a fault at 1100-1150.
func testRecords() *records {
	return &records{
		Run: runInfo{
			Start: 1000, End: 2000, Namespace: "soak",
			Nodes: []nodeInfo{{N: 1, Name: "nrigate-1", Runtime: "crio"}},
			Plugins: []pluginInfo{
				{DS: "device-injector", Key: "device-injector", Env: "A=1", Exit: 42},
				{DS: "ulimit-adjuster", Key: "20-ulimit-adjuster", Env: "B=2", Exit: 43},
			},
			NPD: npdInfo{Available: true, Bound: 3, Condition: "NRIPluginsNotReady"},
		},
		Faults:  []faultRec{{ID: 1, Kind: kPluginKill, Node: 1, Start: 1100, End: 1150}},
		Runtime: map[int]runtimeLog{1: {}},
		Status:  map[int][]statusChange{},
		Until:   2000,
	}
}

func acted(node int, ds, event, sandbox, ctr string, t float64) pluginLine {
	return pluginLine{T: t, Node: node, Plugin: ds, Kind: "acted", Event: event, NS: "soak", Pod: "p", Sandbox: sandbox, Container: ctr}
}

func kinds(vs []violation) string {
	var k []string
	for _, v := range vs {
		k = append(k, v.Kind)
	}
	return strings.Join(k, ",")
}

func TestActed(t *testing.T) {
	r := testRecords()
	r.Runtime[1] = runtimeLog{Created: []created{
		{T: 1200, Node: 1, ID: sbS, NS: "soak", Pod: "p", FromLog: true},
		{T: 1201, Node: 1, ID: idA, Sandbox: sbS, NS: "soak", Pod: "p", Name: "app", FromLog: true},
		// Not the soak's: not checked.
		{T: 1202, Node: 1, ID: idC, NS: "kube-system", Pod: "q", Name: "x", FromLog: true},
	}}
	r.Plugin = []pluginLine{
		acted(1, "device-injector", "RunPodSandbox", sbS, "", 1199),
		acted(1, "ulimit-adjuster", "RunPodSandbox", sbS, "", 1199.5),
		acted(1, "device-injector", "CreateContainer", sbS, idA, 1200.5),
		acted(1, "ulimit-adjuster", "CreateContainer", sbS, idA, 1200.6),
	}
	o := check(r, checkOpts{Live: true})
	if len(o.Violations) != 0 {
		t.Fatalf("violations: %+v", o.Violations)
	}
	if e := o.Escape[1]; e.Sandboxes != 1 || e.Containers != 1 {
		t.Fatalf("counted %+v", e)
	}

	// The second plugin's answer came after the runtime reported the
	// container: an escape, named with the fault before it.
	r.Plugin[3].T = 1201.5
	o = check(r, checkOpts{Live: true})
	if kinds(o.Violations) != vEscape || !strings.Contains(o.Violations[0].Detail, "20-ulimit-adjuster's acted CreateContainer came 0.500 s after") ||
		o.Violations[0].Fault == nil || o.Violations[0].Fault.ID != 1 {
		t.Fatalf("late answer: %+v", o.Violations)
	}

	// A container only a runtime's list shows, no plugin acted on it.
	r.Plugin[3].T = 1200.6
	r.Snapshots = []snapshot{{T: 1300, Node: 1, Containers: []snapContainer{
		{ID: idB, Sandbox: sbS, State: "CONTAINER_RUNNING", Name: "app", NS: "soak", Pod: "p"},
		// Refused and undone before it started: not a creation.
		{ID: idC, Sandbox: sbS, State: "CONTAINER_CREATED", Name: "app", NS: "soak", Pod: "p"},
	}}}
	o = check(r, checkOpts{Live: true})
	if kinds(o.Violations) != vEscape+","+vEscape || !strings.Contains(o.Violations[0].Detail, "the runtime listed it") {
		t.Fatalf("listed: %+v", o.Violations)
	}
	// Live, what is younger than the lag waits.
	r.Until = 1310
	if o = check(r, checkOpts{Live: true, Lag: 20}); len(o.Violations) != 0 {
		t.Fatalf("within the lag: %+v", o.Violations)
	}
}

func TestIgnore(t *testing.T) {
	r := testRecords()
	r.Runtime[1] = runtimeLog{
		Created: []created{{T: 1201, Node: 1, ID: idA, Sandbox: sbS, NS: "soak", Pod: "p", Name: "app", FromLog: true}},
		Policy:  []policyLine{{T: 1200.9, Node: 1, Kind: "ignored", Key: "device-injector", Request: "CreateContainer", NS: "soak", Pod: "p", Ctr: "app"}},
	}
	r.Plugin = []pluginLine{acted(1, "ulimit-adjuster", "CreateContainer", sbS, idA, 1200.6)}
	// Inside an ignore window: excused.
	r.Faults = append(r.Faults, faultRec{ID: 2, Kind: kIgnoreFlip, Node: 1, Start: 1190, End: 1220})
	o := check(r, checkOpts{Live: true})
	if len(o.Violations) != 0 || o.Escape[1].Excused != 1 || o.Ignored[1]["device-injector"] != 1 {
		t.Fatalf("inside the window: %+v %+v", o.Violations, o.Escape[1])
	}
	// Inside the window, without the runtime's line naming the request
	// (seed 136: NRI logs only "plugin X failed to handle ..., proceeding
	// without it" for a plugin that timed out in the relay).
	pol := r.Runtime[1].Policy
	r.Runtime[1] = runtimeLog{Created: r.Runtime[1].Created}
	o = check(r, checkOpts{Live: true})
	if kinds(o.Violations) != vUnlogged || !strings.Contains(o.Violations[0].Detail, "logged no") {
		t.Fatalf("unlogged: %+v", o.Violations)
	}
	r.Runtime[1] = runtimeLog{Created: r.Runtime[1].Created, Policy: pol}
	// The same while the policy was "fail": the runtime let it through
	// against its policy.
	r.Faults = r.Faults[:1]
	o = check(r, checkOpts{Live: true})
	if kinds(o.Violations) != vIgnored {
		t.Fatalf("outside the window: %+v", o.Violations)
	}
}

func TestRefusalsNameThePlugin(t *testing.T) {
	r := testRecords()
	r.Runtime[1] = runtimeLog{Policy: []policyLine{
		{T: 1101, Kind: "refused", Key: "device-injector"},
		{T: 1102, Kind: "refused", Key: "", Text: "CreateContainer of container \"app\" in pod soak/p refused: something else"},
	}}
	r.Events = []eventRec{
		{T: 1103, Reason: "Failed", Name: "p", Message: `Error: rpc error: code = FailedPrecondition desc = CreateContainer of container "app" in pod soak/p refused: required NRI plugin "device-injector" is not registered; ...`},
		{T: 1104, Reason: "FailedCreatePodSandBox", Name: "p", Message: `rpc error: code = FailedPrecondition desc = RunPodSandbox of pod soak/p refused: required NRI plugin "other" is not registered`},
		{T: 1105, Reason: "Failed", Name: "p", Message: `rpc error: code = DeadlineExceeded desc = context deadline exceeded`},
		// Neither a refusal nor a CRI call that timed out.
		{T: 1106, Reason: "NetworkNotReady", Name: "p", Message: `network is not ready: container runtime network not ready: NetworkReady=false reason:NRIPluginNotReady message:network NRI plugins not ready: "device-injector" is disconnected (failed to handle RunPodSandbox request: context deadline exceeded)`},
		// While the runtime was down: not a violation.
		{T: 1111, Reason: "Failed", Name: "p", Message: `rpc error: code = DeadlineExceeded desc = context deadline exceeded`},
	}
	r.Faults = append(r.Faults, faultRec{ID: 2, Kind: kRuntimeKill, Node: 1, Start: 1110, End: 1112})
	r.Pods = []podRec{{T: 1000, UID: "u", Name: "p", Node: "nrigate-1"}}
	o := check(r, checkOpts{Live: true})
	if kinds(o.Violations) != vUnnamed+","+vUnnamed+","+vDeadline || o.Refused[1]["device-injector"] != 1 {
		t.Fatalf("%+v", o.Violations)
	}
}

func TestSelfCheckAndInjection(t *testing.T) {
	r := testRecords()
	exit := 43
	r.Pods = []podRec{{T: 1300, UID: "u", Name: "p", Node: "nrigate-1", Phase: "Running",
		Ctrs: []podCtr{{Name: "app", ID: "cri-o://" + idA, State: "running", LastID: "cri-o://" + idB, LastExit: &exit}}}}
	r.Snapshots = []snapshot{{T: 1400, Node: 1,
		Containers: []snapContainer{{ID: idA, Sandbox: sbS, State: "CONTAINER_RUNNING", Name: "app", NS: "soak", Pod: "p"}},
		Env:        []snapEnv{{ID: idA, Env: []string{"PATH=/bin", "A=1"}}}}}
	r.Plugin = []pluginLine{acted(1, "device-injector", "CreateContainer", sbS, idA, 1200), acted(1, "ulimit-adjuster", "CreateContainer", sbS, idA, 1200)}
	o := check(r, checkOpts{Live: true})
	if kinds(o.Violations) != vSelfCheck+","+vInjection || !strings.Contains(o.Violations[1].Detail, "without B=2") {
		t.Fatalf("%+v", o.Violations)
	}
}

func TestNodeConditionFollows(t *testing.T) {
	r := testRecords()
	r.Faults = nil
	r.Status[1] = []statusChange{{T: 900, State: "true"}, {T: 1200, State: "false"}, {T: 1201, State: "false"}, {T: 1300, State: "true"}}
	up := func(t float64, s string) nodeUpdate {
		u := nodeUpdate{T: t, Node: "nrigate-1"}
		u.C = append(u.C, struct {
			Type   string `json:"type"`
			Status string `json:"status"`
		}{"NRIPluginsNotReady", s})
		return u
	}
	r.NodeWatch = []nodeUpdate{up(990, "False"), up(1202, "True"), up(1250, "True"), up(1302.5, "False"), up(1500, "False")}
	vs, res := checkNPD(r, checkOpts{})
	// The first stretch needs no change (the Node showed False already).
	if len(vs) != 0 || res[1].Changes != 2 || len(res[1].Lags) != 2 || res[1].Lags[0] != 2 || res[1].Lags[1] != 2.5 {
		t.Fatalf("%+v %+v", vs, res[1])
	}
	// Late past the bound.
	r.NodeWatch[3].T = 1304
	if vs, _ = checkNPD(r, checkOpts{}); kinds(vs) != vNPD {
		t.Fatalf("late: %+v", vs)
	}
	// A runtime-down fault covers it.
	r.Faults = []faultRec{{ID: 1, Kind: kRuntimeKill, Node: 1, Start: 1299, End: 1302}}
	if vs, _ = checkNPD(r, checkOpts{}); len(vs) != 0 {
		t.Fatalf("excluded: %+v", vs)
	}
}

func TestSettle(t *testing.T) {
	r := testRecords()
	r.Run.HealEnd, r.Run.SettleBound = 1500, 60
	r.Pods = []podRec{
		{T: 1400, Type: "ADDED", UID: "a", Name: "a", Phase: "Pending"},
		{T: 1450, Type: "ADDED", UID: "b", Name: "b", Phase: "Running", Ctrs: []podCtr{{Name: "app", State: "waiting", Reason: "CreateContainerError"}}},
		{T: 1510, Type: "MODIFIED", UID: "a", Name: "a", Phase: "Running"},
		{T: 1530, Type: "MODIFIED", UID: "b", Name: "b", Phase: "Running", Ctrs: []podCtr{{Name: "app", State: "running"}}},
	}
	s, vs := checkSettle(r)
	if len(vs) != 0 || !s.Settled || s.Seconds != 30 {
		t.Fatalf("%+v %+v", s, vs)
	}
	r.Pods[3].T = 1570
	if s, vs = checkSettle(r); len(vs) != 1 || s.Settled || len(s.Left) != 1 || !strings.Contains(s.Left[0], "CreateContainerError") {
		t.Fatalf("%+v %+v", s, vs)
	}
}

func TestLeaks(t *testing.T) {
	s := leakSnap{
		API:       []apiPod{{UID: "11111111-1111-1111-1111-111111111111"}},
		Sandboxes: []leakSandbox{{snapSandbox: snapSandbox{ID: sbS, State: "SANDBOX_READY", UID: "11111111-1111-1111-1111-111111111111"}, NSPaths: []string{"/w/ns/netns/x"}}},
		Containers: []snapContainer{
			{ID: idA, Sandbox: sbS, UID: "11111111-1111-1111-1111-111111111111"},
		},
		Roots: []string{"/w/overlay/" + idC + "/merged"},
		Runc:  []string{idA, idB},
		Mounts: []string{"/w/overlay/" + idC + "/merged", "/w/run/overlay-containers/" + sbS + "/userdata/shm",
			"/w/ns/netns/x", "/w/ns/netns/y", "/w/kubelet/pods/22222222-2222-2222-2222-222222222222/volumes/v"},
		Pins: []string{"/w/ns/netns/x", "/w/ns/netns/y"},
		IPAM: []ipamEntry{{IP: "10.244.0.2", Owner: sbS}, {IP: "10.244.0.3", Owner: idB}},
		Cgroups: []string{"memory:kubepods/besteffort/pod11111111-1111-1111-1111-111111111111/crio-" + idA,
			"memory:kubepods/besteffort/pod33333333-3333-3333-3333-333333333333"},
	}
	l := leaksOf(s)
	want := map[string]int{"sandboxes": 0, "containers": 0, "runc": 1, "mounts": 2, "netns": 1, "ipam": 1, "cgroups": 1}
	for k, n := range want {
		if len(l[k]) != n {
			t.Errorf("%s: %v, want %d", k, l[k], n)
		}
	}
	// The pod gone from the API server: its sandbox, container and
	// cgroups are leaks.
	s.API = nil
	l = leaksOf(s)
	if len(l["sandboxes"]) != 1 || len(l["containers"]) != 1 || len(l["cgroups"]) != 2 {
		t.Errorf("no API pod: %v", l)
	}
}

// What a node held unaccounted for before the first fault is not the
// soak's leak, even if its state changed since; what is new is.
func TestLeaksBeforeNotCounted(t *testing.T) {
	before := leakSnap{Node: 1, IPAM: []ipamEntry{{IP: "10.244.0.2", Owner: sbS}},
		Sandboxes: []leakSandbox{{snapSandbox: snapSandbox{ID: sbS, State: "SANDBOX_NOTREADY"}}}}
	after := leakSnap{Node: 1, T: 10, IPAM: []ipamEntry{{IP: "10.244.0.2", Owner: sbS}, {IP: "10.244.0.3", Owner: idB}}}
	r := &records{Run: runInfo{Nodes: []nodeInfo{{N: 1, Name: "n1"}}}, Leaks: []leakSnap{after}, LeaksBefore: []leakSnap{before}}
	res, vs := checkLeaks(r)
	if got := res[1]["ipam"]; len(got) != 1 || !strings.Contains(got[0], "10.244.0.3") {
		t.Errorf("ipam leaks: %v, want only 10.244.0.3", got)
	}
	if len(vs) != 1 {
		t.Errorf("violations: %v, want 1", vs)
	}
	r.LeaksBefore = nil
	if res, _ := checkLeaks(r); len(res[1]["ipam"]) != 2 {
		t.Errorf("without a before snapshot: %v, want 2", res[1]["ipam"])
	}
}

// A request let through under ignore is logged when it ends: within the
// registration wait and the request timeout after the window closed it is
// the window's; later it is not.
func TestIgnoredAfterWindow(t *testing.T) {
	ws := [][2]float64{{100, 120}}
	for _, c := range []struct {
		t    float64
		want bool
	}{{99, false}, {110, true}, {131.5, true}, {132.5, false}} {
		if got := withinAfter(ws, c.t, 10+2); got != c.want {
			t.Errorf("withinAfter(%v) = %v, want %v", c.t, got, c.want)
		}
	}
}
