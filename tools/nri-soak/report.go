package main

import (
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"
)

func u64(v uint64) string { return strconv.FormatUint(v, 10) }

// podWaits returns, per node, the seconds from a pod's first appearance in
// the watch to the first update that showed it Running (or done), and how
// many pods were deleted before they ran; and the pods created per node.
func podWaits(r *records) (waits map[int][]float64, created, unstarted map[int]int) {
	waits, created, unstarted = map[int][]float64{}, map[int]int{}, map[int]int{}
	first := map[string]float64{}
	node := map[string]int{}
	done := map[string]bool{}
	for _, p := range r.Pods {
		if _, ok := first[p.UID]; !ok {
			first[p.UID] = p.T
		}
		if n := r.nodeOf(p.Node); n != 0 {
			node[p.UID] = n
		}
		if done[p.UID] {
			continue
		}
		switch {
		case p.Phase == "Running" || p.Phase == "Succeeded" || p.Phase == "Failed":
			done[p.UID] = true
			if node[p.UID] != 0 {
				waits[node[p.UID]] = append(waits[node[p.UID]], p.T-first[p.UID])
			}
		case p.Type == "DELETED":
			done[p.UID] = true
			unstarted[node[p.UID]]++
		}
	}
	for uid := range first {
		created[node[uid]]++
	}
	return waits, created, unstarted
}

func pct(v []float64, q float64) string {
	if len(v) == 0 {
		return "–"
	}
	return fmt.Sprintf("%.1f s", quantile(v, q))
}

func dur(s float64) string {
	d := time.Duration(s * float64(time.Second)).Round(time.Second)
	return d.String()
}

func clock(r *records, t float64) string {
	if t == 0 {
		return "–"
	}
	s := t - r.Run.Start
	return fmt.Sprintf("%d:%02d", int(s)/60, int(s)%60)
}

func sum(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

func keysOf(m map[string]int) string {
	var ks []string
	for k, v := range m {
		ks = append(ks, fmt.Sprintf("%s %d", k, v))
	}
	sort.Strings(ks)
	return strings.Join(ks, ", ")
}

// describe writes violation v as the soak prints the first one.
func (r *records) describe(v violation) string {
	s := fmt.Sprintf("%s at %s (%s): %s", v.Kind, r.at(v.T), time.Unix(0, int64(v.T*1e9)).UTC().Format("15:04:05.000"), v.Detail)
	if v.Fault != nil {
		f := v.Fault
		where := "every node"
		if f.Node != 0 {
			where = r.nodeName(f.Node)
		}
		end := "not ended"
		if f.End != 0 {
			end = "ended " + r.at(f.End)
		}
		s += fmt.Sprintf("; the fault before it: #%d %s on %s, started %s, %s", f.ID, f.Kind, where, r.at(f.Start), end)
	} else {
		s += "; no fault before it"
	}
	return s
}

// writeSummary writes the run's summary in Markdown; headings start at
// level h.
func writeSummary(w io.Writer, r *records, o outcome, plotFile string, h int) {
	H := strings.Repeat("#", h)
	run := r.Run
	var rts []string
	for _, n := range run.Nodes {
		rts = append(rts, fmt.Sprintf("%s (%s, readiness %q)", n.Name, n.Version, n.Readiness))
	}
	fmt.Fprintf(w, "%s Seed %d, %s, %s\n\n", H, run.Seed, dur(run.Duration), strings.Join(rts, " and "))
	fmt.Fprintf(w, "Reproduce: `%s` (plan digest `%s`; the same seed draws the same faults and churn, the cluster's timing does not repeat).\n\n", run.Command, run.Digest)
	started := time.Unix(0, int64(run.Start*1e9)).UTC().Format("2006-01-02 15:04 MST")
	fmt.Fprintf(w, "Started %s; faults until %s, healed at %s, ended at %s (minutes:seconds from the start).", started,
		clock(r, run.FaultsEnd), clock(r, run.HealEnd), clock(r, run.End))
	if run.Interrupted {
		fmt.Fprintf(w, " Interrupted (%s).", run.StopReason)
	} else if run.StopReason != "" {
		fmt.Fprintf(w, " Stopped early: %s.", run.StopReason)
	}
	fmt.Fprintln(w)
	if m := run.Machine; len(m) > 0 {
		fmt.Fprintf(w, "Machine: %s CPUs, %s; load average (1 min) %s; %s.\n", m["cpus"], m["memory"], loadOf(r), m["note"])
	}
	fmt.Fprintln(w)
	if len(o.Violations) == 0 {
		fmt.Fprintf(w, "**0 violations.**\n\n")
	} else {
		fmt.Fprintf(w, "**%d violations.** The first: %s\n\n", len(o.Violations), r.describe(o.Violations[0]))
	}

	// Load.
	waits, podsCreated, unstarted := podWaits(r)
	fmt.Fprintf(w, "%s# Load\n\n", H)
	fmt.Fprintf(w, "| node | pods created | started within (p50 / p99) | deleted before running | sandboxes | containers | refused | let through (ignore) | policy waits (p50 / p99) |\n")
	fmt.Fprintf(w, "| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | --- |\n")
	for _, n := range run.Nodes {
		ec := o.Escape[n.N]
		if ec == nil {
			ec = &escapeCount{}
		}
		fmt.Fprintf(w, "| %s (%s) | %d | %s / %s | %d | %d | %d | %d %s | %d | %s / %s |\n", n.Name, n.Runtime,
			podsCreated[n.N], pct(waits[n.N], 0.5), pct(waits[n.N], 0.99), unstarted[n.N], ec.Sandboxes, ec.Containers,
			sum(o.Refused[n.N]), paren(keysOf(o.Refused[n.N])), sum(o.Ignored[n.N]), pct(o.Waited[n.N], 0.5), pct(o.Waited[n.N], 0.99))
	}
	ops := map[string]int{}
	for _, c := range r.Churn {
		ops[c.Op]++
	}
	fmt.Fprintf(w, "\nChurn (kubectl, namespace `%s`): %s operations (%s). Sandboxes and containers: those of the soak's namespace that each runtime reported created or listed; refused: every refusal each runtime logged, any namespace; started within: from the pod's first appearance in a watch to the first update showing it Running or done; policy waits: how long gated requests of the soak waited for a required plugin, as the runtime logged them.\n\n",
		run.Namespace, strconv.Itoa(len(r.Churn)), keysOf(ops))

	// Faults.
	fmt.Fprintf(w, "%s# Faults\n\n", H)
	fmt.Fprintf(w, "| kind | count | nodes | total | longest |\n| --- | ---: | --- | ---: | ---: |\n")
	for _, k := range faultKinds {
		var n int
		var tot, longest float64
		nodes := map[string]bool{}
		for _, f := range r.Faults {
			if f.Kind != k {
				continue
			}
			n++
			end := f.End
			if end == 0 {
				end = r.end()
			}
			tot += end - f.Start
			longest = math.Max(longest, end-f.Start)
			if f.Node == 0 {
				nodes["all"] = true
			} else {
				nodes[r.nodeName(f.Node)] = true
			}
		}
		if n == 0 {
			fmt.Fprintf(w, "| %s | 0 | | | |\n", k)
			continue
		}
		var ns []string
		for x := range nodes {
			ns = append(ns, x)
		}
		sort.Strings(ns)
		fmt.Fprintf(w, "| %s | %d | %s | %s | %s |\n", k, n, strings.Join(ns, ", "), dur(tot), dur(longest))
	}
	fmt.Fprintf(w, "\n<details><summary>Every fault (start and end, minutes:seconds)</summary>\n\n")
	fmt.Fprintf(w, "| # | kind | node | start | end | what it did | detail |\n| ---: | --- | --- | --- | --- | --- | --- |\n")
	for _, f := range r.Faults {
		node := "all"
		if f.Node != 0 {
			node = r.nodeName(f.Node)
		}
		var d []string
		for k, v := range f.Detail {
			d = append(d, k+": "+v)
		}
		sort.Strings(d)
		fmt.Fprintf(w, "| %d | %s | %s | %s | %s | %s | %s |\n", f.ID, f.Kind, node, clock(r, f.Start), clock(r, f.End), faultEffect(r, f),
			strings.ReplaceAll(strings.Join(d, "; "), "|", "\\|"))
	}
	fmt.Fprintf(w, "\n</details>\n\n")

	// Invariants.
	fmt.Fprintf(w, "%s# Invariants\n\n", H)
	count := map[string]int{}
	for _, v := range o.Violations {
		count[v.Kind]++
	}
	var sb, ct, ex, snap, running int
	for _, e := range o.Escape {
		sb, ct, ex, snap, running = sb+e.Sandboxes, ct+e.Containers, ex+e.Excused, snap+e.FromSnapshot, running+e.Running
	}
	var plugins []string
	for _, p := range run.Plugins {
		plugins = append(plugins, "`"+p.Key+"`")
	}
	fmt.Fprintf(w, "| invariant | what was checked | violations |\n| --- | --- | ---: |\n")
	fmt.Fprintf(w, "| no escape | %d sandboxes and %d containers of the soak (%d seen only in a runtime's list): each acted on by %s before its runtime reported it, by ID in the plugins' logs; %d let through under `ignore`, each logged by the runtime | %d |\n",
		sb, ct, snap, strings.Join(plugins, " and "), ex, count[vEscape])
	fmt.Fprintf(w, "| injected | %d running containers' environment read through `crictl inspect`, every check | %d |\n", running, count[vInjection])
	fmt.Fprintf(w, "| self-check | every soak container checks its own environment first and exits %s without an injection: no such exit in the pod watch | %d |\n", exitsOf(run), count[vSelfCheck])
	fmt.Fprintf(w, "| refusals name the plugin | %d refusals logged, %d events | %d |\n", sumAll(o.Refused), eventsNaming(r), count[vUnnamed])
	fmt.Fprintf(w, "| `ignore` only while configured | %d requests let through, each inside an `ignore` window | %d |\n", sumAll(o.Ignored), count[vIgnored])
	fmt.Fprintf(w, "| no DeadlineExceeded | kubelet events outside the runtime-down faults | %d |\n", count[vDeadline])
	if o.Settle != nil {
		s := "every pod out of Pending/ContainerCreating"
		if o.Settle.Settled {
			s += fmt.Sprintf(" %.0f s after the heal", o.Settle.Seconds)
		} else {
			s = fmt.Sprintf("%d pods still Pending/ContainerCreating", len(o.Settle.Left))
		}
		fmt.Fprintf(w, "| settles after the last fault | %s (bound %.0f s) | %d |\n", s, run.SettleBound, count[vSettle])
	}
	if len(o.Leaks) > 0 {
		var tot []string
		for _, k := range leakKinds {
			n := 0
			for _, l := range o.Leaks {
				n += len(l[k])
			}
			tot = append(tot, fmt.Sprintf("%s %d", k, n))
		}
		fmt.Fprintf(w, "| nothing leaked | after the soak's pods were gone, against the API server's pods: %s | %d |\n", strings.Join(tot, ", "), count[vLeak])
	}
	if len(o.Growth) > 0 {
		var vs []string
		for _, g := range o.Growth {
			vs = append(vs, g.Verdict)
		}
		fmt.Fprintf(w, "| no growth | RSS (anonymous), goroutines, open fds of each runtime from rest to rest (table below) | %d |\n", count[vGrowth])
	}
	var changes int
	var lags []float64
	skipped := ""
	for _, nr := range o.NPD {
		changes += nr.Changes
		lags = append(lags, nr.Lags...)
		if nr.Skipped != "" {
			skipped = nr.Skipped
		}
	}
	if skipped != "" {
		fmt.Fprintf(w, "| Node condition follows | not checked: %s | – |\n", skipped)
	} else {
		fmt.Fprintf(w, "| Node condition follows | %d changes of a runtime's plugin readiness; `%s` followed within %s (p50), %s (max); bound %.1f s (NPD's period + 2 s) | %d |\n",
			changes, run.NPD.Condition, pct(lags, 0.5), pct(lags, 1), run.NPD.Bound, count[vNPD])
	}
	fmt.Fprintln(w)
	if len(o.Violations) > 0 {
		fmt.Fprintf(w, "<details><summary>Every violation</summary>\n\n")
		for _, v := range o.Violations {
			fmt.Fprintf(w, "- %s\n", r.describe(v))
		}
		fmt.Fprintf(w, "\n</details>\n\n")
	}

	if len(o.Growth) > 0 {
		fmt.Fprintf(w, "%s# Growth from rest to rest\n\n", H)
		fmt.Fprintf(w, "Each runtime's level at each rest of the churn (a long soak rests at %s of its planned time and once more after its namespace is deleted: no fault, no pod of the soak left, none of its containers running, %s for the kubelet's clean-up, then %s of samples; the level is their median), a least-squares slope over the rests with one level per runtime process, the first %s of a runtime started during the soak left out (its warm-up); t-based 95 %% interval. RSS is its anonymous part (file pages, such as the binary's code and containerd's bolt database, are the kernel's to reclaim). A series grows if the whole interval lies above %.0f %% of its median per hour, and above %.0f MiB (RSS) or %.0f (goroutines, fds) over the span of the rests; it is judged when the rests span at least %s.\n\n",
			restFractions(), dur(restSettle), dur(restHold), dur(warmup), growthTolerance*100, rssSlack, countSlack, dur(r.Run.GrowthMin))
		if rests := restSummary(r); rests != "" {
			fmt.Fprintf(w, "%s\n\n", rests)
		}
		fmt.Fprintf(w, "| node | series | median | slope per hour | 95 %% interval | rests (processes), time covered | verdict |\n| --- | --- | ---: | ---: | --- | --- | --- |\n")
		for _, g := range o.Growth {
			verdict := g.Verdict
			if g.Err != "" {
				verdict += ": " + g.Err
			}
			if g.Fit.N == 0 {
				fmt.Fprintf(w, "| %s | %s | | | | | %s |\n", r.nodeName(g.Node), g.Metric, verdict)
				continue
			}
			fmt.Fprintf(w, "| %s | %s | %.4g%s | %+.3g | %+.3g … %+.3g | %d (%d), %s | %s |\n", r.nodeName(g.Node), g.Metric, g.Fit.Median, sp(g.Unit),
				g.Fit.Slope, g.Fit.Lo, g.Fit.Hi, g.Fit.N, g.Fit.Segments, dur(g.Span), verdict)
		}
		fmt.Fprintln(w)
	}
	if len(o.Leaks) > 0 {
		fmt.Fprintf(w, "%s# Leaks\n\n| node | %s |\n| --- |%s\n", H, strings.Join(leakKinds, " | "), strings.Repeat(" ---: |", len(leakKinds)))
		for _, n := range run.Nodes {
			l := o.Leaks[n.N]
			var c []string
			for _, k := range leakKinds {
				c = append(c, strconv.Itoa(len(l[k])))
			}
			fmt.Fprintf(w, "| %s | %s |\n", n.Name, strings.Join(c, " | "))
		}
		fmt.Fprintf(w, "\nChecked after the soak's namespace was deleted, until nothing was left or %.0f s had passed: sandboxes and containers (the runtime's lists) against the API server's pods of the node, runc's containers against the runtime's, mounts in the node's mount namespace and the namespace pins against the sandboxes' runtime specs, the CNI host-local IP allocations against the READY sandboxes, the cgroups under the kubelet's cgroup root against both.\n\n", run.LeakBound)
	}
	if plotFile != "" {
		fmt.Fprintf(w, "%s# Over time\n\n![the soak over time: faults, containers created and refused per 30 s, each runtime's RSS, goroutines and open fds](%s)\n\n", H, plotFile)
	}
}

// faultEffect says what a fault did on its node(s) while it lasted: the
// requests the plugin held, the refusals and the requests let through
// under "ignore" that the runtimes logged.
func faultEffect(r *records, f faultRec) string {
	end := f.End
	if end == 0 {
		end = r.end()
	}
	on := func(n int) bool { return f.Node == 0 || f.Node == n }
	var held, refused, ignored int
	for _, p := range r.Plugin {
		if p.Kind == "hang" && on(p.Node) && p.T >= f.Start && p.T <= end {
			held++
		}
	}
	for n, rl := range r.Runtime {
		if !on(n) {
			continue
		}
		for _, p := range rl.Policy {
			if p.T < f.Start || p.T > end {
				continue
			}
			switch p.Kind {
			case "refused":
				refused++
			case "ignored":
				ignored++
			}
		}
	}
	var out []string
	if held > 0 {
		out = append(out, fmt.Sprintf("%d requests held", held))
	}
	if refused > 0 {
		out = append(out, fmt.Sprintf("%d refused", refused))
	}
	if ignored > 0 {
		out = append(out, fmt.Sprintf("%d let through (ignore)", ignored))
	}
	return strings.Join(out, ", ")
}

func paren(s string) string {
	if s == "" {
		return ""
	}
	return "(" + s + ")"
}

func sumAll(m map[int]map[string]int) int {
	n := 0
	for _, v := range m {
		n += sum(v)
	}
	return n
}

func exitsOf(run runInfo) string {
	var s []string
	for _, p := range run.Plugins {
		s = append(s, fmt.Sprintf("%d (%s)", p.Exit, p.Key))
	}
	return strings.Join(s, " or ")
}

func eventsNaming(r *records) int {
	n := 0
	for _, e := range r.Events {
		if reNamedAnywhere.MatchString(e.Message) {
			n += max(e.Count, 1)
		}
	}
	return n
}

// loadOf returns the median and maximum of the 1-minute load average
// sampled during the run.
func loadOf(r *records) string {
	var v []float64
	for _, s := range r.Samples {
		if s.Load1 != nil {
			v = append(v, *s.Load1)
		}
	}
	if len(v) == 0 {
		return "not sampled"
	}
	return fmt.Sprintf("median %.1f, max %.1f", median(v), quantile(v, 1))
}

// restFractions: the plan's rests, as percentages of the planned time.
func restFractions() string {
	var p []string
	for _, f := range restAt {
		p = append(p, fmt.Sprintf("%.1f %%", f*100))
	}
	return strings.Join(p, ", ")
}

// restSummary: when each rest was quiet and sampled, or why not.
func restSummary(r *records) string {
	if len(r.Rests) == 0 {
		return ""
	}
	var p []string
	for _, rest := range r.Rests {
		if rest.OK {
			p = append(p, fmt.Sprintf("%s (quiet after %s)", clock(r, rest.From), dur(rest.Quiet-rest.Begin)))
		} else {
			p = append(p, fmt.Sprintf("%s: not quiet, %s", clock(r, rest.Begin), rest.Why))
		}
	}
	return "Rests sampled at: " + strings.Join(p, "; ") + "."
}
