package main

import (
	"fmt"
	"math"
	"regexp"
	"sort"
	"strings"
)

// violation is a broken invariant: when, what, where, and the last fault
// that started before it.
type violation struct {
	T      float64   `json:"t"`
	Kind   string    `json:"kind"`
	Node   int       `json:"node"`
	Detail string    `json:"detail"`
	Fault  *faultRec `json:"fault_before,omitempty"`
}

// The invariants (violation kinds).
const (
	vEscape    = "escape"           // created without a required plugin having acted on it
	vInjection = "no-injection"     // a running container without a plugin's injection
	vSelfCheck = "self-check"       // a soak container found a plugin's injection missing
	vUnnamed   = "refusal-unnamed"  // a refusal that does not name a required plugin
	vIgnored   = "ignored-on-fail"  // let through without a plugin while fail_policy was "fail"
	vUnlogged  = "ignored-unlogged" // let through without a plugin under "ignore", the pod not named in the runtime's log
	vDeadline  = "deadline"         // the kubelet got DeadlineExceeded
	vSettle    = "settle"           // pods Pending/ContainerCreating past the bound after the last fault
	vLeak      = "leak"             // something left after the soak
	vGrowth    = "growth"           // RSS, goroutines or fds growing over the second half
	vNPD       = "node-condition"   // the Node condition did not follow the runtime within its bound
	vRecovery  = "recovery"         // a node not back (plugins ready) long after a fault (found by the soak)
)

// checkOpts: live checks run while the soak runs, on what is complete.
type checkOpts struct {
	Live bool
	// Lag: items younger than this (seconds before Until) are not
	// checked yet (a plugin's log reaches the soak through the kubelet).
	Lag float64
}

// outcome is what the checks found and what they counted, for the report.
type outcome struct {
	Violations []violation
	// Per node.
	Escape map[int]*escapeCount
	// Refusals per node and key, and those whose key is not a required
	// plugin's.
	Refused   map[int]map[string]int
	Ignored   map[int]map[string]int
	Waited    map[int][]float64
	Settle    *settleResult
	Leaks     map[int]map[string][]string
	Growth    []growthResult
	NPD       map[int]*npdResult
	Deadlines int
}

type escapeCount struct {
	Sandboxes, Containers int // in the soak's namespace, checked
	Excused               int // let through under "ignore", as logged
	FromSnapshot          int // seen only in a runtime's list
	Running               int // running containers whose environment was read
}

type settleResult struct {
	Seconds float64 // from the end of the heal to no pod Pending/ContainerCreating
	Settled bool
	Left    []string
}

type npdResult struct {
	Changes  int       // runtime state changes held longer than the bound
	Lags     []float64 // seconds from a change to the Node condition following it
	Excluded float64   // seconds left out (runtime or NPD down)
	Skipped  string
}

func (r *records) violation(t float64, kind string, node int, format string, a ...any) violation {
	v := violation{T: t, Kind: kind, Node: node, Detail: fmt.Sprintf(format, a...)}
	if f := r.faultBefore(t); f != nil {
		c := *f
		v.Fault = &c
	}
	return v
}

// check runs every invariant that applies.
func check(r *records, o checkOpts) outcome {
	out := outcome{
		Escape:  map[int]*escapeCount{},
		Refused: map[int]map[string]int{},
		Ignored: map[int]map[string]int{},
		Waited:  map[int][]float64{},
		Leaks:   map[int]map[string][]string{},
		NPD:     map[int]*npdResult{},
	}
	for _, n := range r.Run.Nodes {
		out.Escape[n.N] = &escapeCount{}
	}
	for _, v := range r.Found {
		if v.T <= r.Until {
			out.Violations = append(out.Violations, r.violation(v.T, v.Kind, v.Node, "%s", v.Detail))
		}
	}
	out.Violations = append(out.Violations, checkActed(r, o, out.Escape)...)
	out.Violations = append(out.Violations, checkInjected(r, out.Escape)...)
	out.Violations = append(out.Violations, checkSelfCheck(r)...)
	out.Violations = append(out.Violations, checkPolicyLines(r, &out)...)
	dl := checkDeadlines(r)
	out.Deadlines = len(dl)
	out.Violations = append(out.Violations, dl...)
	vs, npd := checkNPD(r, o)
	out.NPD = npd
	out.Violations = append(out.Violations, vs...)
	if !o.Live {
		if r.Run.HealEnd > 0 {
			s, vs := checkSettle(r)
			out.Settle = &s
			out.Violations = append(out.Violations, vs...)
		}
		if len(r.Leaks) > 0 {
			l, vs := checkLeaks(r)
			out.Leaks = l
			out.Violations = append(out.Violations, vs...)
		}
		g, vs := checkGrowth(r)
		out.Growth = g
		out.Violations = append(out.Violations, vs...)
	}
	sort.SliceStable(out.Violations, func(i, j int) bool { return out.Violations[i].T < out.Violations[j].T })
	return out
}

// excuse: the runtime logged that the request went through without the
// plugin KEY under fail_policy "ignore" (checkPolicyLines checks that this
// happened only while the policy was "ignore").
func (r *records) excused(node int, key, request, ns, pod, ctr string, before float64) bool {
	for _, p := range r.Runtime[node].Policy {
		if p.Kind == "ignored" && p.Key == key && p.Request == request && p.NS == ns && p.Pod == pod &&
			p.Ctr == ctr && p.T <= before+0.001 {
			return true
		}
	}
	return false
}

// checkActed: every sandbox and container of the soak's namespace that a
// runtime created (its log) or listed (sandbox READY, container started)
// was acted on by every required plugin before the runtime reported it:
// an acted line of the plugin on that node naming its ID, no later than
// the runtime's line (or the first list that showed it).
func checkActed(r *records, o checkOpts, count map[int]*escapeCount) []violation {
	type key struct {
		node   int
		plugin string
		event  string
		id     string
	}
	acted := map[key]float64{}
	for _, p := range r.Plugin {
		if p.Kind != "acted" {
			continue
		}
		id := p.Container
		if p.Event == "RunPodSandbox" {
			id = p.Sandbox
		}
		k := key{p.Node, p.Plugin, p.Event, id}
		if t, ok := acted[k]; !ok || p.T < t {
			acted[k] = p.T
		}
	}
	items := map[string]created{}
	for n, rl := range r.Runtime {
		for _, c := range rl.Created {
			if c.NS != r.Run.Namespace {
				continue
			}
			k := fmt.Sprint(n, c.ID)
			if _, ok := items[k]; !ok {
				items[k] = c
			}
		}
	}
	for _, s := range r.Snapshots {
		for _, sb := range s.Sandboxes {
			k := fmt.Sprint(s.Node, sb.ID)
			if _, ok := items[k]; ok || sb.NS != r.Run.Namespace || sb.State != "SANDBOX_READY" {
				continue
			}
			items[k] = created{T: s.T, Node: s.Node, ID: sb.ID, NS: sb.NS, Pod: sb.Name}
		}
		for _, c := range s.Containers {
			k := fmt.Sprint(s.Node, c.ID)
			if _, ok := items[k]; ok || c.NS != r.Run.Namespace || (c.State != "CONTAINER_RUNNING" && c.State != "CONTAINER_EXITED") {
				continue
			}
			items[k] = created{T: s.T, Node: s.Node, ID: c.ID, Sandbox: c.Sandbox, NS: c.NS, Pod: c.Pod, Name: c.Name}
		}
	}
	var out []violation
	windows := r.ignoreWindows()
	limit := r.Until - o.Lag
	for _, c := range items {
		if c.T > limit || c.T < r.Run.Start {
			continue
		}
		ec := count[c.Node]
		if ec == nil {
			continue
		}
		event, what := "CreateContainer", fmt.Sprintf("container %.12s (%s/%s/%s)", c.ID, c.NS, c.Pod, c.Name)
		if c.Name == "" {
			event, what = "RunPodSandbox", fmt.Sprintf("sandbox %.12s (%s/%s)", c.ID, c.NS, c.Pod)
			ec.Sandboxes++
		} else {
			ec.Containers++
		}
		if !c.FromLog {
			ec.FromSnapshot++
		}
		for _, p := range r.Run.Plugins {
			t, ok := acted[key{c.Node, p.DS, event, c.ID}]
			if ok && t <= c.T+0.001 {
				continue
			}
			if r.excused(c.Node, p.Key, event, c.NS, c.Pod, c.Name, c.T) {
				ec.Excused++
				continue
			}
			how := "no acted " + event + " of plugin " + p.Key + " names it"
			if ok {
				how = fmt.Sprintf("plugin %s's acted %s came %.3f s after it", p.Key, event, t-c.T)
			}
			src := "the runtime reported it created"
			if !c.FromLog {
				src = "the runtime listed it"
			}
			kind := vEscape
			if within(windows[c.Node], c.T) {
				// Allowed under "ignore", but the runtime must say so.
				kind, how = vUnlogged, how+", and the runtime logged no \"proceeds without it (fail_policy \"ignore\")\" for it"
			}
			out = append(out, r.violation(c.T, kind, c.Node, "%s on %s: %s at %s; %s",
				what, r.nodeName(c.Node), src, r.at(c.T), how))
		}
	}
	return out
}

// at formats t as seconds from the start.
func (r *records) at(t float64) string { return fmt.Sprintf("+%.1fs", t-r.Run.Start) }

// checkInjected: each running container of the soak's namespace whose
// environment a snapshot read carries every plugin's injection, unless
// the runtime let it through under "ignore".
func checkInjected(r *records, count map[int]*escapeCount) []violation {
	var out []violation
	seen := map[string]bool{}
	for _, s := range r.Snapshots {
		byID := map[string]snapContainer{}
		for _, c := range s.Containers {
			byID[c.ID] = c
		}
		for _, e := range s.Env {
			c, ok := byID[e.ID]
			if !ok || c.NS != r.Run.Namespace {
				continue
			}
			if !seen[c.ID] && count[s.Node] != nil {
				count[s.Node].Running++
			}
			for _, p := range r.Run.Plugins {
				if contains(e.Env, p.Env) || r.excused(s.Node, p.Key, "CreateContainer", c.NS, c.Pod, c.Name, s.T) {
					continue
				}
				k := c.ID + p.Key
				if seen[k] {
					continue
				}
				seen[k] = true
				out = append(out, r.violation(s.T, vInjection, s.Node, "container %.12s (%s/%s/%s) running on %s without %s, and the runtime logged no \"proceeds without it\" for it",
					c.ID, c.NS, c.Pod, c.Name, r.nodeName(s.Node), p.Env))
			}
			seen[c.ID] = true
		}
	}
	return out
}

func contains(v []string, s string) bool {
	for _, x := range v {
		if x == s {
			return true
		}
	}
	return false
}

// checkSelfCheck: no soak container exited with a plugin's exit code (its
// command checks its own environment first), unless the runtime let it
// through without that plugin under "ignore".
func checkSelfCheck(r *records) []violation {
	var out []violation
	windows := r.ignoreWindows()
	seen := map[string]bool{}
	for _, p := range r.Pods {
		node := r.nodeOf(p.Node)
		for _, c := range p.Ctrs {
			for _, ex := range []struct {
				id   string
				code *int
			}{{c.ID, c.Exit}, {c.LastID, c.LastExit}} {
				if ex.code == nil || ex.id == "" || seen[ex.id] {
					continue
				}
				for _, pl := range r.Run.Plugins {
					if *ex.code != pl.Exit {
						continue
					}
					seen[ex.id] = true
					if r.excused(node, pl.Key, "CreateContainer", r.Run.Namespace, p.Name, c.Name, p.T) {
						continue
					}
					kind, also := vSelfCheck, ""
					if within(windows[node], p.T) {
						kind, also = vUnlogged, " under \"ignore\", and the runtime logged no \"proceeds without it\" for it"
					}
					out = append(out, r.violation(p.T, kind, node, "container %s of pod %s/%s on %s exited %d: it found no %s (%s)%s",
						c.Name, r.Run.Namespace, p.Name, p.Node, pl.Exit, pl.Env, shortID(ex.id), also))
				}
			}
		}
	}
	return out
}

func shortID(id string) string {
	if i := strings.Index(id, "://"); i >= 0 {
		id = id[i+3:]
	}
	if len(id) > 12 {
		id = id[:12]
	}
	return id
}

// ignoreWindows returns, per node, the intervals in which its policy was
// "ignore" (ignore-flip faults: from the reload to "ignore" until the
// reload back to "fail" was confirmed; an unfinished one lasts).
func (r *records) ignoreWindows() map[int][][2]float64 {
	w := map[int][][2]float64{}
	for _, f := range r.Faults {
		if f.Kind != kIgnoreFlip {
			continue
		}
		end := f.End
		if end == 0 {
			end = math.Inf(1)
		}
		w[f.Node] = append(w[f.Node], [2]float64{f.Start, end})
	}
	return w
}

// withinAfter: t in one of ws, or at most after past its end.
func withinAfter(ws [][2]float64, t, after float64) bool {
	for _, w := range ws {
		if t >= w[0] && t <= w[1]+after {
			return true
		}
	}
	return false
}

func within(ws [][2]float64, t float64) bool { return withinAfter(ws, t, 0) }

var reNamedAnywhere = regexp.MustCompile(`required NRI plugin "([^"]+)"`)

// checkPolicyLines: every refusal a runtime logged, and every refusal the
// kubelet reported in an event, names a required plugin; requests went
// through without a plugin ("ignore") only while a node's policy was
// "ignore". Counts refusals, requests let through and waits.
func checkPolicyLines(r *records, out *outcome) []violation {
	var vs []violation
	keys := map[string]bool{}
	for _, p := range r.Run.Plugins {
		keys[p.Key] = true
	}
	windows := r.ignoreWindows()
	for n, rl := range r.Runtime {
		out.Refused[n] = map[string]int{}
		out.Ignored[n] = map[string]int{}
		for _, p := range rl.Policy {
			switch p.Kind {
			case "refused":
				if !keys[p.Key] {
					vs = append(vs, r.violation(p.T, vUnnamed, n, "%s logged a refusal that names no required plugin: %q",
						r.nodeName(n), p.Text))
					out.Refused[n]["(none)"]++
					continue
				}
				out.Refused[n][p.Key]++
			case "ignored":
				out.Ignored[n][p.Key]++
				// A request keeps the policy it started with; the runtime
				// logs the decision when it ends, at most the registration
				// wait and the request timeout after the window closed.
				if !withinAfter(windows[n], p.T, r.Run.RegistrationWait+r.Run.RequestTimeout) {
					vs = append(vs, r.violation(p.T, vIgnored, n, "%s let a request through without %s while its fail_policy was \"fail\": %q",
						r.nodeName(n), p.Key, p.Text))
				}
			case "waited":
				if p.NS == r.Run.Namespace {
					out.Waited[n] = append(out.Waited[n], p.Waited)
				}
			}
		}
	}
	// A refusal reaches the kubelet as FailedPrecondition with NRI's text
	// ("... refused: required NRI plugin ..."); NetworkNotReady events
	// name the plugin too, but refuse nothing.
	for _, e := range r.Events {
		if !strings.Contains(e.Message, "refused:") && !strings.Contains(e.Message, "FailedPrecondition") {
			continue
		}
		m := reNamedAnywhere.FindStringSubmatch(e.Message)
		if m == nil || !keys[m[1]] {
			vs = append(vs, r.violation(e.T, vUnnamed, r.nodeOfPod(e.Name, e.T), "event %s about %s names no required plugin: %q",
				e.Reason, e.Name, e.Message))
		}
	}
	return vs
}

// nodeOfPod returns the node a pod of the soak's namespace was bound to.
func (r *records) nodeOfPod(name string, before float64) int {
	n := 0
	for _, p := range r.Pods {
		if p.Name == name && p.Node != "" {
			n = r.nodeOf(p.Node)
			if p.T > before {
				break
			}
		}
	}
	return n
}

// A CRI call of the kubelet that failed with DeadlineExceeded. (A
// runtime's status text may say "context deadline exceeded" too: why it
// dropped a plugin, which NetworkNotReady events carry.)
var reDeadline = regexp.MustCompile(`code = DeadlineExceeded`)

// runtimeDown returns, per node, the intervals in which its runtime was
// down or restarting (runtime-kill*, node-restart), or its kubelet, until
// 5 s after the fault ended.
func (r *records) runtimeDown(kinds ...string) map[int][][2]float64 {
	w := map[int][][2]float64{}
	for _, f := range r.Faults {
		for _, k := range kinds {
			if f.Kind != k {
				continue
			}
			end := f.End
			if end == 0 {
				end = math.Inf(1)
			}
			w[f.Node] = append(w[f.Node], [2]float64{f.Start, end + 5})
		}
	}
	return w
}

// checkDeadlines: the kubelet never got DeadlineExceeded from a runtime
// that was up (a gated request waits at most registration_wait, far below
// the kubelet's CRI timeout; and the wait never outlasts the caller's
// deadline).
func checkDeadlines(r *records) []violation {
	var vs []violation
	down := r.runtimeDown(kRuntimeKill, kRuntimeKillHeld, kNodeRestart)
	for _, e := range r.Events {
		if !reDeadline.MatchString(e.Message) {
			continue
		}
		n := r.nodeOfPod(e.Name, e.T)
		if within(down[n], e.T) {
			continue
		}
		vs = append(vs, r.violation(e.T, vDeadline, n, "event %s about %s: %q", e.Reason, e.Name, e.Message))
	}
	return vs
}

// unsettled reports whether a pod is Pending or a container waits to be
// created.
func unsettled(p podRec) (bool, string) {
	if p.Phase == "Pending" {
		why := "Pending"
		for _, c := range p.Ctrs {
			if c.State == "waiting" && c.Reason != "" {
				why += ", " + c.Name + " " + c.Reason
			}
		}
		return true, why
	}
	for _, c := range p.Ctrs {
		switch c.Reason {
		case "ContainerCreating", "PodInitializing", "CreateContainerError", "CreateContainerConfigError", "RunContainerError":
			if c.State == "waiting" {
				return true, c.Name + " " + c.Reason
			}
		}
	}
	return false, ""
}

// checkSettle: once the last fault had ended and the cluster was healed,
// no pod of the soak stayed Pending or waited for a container to be
// created longer than the bound.
func checkSettle(r *records) (settleResult, []violation) {
	state := map[string]podRec{}
	var res settleResult
	allSettled := func() (bool, []string) {
		var left []string
		for _, p := range state {
			if ok, why := unsettled(p); ok {
				left = append(left, p.Name+" ("+why+")")
			}
		}
		sort.Strings(left)
		return len(left) == 0, left
	}
	i := 0
	for ; i < len(r.Pods) && r.Pods[i].T <= r.Run.HealEnd; i++ {
		apply(state, r.Pods[i])
	}
	deadline := r.Run.HealEnd + r.Run.SettleBound
	if ok, _ := allSettled(); ok {
		res.Settled = true
		return res, nil
	}
	for ; i < len(r.Pods); i++ {
		if r.Pods[i].T > deadline {
			break
		}
		apply(state, r.Pods[i])
		if ok, _ := allSettled(); ok {
			res.Settled, res.Seconds = true, r.Pods[i].T-r.Run.HealEnd
			return res, nil
		}
	}
	_, res.Left = allSettled()
	res.Seconds = r.Run.SettleBound
	left := res.Left
	if len(left) > 5 {
		left = append(left[:5:5], fmt.Sprintf("and %d more", len(res.Left)-5))
	}
	return res, []violation{r.violation(deadline, vSettle, 0, "%d pods still Pending or ContainerCreating %.0f s after the last fault ended and the cluster was healed: %s",
		len(res.Left), r.Run.SettleBound, strings.Join(left, "; "))}
}

func apply(state map[string]podRec, p podRec) {
	if p.Type == "DELETED" {
		delete(state, p.UID)
		return
	}
	state[p.UID] = p
}

// checkNPD: each node's Node condition followed its runtime's plugin
// readiness within the bound: for each stretch in which the runtime
// reported NRIPluginsReady the same for longer than the bound, from the
// bound on, every update of the Node showed the matching condition
// (NRIPluginsNotReady True while a plugin was not ready). Left out: the
// faults in which the runtime or node-problem-detector (killed with the
// pods by a node restart) was down, until the bound after they ended.
func checkNPD(r *records, o checkOpts) ([]violation, map[int]*npdResult) {
	res := map[int]*npdResult{}
	var vs []violation
	if !r.Run.NPD.Available {
		for _, n := range r.Run.Nodes {
			res[n.N] = &npdResult{Skipped: r.Run.NPD.Why}
		}
		return nil, res
	}
	bound := r.Run.NPD.Bound
	until := r.Until
	if o.Live {
		until -= bound
	}
	down := map[int][][2]float64{}
	for _, f := range r.Faults {
		if f.Kind != kRuntimeKill && f.Kind != kRuntimeKillHeld && f.Kind != kNodeRestart {
			continue
		}
		end := f.End
		if end == 0 {
			end = math.Inf(1)
		}
		down[f.Node] = append(down[f.Node], [2]float64{f.Start, end + bound})
	}
	for _, n := range r.Run.Nodes {
		nr := &npdResult{}
		res[n.N] = nr
		// The runtime's state, merged where the status did not change.
		type stretch struct {
			from  float64
			ready string
		}
		var st []stretch
		for _, c := range r.Status[n.N] {
			ready := c.State
			if ready == "absent" {
				ready = "true"
			}
			if c.T < r.Run.Start {
				st = []stretch{{r.Run.Start, ready}}
				continue
			}
			if len(st) > 0 && st[len(st)-1].ready == ready {
				continue
			}
			st = append(st, stretch{c.T, ready})
		}
		var updates []nodeUpdate
		for _, u := range r.NodeWatch {
			if u.Node == n.Name {
				updates = append(updates, u)
			}
		}
		for i, s := range st {
			to := until
			if i+1 < len(st) {
				to = math.Min(st[i+1].from, until)
			}
			want := map[string]string{"true": "False", "false": "True"}[s.ready]
			if want == "" || to-s.from <= bound {
				continue
			}
			from := s.from + bound
			// Cut out the windows where the runtime or NPD was down.
			segs := [][2]float64{{from, to}}
			for _, d := range down[n.N] {
				var next [][2]float64
				for _, g := range segs {
					if d[1] <= g[0] || d[0] >= g[1] {
						next = append(next, g)
						continue
					}
					nr.Excluded += math.Min(d[1], g[1]) - math.Max(d[0], g[0])
					if d[0] > g[0] {
						next = append(next, [2]float64{g[0], d[0]})
					}
					if d[1] < g[1] {
						next = append(next, [2]float64{d[1], g[1]})
					}
				}
				segs = next
			}
			if len(segs) == 0 {
				continue
			}
			// A change NPD had to follow (the Node showed the other
			// status): its lag, the first update from the change on that
			// showed it, unless the runtime or NPD went down meanwhile.
			var before *nodeUpdate
			for j := range updates {
				if updates[j].T <= s.from {
					before = &updates[j]
				}
			}
			if before != nil && before.status(r.Run.NPD.Condition) != want && !within(down[n.N], s.from) {
				nr.Changes++
				for _, u := range updates {
					if u.T < s.from {
						continue
					}
					if within(down[n.N], u.T) {
						break
					}
					if u.status(r.Run.NPD.Condition) == want {
						nr.Lags = append(nr.Lags, u.T-s.from)
						break
					}
				}
			}
			for _, g := range segs {
				// The Node as it was at g[0], then every update in g.
				var last *nodeUpdate
				for j := range updates {
					if updates[j].T <= g[0] {
						last = &updates[j]
					}
				}
				check := func(u nodeUpdate, at float64) bool {
					got := u.status(r.Run.NPD.Condition)
					if got == "" || got == want {
						return true
					}
					vs = append(vs, r.violation(at, vNPD, n.N, "%s's %s was %s at %s while its runtime had reported NRIPluginsReady=%s since %s (bound %.1f s)",
						n.Name, r.Run.NPD.Condition, got, r.at(at), s.ready, r.at(s.from), bound))
					return false
				}
				if last != nil && !check(*last, g[0]) {
					break
				}
				for _, u := range updates {
					if u.T > g[0] && u.T < g[1] && !check(u, u.T) {
						break
					}
				}
			}
		}
	}
	return vs, res
}
