package main

import (
	"bytes"
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// fakeRuntime answers CRI Status with resp, or never (hang).
type fakeRuntime struct {
	runtimeapi.UnimplementedRuntimeServiceServer
	mu   sync.Mutex
	resp *runtimeapi.StatusResponse
	hang bool
}

func (f *fakeRuntime) set(resp *runtimeapi.StatusResponse, hang bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.resp, f.hang = resp, hang
}

func (f *fakeRuntime) Status(ctx context.Context, req *runtimeapi.StatusRequest) (*runtimeapi.StatusResponse, error) {
	f.mu.Lock()
	resp, hang := f.resp, f.hang
	f.mu.Unlock()
	if !req.GetVerbose() {
		return nil, status.Error(codes.InvalidArgument, "the check must ask for the verbose status")
	}
	if hang {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return resp, nil
}

// shortDir: a directory whose paths fit a unix socket's 108 bytes.
func shortDir(t *testing.T) string {
	t.Helper()
	d, err := os.MkdirTemp("", "npdck")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

// serve starts f on a unix socket and returns its endpoint.
func serve(t *testing.T, f *fakeRuntime) string {
	t.Helper()
	sock := filepath.Join(shortDir(t), "rt.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer()
	runtimeapi.RegisterRuntimeServiceServer(s, f)
	go s.Serve(l)
	t.Cleanup(s.Stop)
	return "unix://" + sock
}

func cond(ready bool, msg string) *runtimeapi.RuntimeCondition {
	c := &runtimeapi.RuntimeCondition{Type: "NRIPluginsReady", Status: ready, Message: msg}
	if !ready {
		c.Reason = "NRIPluginsNotReady"
	}
	return c
}

func statusResp(c *runtimeapi.RuntimeCondition, nri string) *runtimeapi.StatusResponse {
	conds := []*runtimeapi.RuntimeCondition{
		{Type: "RuntimeReady", Status: true},
		{Type: "NetworkReady", Status: true},
	}
	if c != nil {
		conds = append(conds, c)
	}
	r := &runtimeapi.StatusResponse{Status: &runtimeapi.RuntimeStatus{Conditions: conds}}
	if nri != "" {
		r.Info = map[string]string{"nri": nri}
	}
	return r
}

// An entry as the runtimes print it, with fields the check does not read.
const (
	readyPlugin = `{"key": "10-device-injector", "name": "device-injector", "index": "10", "state": "ready",
		"fail_policy": "fail", "since": "2026-12-04T05:58:38Z", "last_error": "", "events": ["CreateContainer"], "readiness": "condition"}`
	absentPlugin = `{"key": "20-guard", "name": "guard", "index": "20", "state": "not registered",
		"fail_policy": "fail", "since": "2026-12-04T05:58:38Z", "last_error": ""}`
	downPlugin = `{"key": "30-netplug", "name": "netplug", "index": "30", "state": "disconnected",
		"fail_policy": "ignore", "since": "2026-12-04T05:58:38Z", "last_error": "connection closed"}`
)

func plugins(entries ...string) string {
	return `{"plugins": [` + strings.Join(entries, ",") + `], "future": {"x": 1}}`
}

func runCheck(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := run(context.Background(), args, &out, &errOut)
	msg := out.String()
	if strings.Count(msg, "\n") != 1 || !strings.HasSuffix(msg, "\n") {
		t.Errorf("stdout %q: want exactly one line", msg)
	}
	return code, strings.TrimSuffix(msg, "\n"), errOut.String()
}

func TestCondition(t *testing.T) {
	tests := []struct {
		name string
		resp *runtimeapi.StatusResponse
		code int
		msg  string
	}{
		{
			name: "no policy: no condition",
			resp: statusResp(nil, ""),
			code: exitOK,
			msg:  "no NRI plugin is required by the runtime",
		},
		{
			name: "all ready",
			resp: statusResp(cond(true, ""), plugins(readyPlugin)),
			code: exitOK,
			msg:  "required NRI plugins ready: 1 instance ready",
		},
		{
			// A rolling update of the plugin to another index: the old
			// instance is listed as replaced, not as a problem.
			name: "ready, one instance replaced",
			resp: statusResp(cond(true, ""), plugins(
				`{"key": "guard", "name": "guard", "index": "10", "state": "replaced", "replaced_by": "20-guard"}`,
				`{"key": "guard", "name": "guard", "index": "20", "state": "ready"}`, readyPlugin)),
			code: exitOK,
			msg:  "required NRI plugins ready: 2 instances ready, 1 replaced",
		},
		{
			name: "one down, another replaced",
			resp: statusResp(cond(false, "x"), plugins(
				`{"key": "guard", "name": "guard", "index": "10", "state": "replaced", "replaced_by": "20-guard"}`,
				`{"key": "guard", "name": "guard", "index": "20", "state": "ready"}`, downPlugin)),
			code: exitNonOK,
			msg:  "30-netplug disconnected",
		},
		{
			name: "one not registered",
			resp: statusResp(cond(false, `required NRI plugins not ready: "20-guard" is not registered`), plugins(readyPlugin, absentPlugin)),
			code: exitNonOK,
			msg:  "20-guard not registered",
		},
		{
			// A key naming a plugin by name covers every instance; the
			// down one is named by its index.
			name: "two instances under one key, one down",
			resp: statusResp(cond(false, "x"), plugins(
				`{"key": "guard", "name": "guard", "index": "10", "state": "ready"}`,
				`{"key": "guard", "name": "guard", "index": "20", "state": "disconnected"}`)),
			code: exitNonOK,
			msg:  "20-guard disconnected",
		},
		{
			name: "two down",
			resp: statusResp(cond(false, "x"), plugins(absentPlugin, readyPlugin, downPlugin)),
			code: exitNonOK,
			msg:  "20-guard not registered, 30-netplug disconnected",
		},
		{
			name: "condition false but no entry down: the runtime's words",
			resp: statusResp(cond(false, `required NRI plugins not ready: "x" is not subscribed`), plugins(readyPlugin)),
			code: exitNonOK,
			msg:  `required NRI plugins not ready: "x" is not subscribed`,
		},
		{
			name: "no verbose entry",
			resp: statusResp(cond(false, "x"), ""),
			code: exitUnknown,
			msg:  "runtime's verbose nri status malformed",
		},
		{
			name: "verbose entry not JSON",
			resp: statusResp(cond(false, "x"), `{"plugins": [`),
			code: exitUnknown,
			msg:  "runtime's verbose nri status malformed",
		},
		{
			name: "verbose entry without plugins",
			resp: statusResp(cond(true, ""), `{"policy": {}}`),
			code: exitUnknown,
			msg:  "runtime's verbose nri status malformed",
		},
		{
			name: "plugins not an array",
			resp: statusResp(cond(false, "x"), `{"plugins": {"key": "a"}}`),
			code: exitUnknown,
			msg:  "runtime's verbose nri status malformed",
		},
		{
			name: "entry of the wrong type",
			resp: statusResp(cond(false, "x"), `{"plugins": [{"key": 10, "state": "ready"}]}`),
			code: exitUnknown,
			msg:  "runtime's verbose nri status malformed",
		},
		{
			name: "entry without state",
			resp: statusResp(cond(false, "x"), `{"plugins": [{"key": "a"}]}`),
			code: exitUnknown,
			msg:  "runtime's verbose nri status malformed",
		},
		{
			name: "entry without key or name",
			resp: statusResp(cond(false, "x"), `{"plugins": [{"state": "ready"}]}`),
			code: exitUnknown,
			msg:  "runtime's verbose nri status malformed",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ep := serve(t, &fakeRuntime{resp: tc.resp})
			code, msg, stderr := runCheck(t, "--runtime-endpoint", ep)
			if code != tc.code || msg != tc.msg {
				t.Errorf("got %d %q, want %d %q (stderr %q)", code, msg, tc.code, tc.msg, stderr)
			}
		})
	}
}

func TestMessageFitsMaxOutputLength(t *testing.T) {
	var entries []string
	for _, k := range []string{"10-aaaaaaaaaaaaaaaaaaaa", "20-bbbbbbbbbbbbbbbbbbbb", "30-cccccccccccccccccccc", "40-dddddddddddddddddddd"} {
		entries = append(entries, `{"key": "`+k+`", "state": "not registered"}`)
	}
	ep := serve(t, &fakeRuntime{resp: statusResp(cond(false, "x"), plugins(entries...))})
	code, msg, _ := runCheck(t, "--runtime-endpoint", ep)
	if want := "10-aaaaaaaaaaaaaaaaaaaa not registered +3 more"; code != exitNonOK || msg != want {
		t.Errorf("got %d %q, want 1 %q", code, msg, want)
	}
	if len(msg) > defaultMaxOutput {
		t.Errorf("message of %d bytes, NPD's default max_output_length is %d", len(msg), defaultMaxOutput)
	}
	code, msg, _ = runCheck(t, "--runtime-endpoint", ep, "--max-output-length", "200")
	if code != exitNonOK || strings.Contains(msg, "more") || strings.Count(msg, "not registered") != 4 {
		t.Errorf("--max-output-length 200: got %d %q", code, msg)
	}
	// One entry longer than the limit is cut, not dropped.
	long := `{"key": "` + strings.Repeat("x", 100) + `", "state": "disconnected"}`
	ep = serve(t, &fakeRuntime{resp: statusResp(cond(false, "x"), plugins(long))})
	code, msg, _ = runCheck(t, "--runtime-endpoint", ep)
	if code != exitNonOK || len(msg) != defaultMaxOutput || !strings.HasPrefix(msg, "xxxx") {
		t.Errorf("got %d %q", code, msg)
	}
}

func TestRuntimeUnreachable(t *testing.T) {
	t.Run("socket missing", func(t *testing.T) {
		sock := filepath.Join(shortDir(t), "none.sock")
		code, msg, _ := runCheck(t, "--runtime-endpoint", "unix://"+sock)
		if code != exitUnknown || msg != "runtime socket missing: "+sock {
			t.Errorf("got %d %q", code, msg)
		}
	})
	t.Run("nobody listening", func(t *testing.T) {
		sock := filepath.Join(shortDir(t), "dead.sock")
		l, err := net.Listen("unix", sock)
		if err != nil {
			t.Fatal(err)
		}
		l.(*net.UnixListener).SetUnlinkOnClose(false)
		l.Close()
		start := time.Now()
		code, msg, _ := runCheck(t, "--runtime-endpoint", "unix://"+sock, "--timeout", "5s")
		if code != exitUnknown || msg != "runtime not answering: "+sock {
			t.Errorf("got %d %q", code, msg)
		}
		if d := time.Since(start); d > 4*time.Second {
			t.Errorf("took %s: a refused connection should fail at once", d)
		}
	})
	t.Run("runtime hangs", func(t *testing.T) {
		ep := serve(t, &fakeRuntime{hang: true})
		start := time.Now()
		code, msg, _ := runCheck(t, "--runtime-endpoint", ep, "--timeout", "300ms")
		if code != exitUnknown || msg != "runtime did not answer within 300ms: "+strings.TrimPrefix(ep, "unix://") {
			t.Errorf("got %d %q", code, msg)
		}
		if d := time.Since(start); d < 300*time.Millisecond || d > 3*time.Second {
			t.Errorf("took %s, want about the 300ms timeout", d)
		}
	})
}

func TestBadArguments(t *testing.T) {
	for _, args := range [][]string{
		{},
		{"--runtime-endpoint", "/run/crio/crio.sock"},
		{"--runtime-endpoint", "tcp://127.0.0.1:1"},
		{"--runtime-endpoint", ","},
		{"--runtime-endpoint", "unix:///x", "--timeout", "0s"},
		{"--runtime-endpoint", "unix:///x", "--mode", "events"},
		{"--runtime-endpoint", "unix:///x", "--mode", "went-down"},
		{"--runtime-endpoint", "unix:///x", "--state-file", "/tmp/s"},
		{"--runtime-endpoint", "unix:///x", "--max-output-length", "3"},
		{"--runtime-endpoint", "unix:///x", "extra"},
		{"--no-such-flag"},
	} {
		code, msg, _ := runCheck(t, args...)
		if code != exitUnknown || msg == "" {
			t.Errorf("%q: got %d %q, want %d and a message", args, code, msg, exitUnknown)
		}
	}
}

func TestWentDown(t *testing.T) {
	rt := &fakeRuntime{}
	ep := serve(t, rt)
	file := filepath.Join(shortDir(t), "run", "state.json")
	step := func(resp *runtimeapi.StatusResponse, wantCode int, wantMsg string) {
		t.Helper()
		rt.set(resp, false)
		code, msg, stderr := runCheck(t, "--runtime-endpoint", ep, "--mode", "went-down", "--state-file", file)
		if code != wantCode || msg != wantMsg {
			t.Errorf("got %d %q, want %d %q (stderr %q)", code, msg, wantCode, wantMsg, stderr)
		}
	}
	up := statusResp(cond(true, ""), plugins(readyPlugin))
	guardDown := `{"key": "20-guard", "state": "disconnected"}`
	guardUp := `{"key": "20-guard", "state": "ready"}`
	// The first run records; a plugin down already then did not "go down".
	step(statusResp(cond(false, "x"), plugins(readyPlugin, absentPlugin)), exitOK, "recorded the required NRI plugins' states")
	step(statusResp(cond(false, "x"), plugins(readyPlugin, absentPlugin)), exitOK, "no required NRI plugin went down")
	step(statusResp(cond(true, ""), plugins(readyPlugin, guardUp)), exitOK, "no required NRI plugin went down")
	step(statusResp(cond(false, "x"), plugins(readyPlugin, guardDown)), exitNonOK, "went down: 20-guard disconnected")
	// Still down: reported once.
	step(statusResp(cond(false, "x"), plugins(readyPlugin, guardDown)), exitOK, "no required NRI plugin went down")
	step(statusResp(cond(true, ""), plugins(readyPlugin, guardUp)), exitOK, "no required NRI plugin went down")
	// Both at once; a plugin no longer configured did not go down.
	step(statusResp(cond(false, "x"), plugins(absentPlugin, `{"key": "10-device-injector", "state": "not subscribed"}`)),
		exitNonOK, "went down: 10-device-injector not subscribed, 20-guard not registered")
	step(up, exitOK, "no required NRI plugin went down")
	// An instance replaced by another in a rolling update did not go down.
	step(statusResp(cond(true, ""), plugins(readyPlugin, `{"key": "guard", "name": "guard", "index": "20", "state": "ready"}`)),
		exitOK, "no required NRI plugin went down")
	step(statusResp(cond(true, ""), plugins(readyPlugin, `{"key": "guard", "name": "guard", "index": "20", "state": "replaced"}`,
		`{"key": "guard", "name": "guard", "index": "30", "state": "ready"}`)), exitOK, "no required NRI plugin went down")
	// The policy removed: nothing went down.
	step(statusResp(nil, ""), exitOK, "no required NRI plugin went down")
	// A runtime that does not answer: not checked, the state kept.
	step(up, exitOK, "no required NRI plugin went down")
	rt.set(up, true)
	code, msg, _ := runCheck(t, "--runtime-endpoint", ep, "--mode", "went-down", "--state-file", file, "--timeout", "100ms")
	if code != exitOK || !strings.HasPrefix(msg, "not checked: runtime did not answer") {
		t.Errorf("hung runtime: got %d %q", code, msg)
	}
	step(statusResp(cond(false, "x"), plugins(`{"key": "10-device-injector", "state": "disconnected"}`)),
		exitNonOK, "went down: 10-device-injector disconnected")
	// A torn state file starts over.
	if err := os.WriteFile(file, []byte(`{"plugins": {"10-de`), 0o600); err != nil {
		t.Fatal(err)
	}
	step(up, exitOK, "recorded the required NRI plugins' states")
	step(statusResp(cond(false, "x"), plugins(`{"key": "10-device-injector", "state": "disconnected"}`)),
		exitNonOK, "went down: 10-device-injector disconnected")
	// Malformed verbose status: not checked.
	step(statusResp(cond(false, "x"), `[`), exitOK, "not checked: runtime's verbose nri status malformed")
}

func TestCut(t *testing.T) {
	if got := cut("ab\ncd  ", 80); got != "ab cd" {
		t.Errorf("cut: %q", got)
	}
	if got := cut("aé", 2); got != "a" {
		t.Errorf("cut on a rune boundary: %q", got)
	}
}

// One config for CRI-O and containerd nodes: the first endpoint whose
// socket exists is asked; with none, the message names every socket looked
// for (and fits NPD's 80 bytes for the shipped pair).
func TestEndpointList(t *testing.T) {
	rt := &fakeRuntime{}
	rt.set(statusResp(cond(false, "not ready"), plugins(absentPlugin)), false)
	ep := serve(t, rt)
	missing := "unix://" + filepath.Join(shortDir(t), "crio.sock")
	t.Run("first existing socket", func(t *testing.T) {
		code, msg, _ := runCheck(t, "--runtime-endpoint", missing+","+ep)
		if code != exitNonOK || msg != "20-guard not registered" {
			t.Errorf("got %d %q", code, msg)
		}
	})
	t.Run("an existing socket is asked even if a later one answers", func(t *testing.T) {
		sock := filepath.Join(shortDir(t), "dead.sock")
		l, err := net.Listen("unix", sock)
		if err != nil {
			t.Fatal(err)
		}
		l.(*net.UnixListener).SetUnlinkOnClose(false)
		l.Close()
		code, msg, _ := runCheck(t, "--runtime-endpoint", "unix://"+sock+","+ep, "--timeout", "5s")
		if code != exitUnknown || msg != "runtime not answering: "+sock {
			t.Errorf("got %d %q", code, msg)
		}
	})
	t.Run("no socket", func(t *testing.T) {
		code, msg, _ := runCheck(t, "--runtime-endpoint", "unix:///run/nrigate-t/crio.sock,unix:///run/nrigate-t/containerd.sock")
		want := "no runtime socket: /run/nrigate-t/crio.sock, /run/nrigate-t/containerd.sock"
		if code != exitUnknown || msg != want {
			t.Errorf("got %d %q, want %q", code, msg, want)
		}
		code, msg, _ = runCheck(t, "--runtime-endpoint", "unix:///var/run/crio/crio.sock,unix:///run/containerd/containerd.sock")
		if _, err := os.Stat("/var/run/crio/crio.sock"); err == nil {
			t.Skip("this host has a CRI-O socket")
		}
		if _, err := os.Stat("/run/containerd/containerd.sock"); err == nil {
			t.Skip("this host has a containerd socket")
		}
		want = "no runtime socket: /var/run/crio/crio.sock, /run/containerd/containerd.sock"
		if code != exitUnknown || msg != want {
			t.Errorf("got %d %q, want %q (the shipped pair must fit 80 bytes)", code, msg, want)
		}
	})
	t.Run("every endpoint checked", func(t *testing.T) {
		code, msg, stderr := runCheck(t, "--runtime-endpoint", ep+",/run/containerd/containerd.sock")
		if code != exitUnknown || !strings.Contains(msg, `"/run/containerd/containerd.sock"`) ||
			!strings.Contains(stderr, `"/run/containerd/containerd.sock": want unix:///path/to/runtime.sock`) {
			t.Errorf("got %d %q, stderr %q", code, msg, stderr)
		}
	})
}

// A runtime that reports no NRIPluginsReady while one of --drop-ins has a
// required plugin's table ignores that table (unpatched, or not reading
// the file): a problem, naming the file.
func TestIgnoredDropIn(t *testing.T) {
	dir := shortDir(t)
	write := func(name, content string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("10-base.conf", "[crio.runtime]\n# [crio.nri.required_plugins.\"commented\"]\n")
	crio := filepath.Join(dir, "*.conf")
	containerd := filepath.Join(dir, "*.toml")
	tests := []struct {
		name, file, content, globs string
		resp                       *runtimeapi.StatusResponse
		code                       int
		msg                        string
	}{
		{name: "no drop-in requires a plugin", globs: crio, resp: statusResp(nil, ""),
			code: exitOK, msg: "no NRI plugin is required by the runtime"},
		{name: "CRI-O drop-in ignored", file: "20-device-injector.conf", globs: crio,
			content: "[crio.nri.required_plugins.\"10-device-injector\"]\nfail_policy = \"fail\"\n",
			resp:    statusResp(nil, ""), code: exitNonOK,
			msg: "runtime ignores the required NRI plugins of 20-device-injector.conf"},
		{name: "containerd drop-in ignored, second glob", file: "20-device-injector.toml", globs: "/nonexistent/*.conf," + containerd,
			content: "version = 3\n  [[plugins.'io.containerd.nri.v1.nri'.required_plugins.'guard'.exempt]]\n",
			resp:    statusResp(nil, ""), code: exitNonOK,
			msg: "runtime ignores the required NRI plugins of 20-device-injector.toml"},
		{name: "the runtime knows the tables", file: "30-guard.conf", globs: crio,
			content: "[crio.nri.required_plugins.\"guard\"]\n",
			resp:    statusResp(cond(false, "x"), plugins(absentPlugin)), code: exitNonOK, msg: "20-guard not registered"},
		{name: "default validator's key is no table", file: "40-validator.toml", globs: containerd,
			content: "[plugins.\"io.containerd.nri.v1.nri\".default_validator]\nrequired_plugins = [\"guard\"]\n",
			resp:    statusResp(nil, ""), code: exitOK, msg: "no NRI plugin is required by the runtime"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if tc.file != "" {
				write(tc.file, tc.content)
				defer os.Remove(filepath.Join(dir, tc.file))
			}
			ep := serve(t, &fakeRuntime{resp: tc.resp})
			code, msg, stderr := runCheck(t, "--runtime-endpoint", ep, "--drop-ins", tc.globs)
			if code != tc.code || msg != tc.msg {
				t.Errorf("got %d %q, want %d %q (stderr %q)", code, msg, tc.code, tc.msg, stderr)
			}
			if tc.code == exitNonOK && tc.file != "" && strings.Contains(tc.msg, "ignores") &&
				!strings.Contains(stderr, filepath.Join(dir, tc.file)) {
				t.Errorf("stderr %q does not name %s", stderr, tc.file)
			}
		})
	}
	code, msg, _ := runCheck(t, "--runtime-endpoint", "unix:///x.sock", "--drop-ins", "[", "--timeout", "1s")
	if code != exitUnknown || !strings.Contains(msg, "--drop-ins") {
		t.Errorf("a bad glob: got %d %q", code, msg)
	}
	code, msg, _ = runCheck(t, "--runtime-endpoint", "unix:///x.sock", "--mode", "went-down", "--state-file", "/tmp/x", "--drop-ins", crio)
	if code != exitUnknown || !strings.Contains(msg, "--drop-ins is for --mode condition only") {
		t.Errorf("--drop-ins with went-down: got %d %q", code, msg)
	}
}
