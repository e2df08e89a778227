package main

import (
	"bufio"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// What the soak reads from the runtimes' logs (logrus text, both
// runtimes: time="..." level=... msg="..."), per node:
//
//   - sandboxes and containers a runtime created, as it reports them to the
//     kubelet: CRI-O "Ran pod sandbox ID with infra container: NS/POD/POD",
//     "Created container ID: NS/POD/NAME"; containerd "RunPodSandbox for
//     name:... uid:... namespace:... returns sandbox id ...",
//     "CreateContainer within sandbox SB for name:... returns container id
//     ...";
//   - NRI's policy lines, the same in both (NRI logs them): "X refused:
//     required NRI plugin "KEY" ...", "required NRI plugin "KEY" ...; X
//     proceeds without it (fail_policy "ignore")", "X waited D for required
//     NRI plugins", where X is "RunPodSandbox of pod NS/POD" or
//     "CreateContainer of container "NAME" in pod NS/POD".

// created is a sandbox (Name empty) or container a runtime created.
type created struct {
	T       float64
	Node    int
	ID      string
	Sandbox string // a container's sandbox
	NS, Pod string
	Name    string
	// FromLog: the runtime logged it; otherwise a snapshot listed it.
	FromLog bool
}

// policyLine is one of NRI's policy lines: a refusal, a request let
// through under "ignore", or a wait.
type policyLine struct {
	T    float64
	Node int
	// Kind: "refused", "ignored", "waited".
	Kind string
	// Request: RunPodSandbox, CreateContainer, UpdateContainer.
	Request string
	NS, Pod string
	Ctr     string
	// Key: the plugin the line names ("" if it names none).
	Key string
	// Waited, for "waited": seconds.
	Waited float64
	Text   string
}

// runtimeLog is what one node's runtime log holds from the soak's window.
type runtimeLog struct {
	Created []created
	Policy  []policyLine
	// Starts: when the runtime logged its start (a restart of the process).
	Starts []float64
}

var (
	reLogTime = regexp.MustCompile(`^time="([^"]+)"`)
	reLogMsg  = regexp.MustCompile(` msg="((?:[^"\\]|\\.)*)"`)

	reCrioSandbox   = regexp.MustCompile(`^Ran pod sandbox ([0-9a-f]{64}) with infra container: ([^/]+)/([^/]+)/`)
	reCrioContainer = regexp.MustCompile(`^Created container ([0-9a-f]{64}): ([^/]+)/([^/]+)/(.+)$`)
	reCtrdSandbox   = regexp.MustCompile(`^RunPodSandbox for .*?name:"([^"]+)".*?namespace:"([^"]+)".* returns sandbox id "([0-9a-f]{64})"`)
	reCtrdContainer = regexp.MustCompile(`^CreateContainer within sandbox "([0-9a-f]{64})" for .*?name:"([^"]+)".* returns container id "([0-9a-f]{64})"`)

	// The request as NRI describes it (describeRequest).
	reRequest = `(\w+) of (?:container "([^"]*)" in )?pod ([^/ ]+)/(\S+)`
	reRefused = regexp.MustCompile(`^` + reRequest + ` refused: (.*)$`)
	reNamed   = regexp.MustCompile(`^required NRI plugin "([^"]+)"`)
	reIgnored = regexp.MustCompile(`^required NRI plugin "([^"]+)" .*; ` + reRequest + ` proceeds without it \(fail_policy "ignore"\)`)
	reWaited  = regexp.MustCompile(`^` + reRequest + ` waited (\S+) for required NRI plugins`)
	reStart   = regexp.MustCompile(`^(Starting CRI-O|starting containerd)`)
)

// parseLogrus returns a logrus text line's time and message.
func parseLogrus(line string) (t float64, msg string, ok bool) {
	m := reLogTime.FindStringSubmatch(line)
	if m == nil {
		return 0, "", false
	}
	tm, err := time.Parse(time.RFC3339Nano, m[1])
	if err != nil {
		return 0, "", false
	}
	mm := reLogMsg.FindStringSubmatch(line)
	if mm == nil {
		return 0, "", false
	}
	msg, err = strconv.Unquote(`"` + mm[1] + `"`)
	if err != nil {
		msg = mm[1]
	}
	return epoch(tm), msg, true
}

func epoch(t time.Time) float64 { return float64(t.UnixNano()) / 1e9 }

// parseRuntimeLog reads a node's runtime log (rt: "crio" or "containerd")
// for lines in [from, to].
func parseRuntimeLog(r io.Reader, node int, rt string, from, to float64) (runtimeLog, error) {
	var out runtimeLog
	// containerd names a container's sandbox, not its pod.
	pods := map[string][2]string{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		t, msg, ok := parseLogrus(sc.Text())
		if !ok {
			continue
		}
		if rt == "containerd" {
			// Sandboxes from before the window still name pods.
			if m := reCtrdSandbox.FindStringSubmatch(msg); m != nil {
				pods[m[3]] = [2]string{m[2], m[1]}
			}
		}
		if t < from || t > to {
			continue
		}
		if reStart.MatchString(msg) {
			out.Starts = append(out.Starts, t)
			continue
		}
		switch rt {
		case "crio":
			if m := reCrioSandbox.FindStringSubmatch(msg); m != nil {
				out.Created = append(out.Created, created{T: t, Node: node, ID: m[1], NS: m[2], Pod: m[3], FromLog: true})
				continue
			}
			if m := reCrioContainer.FindStringSubmatch(msg); m != nil {
				out.Created = append(out.Created, created{T: t, Node: node, ID: m[1], NS: m[2], Pod: m[3], Name: m[4], FromLog: true})
				continue
			}
		case "containerd":
			if m := reCtrdSandbox.FindStringSubmatch(msg); m != nil {
				out.Created = append(out.Created, created{T: t, Node: node, ID: m[3], NS: m[2], Pod: m[1], FromLog: true})
				continue
			}
			if m := reCtrdContainer.FindStringSubmatch(msg); m != nil {
				p := pods[m[1]]
				out.Created = append(out.Created, created{T: t, Node: node, ID: m[3], Sandbox: m[1], NS: p[0], Pod: p[1], Name: m[2], FromLog: true})
				continue
			}
		}
		if pl, ok := parsePolicyLine(msg); ok {
			pl.T, pl.Node = t, node
			out.Policy = append(out.Policy, pl)
		}
	}
	return out, sc.Err()
}

// parsePolicyLine recognizes NRI's policy lines.
func parsePolicyLine(msg string) (policyLine, bool) {
	if m := reRefused.FindStringSubmatch(msg); m != nil {
		pl := policyLine{Kind: "refused", Request: m[1], Ctr: m[2], NS: m[3], Pod: m[4], Text: msg}
		if k := reNamed.FindStringSubmatch(m[5]); k != nil {
			pl.Key = k[1]
		}
		return pl, true
	}
	if m := reIgnored.FindStringSubmatch(msg); m != nil {
		return policyLine{Kind: "ignored", Key: m[1], Request: m[2], Ctr: m[3], NS: m[4], Pod: m[5], Text: msg}, true
	}
	if m := reWaited.FindStringSubmatch(msg); m != nil {
		d, err := time.ParseDuration(m[5])
		if err != nil {
			return policyLine{}, false
		}
		return policyLine{Kind: "waited", Request: m[1], Ctr: m[2], NS: m[3], Pod: m[4], Waited: d.Seconds(), Text: msg}, true
	}
	return policyLine{}, false
}

// pluginLine is a line of an nri-faulty plugin's log.
type pluginLine struct {
	T    float64
	Node int
	// Plugin: the DaemonSet the plugin runs in (device-injector,
	// ulimit-adjuster).
	Plugin string
	// Kind: "acted", "hang", "ready", "exit", "started".
	Kind      string
	Event     string
	NS, Pod   string
	UID       string
	Sandbox   string
	Container string // container_id
	Name      string
}

var (
	reActed = regexp.MustCompile(`^acted (\S+) pod=([^/ ]*)/(\S*) uid=(\S*) sandbox=(\S*) container_id=(\S*) container=(.*)$`)
	reHang  = regexp.MustCompile(`^hang (\S+) for \S+ pod=([^/ ]*)/(\S*) uid=(\S*) sandbox=(\S*)`)
)

// parsePluginLine parses one line of a container log file the kubelet
// writes (CRI format: "TIME STREAM TAG CONTENT") of an nri-faulty plugin,
// whose own lines start with its timestamp.
func parsePluginLine(line string) (pluginLine, bool) {
	f := strings.SplitN(line, " ", 4)
	if len(f) < 4 {
		return pluginLine{}, false
	}
	content := f[3]
	sp := strings.IndexByte(content, ' ')
	if sp < 0 {
		return pluginLine{}, false
	}
	tm, err := time.Parse(time.RFC3339Nano, content[:sp])
	if err != nil {
		return pluginLine{}, false
	}
	rest := content[sp+1:]
	pl := pluginLine{T: epoch(tm)}
	switch {
	case strings.HasPrefix(rest, "acted "):
		m := reActed.FindStringSubmatch(rest)
		if m == nil {
			return pluginLine{}, false
		}
		pl.Kind, pl.Event, pl.NS, pl.Pod, pl.UID, pl.Sandbox, pl.Container, pl.Name = "acted", m[1], m[2], m[3], m[4], m[5], m[6], m[7]
	case strings.HasPrefix(rest, "hang "):
		m := reHang.FindStringSubmatch(rest)
		if m == nil {
			return pluginLine{}, false
		}
		pl.Kind, pl.Event, pl.NS, pl.Pod, pl.UID, pl.Sandbox = "hang", m[1], m[2], m[3], m[4], m[5]
	case strings.HasPrefix(rest, "ready "):
		pl.Kind = "ready"
	case strings.HasPrefix(rest, "exit "):
		pl.Kind = "exit"
	case strings.HasPrefix(rest, "started "):
		pl.Kind = "started"
	default:
		return pluginLine{}, false
	}
	return pl, true
}

// readPluginLogs reads the plugin logs the soak kept (hard links of the
// kubelet's container log files, which the kubelet deletes with the
// container or the pod): DIR/nN/NAMESPACE_POD_UID/CONTAINER/FILE. The
// plugin is the DaemonSet whose pod the directory is of.
func readPluginLogs(dir string, from, to float64) ([]pluginLine, error) {
	var out []pluginLine
	files, err := filepath.Glob(filepath.Join(dir, "n*", "*", "*", "*"))
	if err != nil {
		return nil, err
	}
	for _, f := range files {
		rel, _ := filepath.Rel(dir, f)
		parts := strings.Split(rel, string(filepath.Separator))
		node, err := strconv.Atoi(strings.TrimPrefix(parts[0], "n"))
		if err != nil {
			continue
		}
		plugin := daemonSetOf(parts[1])
		fh, err := os.Open(f)
		if err != nil {
			return nil, err
		}
		sc := bufio.NewScanner(fh)
		sc.Buffer(make([]byte, 1<<20), 16<<20)
		for sc.Scan() {
			pl, ok := parsePluginLine(sc.Text())
			if !ok || pl.T < from || pl.T > to {
				continue
			}
			pl.Node, pl.Plugin = node, plugin
			out = append(out, pl)
		}
		err = sc.Err()
		fh.Close()
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// daemonSetOf returns the DaemonSet of a kubelet pod log directory
// NAMESPACE_POD_UID, where the pod is NAME-xxxxx.
func daemonSetOf(podDir string) string {
	p := strings.Split(podDir, "_")
	if len(p) < 2 {
		return podDir
	}
	name := p[1]
	if i := strings.LastIndexByte(name, '-'); i > 0 {
		return name[:i]
	}
	return name
}

// statusChange is a line of test/k8s/cristatus: a runtime's condition
// (NRIPluginsReady) changed, or the runtime became unreachable.
type statusChange struct {
	T float64
	// State: "true", "false", "absent", "unreachable".
	State   string
	Message string
}

var reStatus = regexp.MustCompile(`^(\S+) (?:\w+=(\w+) reason=\S* message=(.*)|(unreachable))$`)

// parseStatusLog reads a cristatus log.
func parseStatusLog(r io.Reader) ([]statusChange, error) {
	var out []statusChange
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		m := reStatus.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		tm, err := time.Parse(time.RFC3339Nano, m[1])
		if err != nil {
			continue
		}
		s := statusChange{T: epoch(tm), State: m[2], Message: m[3]}
		if m[4] != "" {
			s.State = "unreachable"
		}
		out = append(out, s)
	}
	return out, sc.Err()
}
