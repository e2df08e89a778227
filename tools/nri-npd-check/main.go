// Command nri-npd-check is a node-problem-detector custom plugin (NPD's
// custom plugin monitor) that puts the readiness of a node's required NRI
// plugins on the Node object. It asks the container runtime's CRI Status
// (verbose) over the runtime's socket, as crictl does, and reads the
// NRIPluginsReady condition and the "nri" entry that patched CRI-O and
// containerd report. It speaks NPD's protocol: one line on stdout (the
// message, at most --max-output-length bytes, NPD's max_output_length) and
// the exit code
//
//	0  OK       (condition False: no problem)
//	1  NonOK    (condition True: a problem)
//	2  Unknown  (the runtime could not be asked, or its answer is malformed)
//
// --mode condition (default), for NPD's permanent rule (condition
// NRIPluginsNotReady): 1 while a required plugin is not ready, naming each
// such instance and its state ("10-device-injector not registered"); 0 when
// all are ready, saying how many instances are in which state ("required
// NRI plugins ready: 1 instance ready, 1 replaced": an instance another
// one replaced, as in a rolling update to another index, is not a
// problem and is listed for a minute), or when the runtime requires none
// (no NRIPluginsReady condition: no policy, or an unpatched runtime); 2
// when the socket is
// missing, the runtime does not answer within --timeout (keep it below the
// rule's timeout, so that NPD does not kill the check first) or its
// verbose "nri" entry cannot be decoded. With --drop-ins GLOB[,GLOB...]
// (the runtime's drop-in files), no NRIPluginsReady condition while one of
// those files has a required_plugins table is 1 too: the runtime ignores
// the table (it is not patched, or does not read the file), which it never
// says itself.
//
// --runtime-endpoint may list several endpoints, comma-separated: the first
// whose socket exists is asked, as crictl picks one of its default
// endpoints. A node runs one runtime, so that one config
// ("unix:///var/run/crio/crio.sock,unix:///run/containerd/containerd.sock")
// serves CRI-O and containerd nodes alike; where a node has both sockets,
// name its runtime's alone. When none exists the check says which it
// looked for.
//
// --mode went-down --state-file FILE, for NPD's temporary rule (an event):
// 1 when a required plugin that was ready at the previous run (recorded in
// FILE) is not ready now, naming it (an instance replaced by another did
// not go down); 0 otherwise, also when the runtime
// cannot be asked (the condition reports that; an event on every run would
// be noise). The first run only records.
//
// Details of a failure go to stderr, which NPD logs.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/nrigate/nrigate/internal/cristatus"
)

// NPD's custom plugin exit codes.
const (
	exitOK      = 0
	exitNonOK   = 1
	exitUnknown = 2
)

const (
	modeCondition = "condition"
	modeWentDown  = "went-down"
)

// defaultMaxOutput is NPD's default max_output_length: NPD cuts longer
// messages there.
const defaultMaxOutput = 80

func main() {
	os.Exit(run(context.Background(), os.Args[1:], os.Stdout, os.Stderr))
}

type options struct {
	endpoint  string
	timeout   time.Duration
	maxOutput int
	mode      string
	stateFile string
	dropIns   string
}

// run is the program; it returns the exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	var o options
	fs := flag.NewFlagSet("nri-npd-check", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.endpoint, "runtime-endpoint", "", "the runtime's CRI endpoint, unix:///path/to/runtime.sock (as crictl's); several, comma-separated: the first whose socket exists")
	fs.DurationVar(&o.timeout, "timeout", 3*time.Second, "how long to wait for the runtime's answer; keep it below NPD's rule timeout")
	fs.IntVar(&o.maxOutput, "max-output-length", defaultMaxOutput, "the longest message to print (NPD's max_output_length)")
	fs.StringVar(&o.mode, "mode", modeCondition, "condition (NPD permanent rule) or went-down (NPD temporary rule, needs --state-file)")
	fs.StringVar(&o.stateFile, "state-file", "", "went-down: where the plugins' states of the previous run are kept")
	fs.StringVar(&o.dropIns, "drop-ins", "", "condition: comma-separated globs of the runtime's drop-in files (/etc/crio/crio.conf.d/*.conf); a required_plugins table in one while the runtime reports no NRIPluginsReady is a problem")
	if err := fs.Parse(args); err != nil {
		fmt.Fprintf(stdout, "nri-npd-check: bad arguments: %v\n", err)
		return exitUnknown
	}
	if msg := o.validate(fs.Args()); msg != "" {
		fmt.Fprintln(stderr, "nri-npd-check:", msg)
		fmt.Fprintln(stdout, cut("nri-npd-check: "+msg, o.maxOutput))
		return exitUnknown
	}
	code, msg := check(ctx, o, stderr)
	fmt.Fprintln(stdout, cut(msg, o.maxOutput))
	return code
}

// endpoints: --runtime-endpoint's comma-separated list.
func (o options) endpoints() []string {
	var eps []string
	for _, ep := range strings.Split(o.endpoint, ",") {
		if ep = strings.TrimSpace(ep); ep != "" {
			eps = append(eps, ep)
		}
	}
	return eps
}

// noSocket is the message when no endpoint's socket exists: the one
// socket's path, or every path looked at.
func noSocket(endpoints []string) string {
	paths := make([]string, len(endpoints))
	for i, ep := range endpoints {
		paths[i] = strings.TrimPrefix(ep, "unix://")
	}
	if len(paths) == 1 {
		return "runtime socket missing: " + paths[0]
	}
	return "no runtime socket: " + strings.Join(paths, ", ")
}

// badEndpoint: what is wrong with the first endpoint that is not
// unix:///PATH, or "".
func badEndpoint(endpoints []string) string {
	for _, ep := range endpoints {
		if _, err := cristatus.SocketPath(ep); err != nil {
			return "--runtime-endpoint " + strings.TrimPrefix(err.Error(), "runtime endpoint ")
		}
	}
	return ""
}

func (o options) validate(rest []string) string {
	switch {
	case len(rest) > 0:
		return fmt.Sprintf("unexpected arguments %q", rest)
	case len(o.endpoints()) == 0:
		return "--runtime-endpoint is required (unix:///path/to/runtime.sock, or several comma-separated)"
	case badEndpoint(o.endpoints()) != "":
		return badEndpoint(o.endpoints())
	case o.timeout <= 0:
		return fmt.Sprintf("--timeout %s: must be positive", o.timeout)
	case o.maxOutput < 16:
		return fmt.Sprintf("--max-output-length %d: must be at least 16", o.maxOutput)
	case o.mode != modeCondition && o.mode != modeWentDown:
		return fmt.Sprintf("--mode %q: want %q or %q", o.mode, modeCondition, modeWentDown)
	case o.mode == modeWentDown && o.stateFile == "":
		return "--mode went-down needs --state-file"
	case o.mode == modeCondition && o.stateFile != "":
		return "--state-file is for --mode went-down only"
	case o.mode == modeWentDown && o.dropIns != "":
		return "--drop-ins is for --mode condition only"
	}
	for _, g := range dropInGlobs(o.dropIns) {
		if _, err := filepath.Match(g, ""); err != nil {
			return fmt.Sprintf("--drop-ins %q: %v", g, err)
		}
	}
	return ""
}

// required is what the runtime reports about its required plugins.
type required struct {
	// present: the runtime reports NRIPluginsReady (it requires plugins).
	present bool
	// ready: NRIPluginsReady's status.
	ready bool
	// message: NRIPluginsReady's message.
	message string
	// plugins: the verbose entry, every instance of a required plugin.
	plugins []cristatus.Plugin
}

// query asks the runtime. A non-empty problem says why it could not.
func query(ctx context.Context, o options, stderr io.Writer) (r required, problem string) {
	c, err := cristatus.DialFirst(o.endpoints())
	if err != nil {
		fmt.Fprintln(stderr, "nri-npd-check:", err)
		if errors.Is(err, cristatus.ErrNoSocket) {
			return r, noSocket(o.endpoints())
		}
		return r, err.Error()
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	resp, err := c.Status(ctx, true)
	if err != nil {
		fmt.Fprintf(stderr, "nri-npd-check: Status of %s: %v\n", c.Endpoint, err)
		if errors.Is(err, context.DeadlineExceeded) {
			return r, fmt.Sprintf("runtime did not answer within %s: %s", o.timeout, c.Socket)
		}
		return r, "runtime not answering: " + c.Socket
	}
	cond := cristatus.Condition(resp, cristatus.ConditionNRIPluginsReady)
	if cond == nil {
		return r, ""
	}
	r.present, r.ready, r.message = true, cond.GetStatus(), cond.GetMessage()
	plugins, err := cristatus.NRIPlugins(resp)
	if err != nil {
		fmt.Fprintln(stderr, "nri-npd-check:", err)
		return r, "runtime's verbose nri status malformed"
	}
	r.plugins = plugins
	return r, ""
}

func check(ctx context.Context, o options, stderr io.Writer) (int, string) {
	r, problem := query(ctx, o, stderr)
	if o.mode == modeWentDown {
		if problem != "" {
			return exitOK, "not checked: " + problem
		}
		return wentDown(o.stateFile, r, o.maxOutput, stderr)
	}
	switch {
	case problem != "":
		return exitUnknown, problem
	case !r.present:
		if file := requiringDropIn(o.dropIns, stderr); file != "" {
			fmt.Fprintf(stderr, "nri-npd-check: %s has required_plugins tables, but the runtime at %s reports no %s "+
				"condition: it is not patched, or does not read that file (containerd: its config's imports)\n",
				file, o.endpoint, cristatus.ConditionNRIPluginsReady)
			return exitNonOK, "runtime ignores the required NRI plugins of " + filepath.Base(file)
		}
		return exitOK, "no NRI plugin is required by the runtime"
	case r.ready:
		return exitOK, "required NRI plugins ready: " + list(countStates(r.plugins), o.maxOutput-len("required NRI plugins ready: "))
	}
	var down []string
	for _, p := range r.plugins {
		if p.Down() {
			down = append(down, p.ID()+" "+p.State)
		}
	}
	if len(down) == 0 {
		// The condition says not ready but no entry does: report the
		// runtime's own words.
		return exitNonOK, r.message
	}
	return exitNonOK, list(down, o.maxOutput)
}

func dropInGlobs(s string) []string {
	var globs []string
	for _, g := range strings.Split(s, ",") {
		if g = strings.TrimSpace(g); g != "" {
			globs = append(globs, g)
		}
	}
	return globs
}

// requiredTable matches the header of a required plugin's table in either
// runtime's spelling: [crio.nri.required_plugins."X"],
// [plugins."io.containerd.nri.v1.nri".required_plugins."X"], and their
// [[....exempt]] tables.
var requiredTable = regexp.MustCompile(`(?m)^[ \t]*\[\[?[^\]#\n]*\.required_plugins\.`)

// requiringDropIn: the first file of the globs of DROPINS (in name order)
// that has a required plugin's table, or "".
func requiringDropIn(dropIns string, stderr io.Writer) string {
	for _, g := range dropInGlobs(dropIns) {
		files, _ := filepath.Glob(g)
		sort.Strings(files)
		for _, f := range files {
			data, err := os.ReadFile(f)
			if err != nil {
				fmt.Fprintln(stderr, "nri-npd-check:", err)
				continue
			}
			if requiredTable.Match(data) {
				return f
			}
		}
	}
	return ""
}

// countStates says how many instances are in each state, "ready" first:
// "1 instance ready", "2 instances ready, 1 replaced".
func countStates(plugins []cristatus.Plugin) []string {
	n := map[string]int{}
	var states []string
	for _, p := range plugins {
		if n[p.State] == 0 && p.State != cristatus.StateReady {
			states = append(states, p.State)
		}
		n[p.State]++
	}
	sort.Strings(states)
	if n[cristatus.StateReady] > 0 || len(states) == 0 {
		states = append([]string{cristatus.StateReady}, states...)
	}
	out := make([]string, len(states))
	for i, st := range states {
		out[i] = fmt.Sprintf("%d %s", n[st], st)
		if i == 0 {
			noun := "instances"
			if n[st] == 1 {
				noun = "instance"
			}
			out[i] = fmt.Sprintf("%d %s %s", n[st], noun, st)
		}
	}
	return out
}

// list joins ITEMS with ", " into at most MAX bytes, ending with "+N more"
// where the rest does not fit.
func list(items []string, max int) string {
	out := ""
	for i, it := range items {
		next := it
		if i > 0 {
			next = out + ", " + it
		}
		more := ""
		if i < len(items)-1 {
			more = fmt.Sprintf(" +%d more", len(items)-1-i)
		}
		if len(next)+len(more) > max && i > 0 {
			return out + fmt.Sprintf(" +%d more", len(items)-i)
		}
		out = next
	}
	return out
}

// cut shortens S to MAX bytes, as NPD would, on a rune boundary.
func cut(s string, max int) string {
	s = strings.ReplaceAll(strings.TrimSpace(s), "\n", " ")
	if len(s) <= max {
		return s
	}
	for max > 0 && !utf8RuneStart(s[max]) {
		max--
	}
	return s[:max]
}

func utf8RuneStart(b byte) bool { return b&0xC0 != 0x80 }

// state is what went-down mode keeps between runs: each required plugin's
// state at the previous run.
type state struct {
	Plugins map[string]string `json:"plugins"`
}

func wentDown(file string, r required, max int, stderr io.Writer) (int, string) {
	now := state{Plugins: map[string]string{}}
	for _, p := range r.plugins {
		now.Plugins[p.ID()] = p.State
	}
	var prev state
	first := false
	data, err := os.ReadFile(file)
	switch {
	case errors.Is(err, os.ErrNotExist):
		first = true
	case err != nil:
		fmt.Fprintf(stderr, "nri-npd-check: state file %s: %v\n", file, err)
		return exitOK, "not checked: state file unreadable: " + file
	default:
		if err := json.Unmarshal(data, &prev); err != nil {
			// A torn or foreign file: start over.
			fmt.Fprintf(stderr, "nri-npd-check: state file %s: %v; starting over\n", file, err)
			first = true
		}
	}
	if err := writeState(file, now); err != nil {
		fmt.Fprintf(stderr, "nri-npd-check: state file %s: %v\n", file, err)
		return exitOK, "not checked: state file not writable: " + file
	}
	if first {
		return exitOK, "recorded the required NRI plugins' states"
	}
	var down []string
	for key, st := range now.Plugins {
		if (cristatus.Plugin{State: st}).Down() && prev.Plugins[key] == cristatus.StateReady {
			down = append(down, key+" "+st)
		}
	}
	if len(down) == 0 {
		return exitOK, "no required NRI plugin went down"
	}
	sort.Strings(down)
	const prefix = "went down: "
	return exitNonOK, prefix + list(down, max-len(prefix))
}

// writeState replaces FILE atomically, creating its directory if needed.
func writeState(file string, s state) error {
	data, err := json.Marshal(s)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(file), 0o700); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(file), "."+filepath.Base(file)+".*")
	if err != nil {
		return err
	}
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return err
	}
	if err := tmp.Close(); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	if err := os.Rename(tmp.Name(), file); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	return nil
}
