// Command nri-faulty is an NRI plugin that injects faults on request. It is
// used by the nrigate tests and demos to show what the runtime does when a
// required plugin is absent, crashes, hangs or errors.
//
// In "ok" mode it answers every request; CreateContainer adds the env var
// NRI_FAULTY_ACTED=<name> and the annotation nri-faulty.nrigate.io/acted=<name>
// (other keys with --acted-env and --acted-annotation, for a second instance:
// NRI refuses two plugins setting one key) so that a test can see the plugin
// acted. The other modes are
//
//	error          return an error from the request handler
//	hang           sleep for --hang before answering
//	crash-before   exit(1) as soon as the request arrives
//	crash-during   start handling, then exit(1) before answering
//	exit-after     answer --count requests, then exit(0)
//
// The mode applies to the events in --fault-events; teardown events are
// always answered so that a test's cleanup does not hang. Subscribed to
// ValidateContainerAdjustment (--events), the plugin is a validator: it
// accepts every adjustment, and with ValidateContainerAdjustment in
// --fault-events the mode applies there (error rejects the adjustment). A control file
// (--control), re-read on every request, overrides the mode at run time:
// its content is "MODE [ARG]", for example "hang 5s", "crash-during",
// "exit-after 3" or "ok". An empty or missing file means the --mode flag.
//
// With --update-others-on-stop the plugin "rebalances" on every
// StopContainer: it answers with a CPU shares update of every other
// container it knows (from Synchronize and CreateContainer, until their
// RemoveContainer), as a resource-management plugin does; it logs
// "update-others on stop of NAME: N containers".
//
// Every line the plugin logs starts with an RFC 3339 timestamp in UTC with
// all nine digits of nanoseconds. After Synchronize it logs "ready", also to
// stdout, so that a test can wait for it; each request it acted on is logged
// as "acted EVENT pod=NAMESPACE/NAME uid=UID sandbox=ID container_id=ID
// container=NAME" (container_id is empty for pod events; with it a test
// matches the plugin's log against the containers a runtime created), and
// each request it holds in hang mode as "hang EVENT for DURATION
// pod=NAMESPACE/NAME uid=UID sandbox=ID". On SIGUSR1 it
// logs "stats goroutines=N", for leak tests (its fds are in /proc).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/containerd/nri/pkg/api"
	nrilog "github.com/containerd/nri/pkg/log"
	"github.com/containerd/nri/pkg/stub"
)

// Mode selects the fault the plugin injects.
type Mode string

const (
	// ModeOK answers every request and marks containers as acted on.
	ModeOK Mode = "ok"
	// ModeError returns an error from the request handler.
	ModeError Mode = "error"
	// ModeHang sleeps for the hang duration before answering.
	ModeHang Mode = "hang"
	// ModeCrashBefore exits as soon as a request arrives.
	ModeCrashBefore Mode = "crash-before"
	// ModeCrashDuring exits while handling a request, before answering.
	ModeCrashDuring Mode = "crash-during"
	// ModeExitAfter answers a number of requests, then exits.
	ModeExitAfter Mode = "exit-after"
)

const (
	// ActedEnv is the env var injected into every container the plugin acted on.
	ActedEnv = "NRI_FAULTY_ACTED"
	// ActedAnnotation is the annotation injected into every container the plugin acted on.
	ActedAnnotation = "nri-faulty.nrigate.io/acted"
	// DefaultEvents are the events the plugin subscribes to by default.
	DefaultEvents = "RunPodSandbox,CreateContainer,UpdateContainer,StopContainer,RemoveContainer"
	// DefaultFaultEvents are the events the fault modes apply to by default.
	DefaultFaultEvents = "RunPodSandbox,CreateContainer,UpdateContainer"
	// crashDuringDelay is how long crash-during works on a request before it exits,
	// so that the runtime's call is in flight when the connection drops.
	crashDuringDelay = 20 * time.Millisecond
)

func parseMode(s string) (Mode, error) {
	switch m := Mode(s); m {
	case ModeOK, ModeError, ModeHang, ModeCrashBefore, ModeCrashDuring, ModeExitAfter:
		return m, nil
	}
	return "", fmt.Errorf("unknown mode %q (allowed: ok, error, hang, crash-before, crash-during, exit-after)", s)
}

// fault is the effective fault for one request.
type fault struct {
	mode  Mode
	hang  time.Duration
	count int
}

type plugin struct {
	name        string
	control     string
	def         fault
	events      api.EventMask
	faultEvents api.EventMask

	// updateOthers makes StopContainer answer with updates of the other
	// known containers.
	updateOthers bool
	// actedEnv and actedAnnotation are the keys CreateContainer sets.
	actedEnv, actedAnnotation string

	mu      sync.Mutex
	out     io.Writer
	handled int
	// known holds the IDs of the containers the plugin knows (guarded by mu).
	known map[string]bool
}

func (p *plugin) track(id string, present bool) {
	if id == "" {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.known == nil {
		p.known = map[string]bool{}
	}
	if present {
		p.known[id] = true
	} else {
		delete(p.known, id)
	}
}

// othersUpdate returns a CPU shares update of every known container but id.
func (p *plugin) othersUpdate(id string) []*api.ContainerUpdate {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []*api.ContainerUpdate
	for other := range p.known {
		if other == id {
			continue
		}
		u := &api.ContainerUpdate{ContainerId: other}
		u.SetLinuxCPUShares(uint64(512 + len(out)))
		out = append(out, u)
	}
	return out
}

// logTimeFormat is RFC 3339 in UTC with all nine digits of the
// nanoseconds, unlike time.RFC3339Nano, which drops trailing zeros: the
// timestamps then sort as strings, as the tests compare them.
const logTimeFormat = "2006-01-02T15:04:05.000000000Z07:00"

// now returns the current time in logTimeFormat.
func now() string {
	return time.Now().UTC().Format(logTimeFormat)
}

func (p *plugin) logf(format string, args ...any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	fmt.Fprintf(p.out, "%s %s\n", now(), fmt.Sprintf(format, args...))
}

// current returns the fault from the control file, or the flag default.
func (p *plugin) current() fault {
	if p.control == "" {
		return p.def
	}
	buf, err := os.ReadFile(p.control)
	if err != nil {
		return p.def
	}
	fields := strings.Fields(string(buf))
	if len(fields) == 0 {
		return p.def
	}
	m, err := parseMode(fields[0])
	if err != nil {
		p.logf("control file %s: %v; using mode %s", p.control, err, p.def.mode)
		return p.def
	}
	f := fault{mode: m, hang: p.def.hang, count: p.def.count}
	if len(fields) > 1 {
		switch m {
		case ModeHang:
			if d, err := time.ParseDuration(fields[1]); err == nil {
				f.hang = d
			}
		case ModeExitAfter:
			if n, err := strconv.Atoi(fields[1]); err == nil {
				f.count = n
			}
		}
	}
	return f
}

func (p *plugin) exit(code int, why string) {
	p.logf("exit %d: %s", code, why)
	os.Exit(code)
}

// handle applies the current fault to a request for event ev. It returns
// nil when the plugin should act on the request and answer it.
func (p *plugin) handle(ev api.Event, pod *api.PodSandbox, ctr *api.Container) error {
	name := ev.PrettyName()
	if !p.faultEvents.IsSet(ev) {
		p.acted(name, pod, ctr)
		return nil
	}
	f := p.current()
	switch f.mode {
	case ModeError:
		p.logf("error %s pod=%s/%s", name, pod.GetNamespace(), pod.GetName())
		return fmt.Errorf("nri-faulty %s: injected error for %s", p.name, name)
	case ModeHang:
		p.logf("hang %s for %s pod=%s/%s uid=%s sandbox=%s", name, f.hang,
			pod.GetNamespace(), pod.GetName(), pod.GetUid(), pod.GetId())
		time.Sleep(f.hang)
	case ModeCrashBefore:
		p.exit(1, "crash-before "+name)
	case ModeCrashDuring:
		p.logf("crash-during %s: handling", name)
		time.Sleep(crashDuringDelay)
		p.exit(1, "crash-during "+name)
	case ModeExitAfter:
		p.mu.Lock()
		p.handled++
		n := p.handled
		p.mu.Unlock()
		if n > f.count {
			p.exit(0, fmt.Sprintf("exit-after %d: request %d %s", f.count, n, name))
		}
		if n == f.count {
			// Exit once the answer had time to go out.
			time.AfterFunc(50*time.Millisecond, func() {
				p.exit(0, fmt.Sprintf("exit-after %d: answered %d requests", f.count, n))
			})
		}
	}
	p.acted(name, pod, ctr)
	return nil
}

func (p *plugin) acted(event string, pod *api.PodSandbox, ctr *api.Container) {
	p.logf("acted %s pod=%s/%s uid=%s sandbox=%s container_id=%s container=%s", event,
		pod.GetNamespace(), pod.GetName(), pod.GetUid(), pod.GetId(), ctr.GetId(), ctr.GetName())
}

// Configure subscribes the plugin to the events given by --events.
func (p *plugin) Configure(_ context.Context, _, runtime, version string) (api.EventMask, error) {
	p.logf("configured by %s %s, events %s", runtime, version, p.events.PrettyString())
	return p.events, nil
}

// Synchronize answers and reports the plugin ready.
func (p *plugin) Synchronize(_ context.Context, pods []*api.PodSandbox, ctrs []*api.Container) ([]*api.ContainerUpdate, error) {
	for _, c := range ctrs {
		p.track(c.GetId(), true)
	}
	p.logf("ready (synchronized %d pods, %d containers)", len(pods), len(ctrs))
	fmt.Fprintf(os.Stdout, "ready %s\n", now())
	return nil, nil
}

// RunPodSandbox cannot adjust the pod; it only applies the fault and logs.
func (p *plugin) RunPodSandbox(_ context.Context, pod *api.PodSandbox) error {
	return p.handle(api.Event_RUN_POD_SANDBOX, pod, nil)
}

// CreateContainer marks the container as acted on.
func (p *plugin) CreateContainer(_ context.Context, pod *api.PodSandbox, ctr *api.Container) (*api.ContainerAdjustment, []*api.ContainerUpdate, error) {
	if err := p.handle(api.Event_CREATE_CONTAINER, pod, ctr); err != nil {
		return nil, nil, err
	}
	p.track(ctr.GetId(), true)
	adjust := &api.ContainerAdjustment{}
	adjust.AddEnv(p.actedEnv, p.name)
	adjust.AddAnnotation(p.actedAnnotation, p.name)
	return adjust, nil, nil
}

// UpdateContainer applies the fault and accepts the update unchanged.
func (p *plugin) UpdateContainer(_ context.Context, pod *api.PodSandbox, ctr *api.Container, _ *api.LinuxResources) ([]*api.ContainerUpdate, error) {
	return nil, p.handle(api.Event_UPDATE_CONTAINER, pod, ctr)
}

// StopContainer applies the fault if configured for it.
func (p *plugin) StopContainer(_ context.Context, pod *api.PodSandbox, ctr *api.Container) ([]*api.ContainerUpdate, error) {
	if err := p.handle(api.Event_STOP_CONTAINER, pod, ctr); err != nil {
		return nil, err
	}
	if !p.updateOthers {
		return nil, nil
	}
	upd := p.othersUpdate(ctr.GetId())
	p.logf("update-others on stop of %s: %d containers", ctr.GetName(), len(upd))
	return upd, nil
}

// ValidateContainerAdjustment accepts the adjustment, or applies the fault
// if configured for it.
func (p *plugin) ValidateContainerAdjustment(_ context.Context, req *api.ValidateContainerAdjustmentRequest) error {
	return p.handle(api.Event_VALIDATE_CONTAINER_ADJUSTMENT, req.GetPod(), req.GetContainer())
}

// RemoveContainer applies the fault if configured for it.
func (p *plugin) RemoveContainer(_ context.Context, pod *api.PodSandbox, ctr *api.Container) error {
	p.track(ctr.GetId(), false)
	return p.handle(api.Event_REMOVE_CONTAINER, pod, ctr)
}

// StopPodSandbox applies the fault if configured for it.
func (p *plugin) StopPodSandbox(_ context.Context, pod *api.PodSandbox) error {
	return p.handle(api.Event_STOP_POD_SANDBOX, pod, nil)
}

// RemovePodSandbox applies the fault if configured for it.
func (p *plugin) RemovePodSandbox(_ context.Context, pod *api.PodSandbox) error {
	return p.handle(api.Event_REMOVE_POD_SANDBOX, pod, nil)
}

func parseFailurePolicy(s string) (*api.FailurePolicy, error) {
	fp := &api.FailurePolicy{}
	for _, f := range strings.Split(s, ",") {
		switch strings.TrimSpace(f) {
		case "", "none":
		case "fail-request":
			fp.FailRequest = true
		case "keep-connected":
			fp.KeepConnected = true
		default:
			return nil, fmt.Errorf("unknown failure policy %q (allowed: none, fail-request, keep-connected, or both comma-separated)", f)
		}
	}
	if !fp.FailRequest && !fp.KeepConnected {
		return nil, nil
	}
	return fp, nil
}

// quietLogger sends the stub's log to the plugin's log output.
type quietLogger struct {
	p       *plugin
	verbose bool
}

func (l quietLogger) Debugf(_ context.Context, f string, a ...any) {
	if l.verbose {
		l.p.logf("stub: debug: "+f, a...)
	}
}
func (l quietLogger) Infof(_ context.Context, f string, a ...any) {
	l.p.logf("stub: "+f, a...)
}
func (l quietLogger) Warnf(_ context.Context, f string, a ...any) {
	l.p.logf("stub: warning: "+f, a...)
}
func (l quietLogger) Errorf(_ context.Context, f string, a ...any) {
	l.p.logf("stub: error: "+f, a...)
}

func run() error {
	var (
		name        = flag.String("name", "nri-faulty", "plugin name to register with")
		idx         = flag.String("idx", "50", "plugin index to register with")
		socket      = flag.String("socket", api.DefaultSocketPath, "NRI socket to connect to")
		mode        = flag.String("mode", string(ModeOK), "fault mode: ok, error, hang, crash-before, crash-during, exit-after")
		hang        = flag.Duration("hang", time.Minute, "how long hang mode sleeps")
		count       = flag.Int("count", 1, "requests exit-after mode answers before exiting")
		events      = flag.String("events", DefaultEvents, "comma-separated events to subscribe to")
		faultEvents = flag.String("fault-events", DefaultFaultEvents, "comma-separated events the fault mode applies to")
		control     = flag.String("control", "", "file whose content (\"MODE [ARG]\"), re-read on every request, overrides --mode")
		failPolicy  = flag.String("failure-policy", "none", "plugin-declared upstream FailurePolicy: none, fail-request, keep-connected")
		logFile     = flag.String("log-file", "", "append the log to this file instead of stderr")
		updOthers   = flag.Bool("update-others-on-stop", false, "answer every StopContainer with a CPU shares update of every other known container")
		// Two instances acting on the same container must inject under
		// different keys: NRI refuses two plugins setting one env var or
		// annotation.
		actedEnv        = flag.String("acted-env", ActedEnv, "the env var marking a container the plugin acted on")
		actedAnnotation = flag.String("acted-annotation", ActedAnnotation, "the annotation marking a container the plugin acted on")
		// -verbose is the flag of upstream's sample plugins (device-injector
		// and others): accepted so that a DaemonSet written for them runs
		// this plugin with its args unchanged (test/k8s).
		verbose = flag.Bool("verbose", false, "also log the NRI stub's debug messages")
	)
	flag.Parse()

	m, err := parseMode(*mode)
	if err != nil {
		return err
	}
	mask, err := api.ParseEventMask(*events)
	if err != nil {
		return fmt.Errorf("--events: %w", err)
	}
	fmask, err := api.ParseEventMask(*faultEvents)
	if err != nil {
		return fmt.Errorf("--fault-events: %w", err)
	}
	if mask == 0 {
		return errors.New("--events: subscribe to at least one event")
	}
	fp, err := parseFailurePolicy(*failPolicy)
	if err != nil {
		return fmt.Errorf("--failure-policy: %w", err)
	}

	p := &plugin{
		name:        *name,
		control:     *control,
		def:         fault{mode: m, hang: *hang, count: *count},
		events:      mask,
		faultEvents: fmask,
		out:         os.Stderr,

		updateOthers: *updOthers,

		actedEnv:        *actedEnv,
		actedAnnotation: *actedAnnotation,
	}
	if *logFile != "" {
		f, err := os.OpenFile(*logFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return err
		}
		defer f.Close()
		p.out = f
	}
	nrilog.Set(quietLogger{p: p, verbose: *verbose})

	opts := []stub.Option{
		stub.WithPluginName(*name),
		stub.WithPluginIdx(*idx),
		stub.WithSocketPath(*socket),
		stub.WithOnClose(func() { p.exit(0, "connection to the runtime closed") }),
	}
	if fp != nil {
		opts = append(opts, stub.WithFailurePolicy(fp))
	}
	s, err := stub.New(p, opts...)
	if err != nil {
		return err
	}
	usr1 := make(chan os.Signal, 1)
	signal.Notify(usr1, syscall.SIGUSR1)
	go func() {
		for range usr1 {
			p.logf("stats goroutines=%d", runtime.NumGoroutine())
		}
	}()
	p.logf("started pid %d as %s-%s mode %s", os.Getpid(), *idx, *name, m)
	return s.Run(context.Background())
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintf(os.Stderr, "%s nri-faulty: %v\n", now(), err)
		os.Exit(1)
	}
}
