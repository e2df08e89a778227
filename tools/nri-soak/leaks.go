package main

import (
	"fmt"
	"path"
	"regexp"
	"sort"
	"strings"
)

// The kinds of leak, in the report's order.
var leakKinds = []string{"sandboxes", "containers", "runc", "mounts", "netns", "ipam", "cgroups"}

var (
	reHexID = regexp.MustCompile(`[0-9a-f]{64}`)
	// A kubelet pod directory (…/pods/UID/…), a cgroup of a pod (podUID).
	rePodDir    = regexp.MustCompile(`/pods/([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})(?:/|$)`)
	rePodCgroup = regexp.MustCompile(`(?:^|/)pod([0-9a-f]{8}[-_][0-9a-f]{4}[-_][0-9a-f]{4}[-_][0-9a-f]{4}[-_][0-9a-f]{12})(?:/|$)`)
)

// leaksOf returns what node snapshot s holds that nothing accounts for,
// by kind, walking down from the API server's pods:
//
//	sandboxes   a sandbox whose pod (its UID label) is not one of the node's
//	            API pods
//	containers  a container whose sandbox the runtime does not list, or
//	            whose pod is not an API pod
//	runc        a runc container that is neither a container nor a sandbox
//	            the runtime lists
//	mounts      a mount in the node's mount namespace naming a container or
//	            sandbox ID the runtime does not list, a kubelet pod
//	            directory of no API pod, or a namespace pin no sandbox uses
//	netns       a namespace pin (CRI-O's namespaces_dir, containerd's netns
//	            directory) that no listed sandbox's runtime spec uses
//	ipam        an IP the CNI host-local IPAM holds for something that is
//	            not a READY sandbox
//	cgroups     a cgroup of a pod that is not an API pod, or of a container
//	            or sandbox the runtime does not list
func leaksOf(s leakSnap) map[string][]string {
	out := map[string][]string{}
	add := func(kind, format string, a ...any) { out[kind] = append(out[kind], fmt.Sprintf(format, a...)) }
	api := map[string]bool{}
	for _, p := range s.API {
		api[p.UID] = true
	}
	ids := map[string]bool{}
	ready := map[string]bool{}
	pins := map[string]bool{}
	for _, sb := range s.Sandboxes {
		ids[sb.ID] = true
		if sb.State == "SANDBOX_READY" {
			ready[sb.ID] = true
		}
		for _, p := range sb.NSPaths {
			pins[p] = true
		}
		if !api[sb.UID] {
			add("sandboxes", "sandbox %.12s of pod %s/%s (%s, uid %s)", sb.ID, sb.NS, sb.Name, sb.State, sb.UID)
		}
	}
	sandboxes := map[string]bool{}
	for k := range ids {
		sandboxes[k] = true
	}
	for _, c := range s.Containers {
		ids[c.ID] = true
		switch {
		case !sandboxes[c.Sandbox]:
			add("containers", "container %.12s (%s/%s/%s, %s) of sandbox %.12s, which the runtime does not list", c.ID, c.NS, c.Pod, c.Name, c.State, c.Sandbox)
		case c.UID != "" && !api[c.UID]:
			add("containers", "container %.12s (%s/%s/%s, %s) of a pod the API server does not have", c.ID, c.NS, c.Pod, c.Name, c.State)
		}
	}
	// A root filesystem names its storage layer (CRI-O) or container
	// (containerd); mounts under it are accounted for with it.
	known := map[string]bool{}
	for k := range ids {
		known[k] = true
	}
	for _, root := range s.Roots {
		for _, id := range reHexID.FindAllString(root, -1) {
			known[id] = true
		}
	}
	for _, id := range s.Runc {
		if !ids[id] {
			add("runc", "runc container %.12s", id)
		}
	}
	for _, p := range s.Pins {
		if !pins[p] {
			add("netns", "namespace pin %s", p)
		}
	}
	pinSet := map[string]bool{}
	for _, p := range s.Pins {
		pinSet[p] = true
	}
	for _, m := range s.Mounts {
		if pinSet[m] {
			if !pins[m] {
				add("mounts", "namespace pin mount %s", m)
			}
			continue
		}
		if id := firstUnknown(m, known); id != "" {
			add("mounts", "%s (no container or sandbox %.12s)", m, id)
			continue
		}
		if mm := rePodDir.FindStringSubmatch(m); mm != nil && !api[mm[1]] {
			add("mounts", "%s (no pod %s)", m, mm[1])
		}
	}
	for _, e := range s.IPAM {
		if !ready[e.Owner] {
			state := "no sandbox"
			for _, sb := range s.Sandboxes {
				if sb.ID == e.Owner {
					state = sb.State
				}
			}
			add("ipam", "IP %s held for %.12s (%s)", e.IP, e.Owner, state)
		}
	}
	for _, cg := range s.Cgroups {
		if mm := rePodCgroup.FindStringSubmatch(cg); mm != nil {
			uid := strings.ReplaceAll(mm[1], "_", "-")
			if !api[uid] {
				add("cgroups", "%s (no pod %s)", cg, uid)
				continue
			}
		}
		if id := reHexID.FindString(path.Base(cg)); id != "" && !ids[id] {
			add("cgroups", "%s (no container or sandbox %.12s)", cg, id)
		}
	}
	for _, v := range out {
		sort.Strings(v)
	}
	return out
}

// firstUnknown returns the first 64-hex ID in p that is not known.
func firstUnknown(p string, known map[string]bool) string {
	for _, id := range reHexID.FindAllString(p, -1) {
		if !known[id] {
			return id
		}
	}
	return ""
}

// leakKey is what identifies a leak across snapshots: its text before the
// state in parentheses, which can change (a sandbox NOTREADY, then gone).
func leakKey(l string) string {
	if i := strings.Index(l, " ("); i >= 0 {
		return l[:i]
	}
	return l
}

// leakedBefore returns, per node, the keys of what its snapshots taken
// before the first fault held unaccounted for: on a cluster that other
// tests used first (SOAK_CLUSTER=reuse), their leftovers are not the
// soak's.
func leakedBefore(r *records) map[int]map[string]bool {
	before := map[int]map[string]bool{}
	for _, s := range r.LeaksBefore {
		if before[s.Node] == nil {
			before[s.Node] = map[string]bool{}
		}
		for _, ls := range leaksOf(s) {
			for _, l := range ls {
				before[s.Node][leakKey(l)] = true
			}
		}
	}
	return before
}

// checkLeaks reads the last leak snapshot of each node; what the node held
// before the first fault is not counted.
func checkLeaks(r *records) (map[int]map[string][]string, []violation) {
	last := map[int]leakSnap{}
	for _, s := range r.Leaks {
		if p, ok := last[s.Node]; !ok || s.T >= p.T {
			last[s.Node] = s
		}
	}
	res := map[int]map[string][]string{}
	var vs []violation
	before := leakedBefore(r)
	for _, n := range r.Run.Nodes {
		s, ok := last[n.N]
		if !ok {
			continue
		}
		l := leaksOf(s)
		if b := before[n.N]; len(b) > 0 {
			for k, ls := range l {
				var kept []string
				for _, x := range ls {
					if !b[leakKey(x)] {
						kept = append(kept, x)
					}
				}
				l[k] = kept
			}
		}
		res[n.N] = l
		for _, k := range leakKinds {
			if len(l[k]) == 0 {
				continue
			}
			ex := l[k]
			if len(ex) > 3 {
				ex = append(ex[:3:3], fmt.Sprintf("and %d more", len(l[k])-3))
			}
			vs = append(vs, r.violation(s.T, vLeak, n.N, "%s: %d leaked %s %.0f s after the soak's pods were gone: %s",
				n.Name, len(l[k]), k, r.Run.LeakBound, strings.Join(ex, "; ")))
		}
	}
	return res, vs
}
