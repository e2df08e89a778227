package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"sort"
)

// The records test/soak/soak.bash writes into the soak's directory (DIR):
//
//	run.json              the run: seed, times, nodes, plugins, bounds, machine
//	faults.jsonl          {"id","kind","node","start"} when a fault starts,
//	                      {"id","end","detail"} when it has ended
//	churn.jsonl           each churn operation as done, with its time
//	samples.jsonl         every few seconds per node: the runtime's pid, RSS
//	                      (and its anonymous part), open fds, goroutines,
//	                      containers; the load average
//	rests.jsonl           each rest of the churn (a long soak's, and the one
//	                      after the soak's namespace is deleted): when the
//	                      soak was quiet and the samples it took then
//	pods.jsonl            a watch of the soak namespace's pods (receive time)
//	events.jsonl          a watch of its events
//	snapshots/*.json      every check: each node's sandboxes and containers as
//	                      its runtime lists them, the environment of the
//	                      soak's running containers
//	leaks/*.json          after the soak: each node's runtime lists, runc
//	                      containers, mounts, namespace pins, IP allocations
//	                      and cgroups, with the API server's pods of the node
//	plugin-logs/nN/...    hard links of the plugins' container logs
//
// and, from test/k8s/lib.bash, LOGS/nN-runtime.log (the runtime's log),
// LOGS/nN-nripluginsready.log (cristatus) and LOGS/node-conditions.jsonl
// (a watch of the Nodes).

type runInfo struct {
	Seed      uint64       `json:"seed"`
	Digest    string       `json:"digest"`
	Duration  float64      `json:"duration"`
	Command   string       `json:"command"`
	Start     float64      `json:"start"`
	FaultsEnd float64      `json:"faults_end"`
	HealEnd   float64      `json:"heal_end"`
	Settled   float64      `json:"settled"`
	End       float64      `json:"end"`
	Namespace string       `json:"namespace"`
	Nodes     []nodeInfo   `json:"nodes"`
	Plugins   []pluginInfo `json:"plugins"`
	NPD       npdInfo      `json:"npd"`
	// Bounds, in seconds.
	SettleBound    float64 `json:"settle_bound"`
	LeakBound      float64 `json:"leak_bound"`
	RequestTimeout float64 `json:"request_timeout"`
	// RegistrationWait: the longest registration_wait of the soak's
	// policies.
	RegistrationWait float64 `json:"registration_wait"`
	// GrowthMin: the least span of the second half over which growth is
	// judged (shorter runs report the slopes only).
	GrowthMin   float64           `json:"growth_min"`
	Machine     map[string]string `json:"machine"`
	Git         string            `json:"git"`
	Interrupted bool              `json:"interrupted"`
	StopReason  string            `json:"stop_reason"`
}

type nodeInfo struct {
	N         int    `json:"n"`
	Name      string `json:"name"`
	Runtime   string `json:"runtime"`
	Version   string `json:"version"`
	Readiness string `json:"readiness"`
}

// pluginInfo is a required plugin: its DaemonSet, policy key, the env var
// it injects ("NAME=VALUE") and the exit code of a soak container that
// misses it.
type pluginInfo struct {
	DS   string `json:"ds"`
	Key  string `json:"key"`
	Env  string `json:"env"`
	Exit int    `json:"exit"`
}

type npdInfo struct {
	Available bool    `json:"available"`
	Why       string  `json:"why"`
	Bound     float64 `json:"bound"`
	Condition string  `json:"condition"`
}

type faultRec struct {
	ID     int               `json:"id"`
	Kind   string            `json:"kind"`
	Node   int               `json:"node"`
	Start  float64           `json:"start"`
	End    float64           `json:"end"`
	Detail map[string]string `json:"detail"`
}

type churnRec struct {
	T    float64 `json:"t"`
	Op   string  `json:"op"`
	Node int     `json:"node"`
	Arg  int     `json:"arg"`
	OK   bool    `json:"ok"`
}

type sample struct {
	T          float64  `json:"t"`
	Node       int      `json:"node"`
	PID        int      `json:"pid"`
	RSSKB      *float64 `json:"rss_kb"`
	RSSAnonKB  *float64 `json:"rss_anon_kb"`
	FDs        *float64 `json:"fds"`
	Goroutines *float64 `json:"goroutines"`
	Containers *float64 `json:"containers"`
	Load1      *float64 `json:"load1"`
}

// restRec is a rest of the churn (test/soak/soak.bash's soak_rest and
// rest_hold): begun at Begin, quiet (no pod of the soak left, none of its
// containers running) at Quiet, sampled from From to To. OK false: it was
// not quiet (Why).
type restRec struct {
	Begin float64 `json:"begin"`
	Quiet float64 `json:"quiet"`
	From  float64 `json:"from"`
	To    float64 `json:"to"`
	OK    bool    `json:"ok"`
	Why   string  `json:"why"`
}

type podCtr struct {
	Name       string `json:"name"`
	Init       bool   `json:"init"`
	ID         string `json:"id"`
	State      string `json:"state"`
	Reason     string `json:"reason"`
	Exit       *int   `json:"exit"`
	Restarts   int    `json:"restarts"`
	Started    string `json:"started"`
	LastID     string `json:"last_id"`
	LastExit   *int   `json:"last_exit"`
	LastReason string `json:"last_reason"`
}

type podRec struct {
	T        float64  `json:"t"`
	Type     string   `json:"type"`
	UID      string   `json:"uid"`
	Name     string   `json:"name"`
	Node     string   `json:"node"`
	Phase    string   `json:"phase"`
	Deleting bool     `json:"deleting"`
	Owner    string   `json:"owner"`
	Ctrs     []podCtr `json:"ctrs"`
}

type eventRec struct {
	T       float64 `json:"t"`
	Type    string  `json:"type"`
	Reason  string  `json:"reason"`
	Kind    string  `json:"kind"`
	Name    string  `json:"name"`
	Count   int     `json:"count"`
	Message string  `json:"message"`
}

type snapSandbox struct {
	ID    string `json:"id"`
	State string `json:"state"`
	NS    string `json:"ns"`
	Name  string `json:"name"`
	UID   string `json:"uid"`
}

type snapContainer struct {
	ID      string `json:"id"`
	Sandbox string `json:"sandbox"`
	State   string `json:"state"`
	Name    string `json:"name"`
	NS      string `json:"ns"`
	Pod     string `json:"pod"`
	UID     string `json:"uid"`
}

type snapEnv struct {
	ID  string   `json:"id"`
	Env []string `json:"env"`
}

type snapshot struct {
	T          float64         `json:"t"`
	Node       int             `json:"node"`
	Sandboxes  []snapSandbox   `json:"pods"`
	Containers []snapContainer `json:"containers"`
	Env        []snapEnv       `json:"env"`
}

// leakSnap is what a node holds after the soak, next to the API server's
// pods of the node.
type leakSnap struct {
	T          float64         `json:"t"`
	Node       int             `json:"node"`
	API        []apiPod        `json:"api"`
	Sandboxes  []leakSandbox   `json:"pods"`
	Containers []snapContainer `json:"containers"`
	Runc       []string        `json:"runc"`
	Mounts     []string        `json:"mounts"`
	// Pins: the files where the runtime pins pod namespaces (CRI-O's
	// namespaces_dir, containerd's netns directory).
	Pins []string `json:"pins"`
	// Roots: the root filesystems (runtime spec root.path) of the
	// containers and sandboxes the runtime lists: CRI-O mounts a
	// container's at its storage layer's ID, not the container's.
	Roots   []string    `json:"roots"`
	IPAM    []ipamEntry `json:"ipam"`
	Cgroups []string    `json:"cgroups"`
}

type apiPod struct {
	UID  string `json:"uid"`
	NS   string `json:"ns"`
	Name string `json:"name"`
}

type leakSandbox struct {
	snapSandbox
	// NSPaths: the namespace paths of the sandbox's runtime spec.
	NSPaths []string `json:"ns_paths"`
}

type ipamEntry struct {
	IP    string `json:"ip"`
	Owner string `json:"owner"`
}

// nodeUpdate is a line of lib.bash's Node watch.
type nodeUpdate struct {
	T    float64 `json:"t"`
	Node string  `json:"node"`
	C    []struct {
		Type   string `json:"type"`
		Status string `json:"status"`
	} `json:"c"`
}

func (u nodeUpdate) status(typ string) string {
	for _, c := range u.C {
		if c.Type == typ {
			return c.Status
		}
	}
	return ""
}

// records is everything a check or a report reads.
type records struct {
	Run       runInfo
	Faults    []faultRec
	Churn     []churnRec
	Samples   []sample
	Rests     []restRec
	Pods      []podRec
	Events    []eventRec
	Snapshots []snapshot
	Leaks     []leakSnap
	// LeaksBefore: the leak snapshots taken once the soak's cluster was
	// set up, before its first fault (what the soak found, not made).
	LeaksBefore []leakSnap
	// Found by the soak itself (soak-violations.jsonl): a node that did
	// not recover.
	Found      []violation
	Runtime    map[int]runtimeLog
	Plugin     []pluginLine
	Status     map[int][]statusChange
	NodeWatch  []nodeUpdate
	Until      float64
	pluginKeys map[string]string
}

// loadRecords reads DIR and LOGS; lines after until (0: the run's end or
// now) are left out.
func loadRecords(dir, logs string, until float64) (*records, error) {
	r := &records{Runtime: map[int]runtimeLog{}, Status: map[int][]statusChange{}}
	b, err := os.ReadFile(filepath.Join(dir, "run.json"))
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(b, &r.Run); err != nil {
		return nil, fmt.Errorf("run.json: %w", err)
	}
	if until == 0 {
		until = r.Run.End
	}
	if until == 0 {
		until = 1e18
	}
	r.Until = until
	r.pluginKeys = map[string]string{}
	for _, p := range r.Run.Plugins {
		r.pluginKeys[p.DS] = p.Key
	}
	if err := r.loadFaults(filepath.Join(dir, "faults.jsonl")); err != nil {
		return nil, err
	}
	for _, l := range []struct {
		file string
		f    func([]byte) error
	}{
		{"churn.jsonl", appendJSON(&r.Churn)},
		{"samples.jsonl", appendJSON(&r.Samples)},
		{"rests.jsonl", appendJSON(&r.Rests)},
		{"pods.jsonl", appendJSON(&r.Pods)},
		{"events.jsonl", appendJSON(&r.Events)},
	} {
		if err := readJSONL(filepath.Join(dir, l.file), l.f); err != nil {
			return nil, err
		}
	}
	files, _ := filepath.Glob(filepath.Join(dir, "snapshots", "*.json"))
	sort.Strings(files)
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		var s snapshot
		if err := json.Unmarshal(b, &s); err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		if s.T <= until {
			r.Snapshots = append(r.Snapshots, s)
		}
	}
	if err := r.readLeakSnaps(dir); err != nil {
		return nil, err
	}
	for _, n := range r.Run.Nodes {
		f, err := os.Open(filepath.Join(logs, fmt.Sprintf("n%d-runtime.log", n.N)))
		if err != nil {
			return nil, err
		}
		rl, err := parseRuntimeLog(f, n.N, n.Runtime, r.Run.Start, until)
		f.Close()
		if err != nil {
			return nil, err
		}
		r.Runtime[n.N] = rl
		if f, err := os.Open(filepath.Join(logs, fmt.Sprintf("n%d-nripluginsready.log", n.N))); err == nil {
			sc, err := parseStatusLog(f)
			f.Close()
			if err != nil {
				return nil, err
			}
			r.Status[n.N] = sc
		}
	}
	r.Plugin, err = readPluginLogs(filepath.Join(dir, "plugin-logs"), r.Run.Start-600, until)
	if err != nil {
		return nil, err
	}
	sort.SliceStable(r.Plugin, func(i, j int) bool { return r.Plugin[i].T < r.Plugin[j].T })
	err = readJSONL(filepath.Join(logs, "node-conditions.jsonl"), func(b []byte) error {
		var u nodeUpdate
		if err := json.Unmarshal(b, &u); err != nil {
			return err
		}
		if u.T >= r.Run.Start-60 && u.T <= until {
			r.NodeWatch = append(r.NodeWatch, u)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	// A run cut short has no end: its records stop where they stop.
	if r.Run.End == 0 && until == 1e18 {
		r.Until = r.end()
	}
	r.trim()
	return r, nil
}

// loadLeaks reads DIR's run.json and leak snapshots only.
func loadLeaks(dir string) (*records, error) {
	r := &records{}
	b, err := os.ReadFile(filepath.Join(dir, "run.json"))
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(b, &r.Run); err != nil {
		return nil, fmt.Errorf("run.json: %w", err)
	}
	if err := r.readLeakSnaps(dir); err != nil {
		return nil, err
	}
	return r, nil
}

// readLeakSnaps reads DIR's leak snapshots: leaks/ (at the end) and
// leaks-before/ (before the first fault).
func (r *records) readLeakSnaps(dir string) error {
	for _, sub := range []struct {
		name string
		to   *[]leakSnap
	}{{"leaks", &r.Leaks}, {"leaks-before", &r.LeaksBefore}} {
		files, _ := filepath.Glob(filepath.Join(dir, sub.name, "*.json"))
		sort.Strings(files)
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err != nil {
				return err
			}
			var s leakSnap
			if err := json.Unmarshal(b, &s); err != nil {
				return fmt.Errorf("%s: %w", f, err)
			}
			*sub.to = append(*sub.to, s)
		}
	}
	return nil
}

// trim drops the records after Until.
func (r *records) trim() {
	keep := func(n int, t func(int) float64) int {
		i := 0
		for i < n && t(i) <= r.Until {
			i++
		}
		return i
	}
	r.Samples = r.Samples[:keep(len(r.Samples), func(i int) float64 { return r.Samples[i].T })]
	r.Pods = r.Pods[:keep(len(r.Pods), func(i int) float64 { return r.Pods[i].T })]
	r.Events = r.Events[:keep(len(r.Events), func(i int) float64 { return r.Events[i].T })]
}

func (r *records) loadFaults(file string) error {
	byID := map[int]*faultRec{}
	var order []int
	err := readJSONL(file, func(b []byte) error {
		var f faultRec
		if err := json.Unmarshal(b, &f); err != nil {
			return err
		}
		if p, ok := byID[f.ID]; ok {
			if f.End != 0 {
				p.End = f.End
			}
			for k, v := range f.Detail {
				if p.Detail == nil {
					p.Detail = map[string]string{}
				}
				p.Detail[k] = v
			}
			return nil
		}
		byID[f.ID] = &f
		order = append(order, f.ID)
		return nil
	})
	for _, id := range order {
		r.Faults = append(r.Faults, *byID[id])
	}
	return err
}

// readJSONL calls f with each line of file; a missing file has none. A
// last line cut short (the writer still at it) is left out.
// appendJSON returns a readJSONL callback that decodes each line into a T
// and appends it to *dst; readJSONL names the line of a decoding error.
func appendJSON[T any](dst *[]T) func([]byte) error {
	return func(b []byte) error {
		var v T
		err := json.Unmarshal(b, &v)
		*dst = append(*dst, v)
		return err
	}
}

func readJSONL(file string, f func([]byte) error) error {
	fh, err := os.Open(file)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer fh.Close()
	sc := bufio.NewScanner(fh)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	var pending error
	line := 0
	for sc.Scan() {
		line++
		if pending != nil {
			return pending
		}
		if len(sc.Bytes()) == 0 {
			continue
		}
		if err := f(sc.Bytes()); err != nil {
			pending = fmt.Errorf("%s:%d: %w", file, line, err)
		}
	}
	return sc.Err()
}

// end returns the run's end: as recorded, or else the last record's time
// (a run cut short).
func (r *records) end() float64 {
	if r.Run.End != 0 {
		return r.Run.End
	}
	last := r.Run.Start
	for _, s := range r.Samples {
		last = math.Max(last, s.T)
	}
	for _, p := range r.Pods {
		last = math.Max(last, p.T)
	}
	for _, f := range r.Faults {
		last = math.Max(last, math.Max(f.Start, f.End))
	}
	return math.Min(last, r.Until)
}

// faultBefore returns the last fault that started at or before t.
func (r *records) faultBefore(t float64) *faultRec {
	var last *faultRec
	for i := range r.Faults {
		if r.Faults[i].Start <= t {
			last = &r.Faults[i]
		}
	}
	return last
}

// nodeName returns node n's name.
func (r *records) nodeName(n int) string {
	for _, ni := range r.Run.Nodes {
		if ni.N == n {
			return ni.Name
		}
	}
	return fmt.Sprintf("node %d", n)
}

func (r *records) nodeOf(name string) int {
	for _, ni := range r.Run.Nodes {
		if ni.Name == name {
			return ni.N
		}
	}
	return 0
}
