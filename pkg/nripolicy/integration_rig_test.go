package nripolicy_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/containerd/nri/pkg/adaptation"
	"github.com/containerd/nri/pkg/api"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/nrigate/nrigate/pkg/nripolicy"
	"github.com/nrigate/nrigate/pkg/nripolicy/internal/testrig"
)

// The fault matrix runs the policy the way a runtime does: the policy's
// options go to adaptation.New, Attach before Start, and every gated relay
// is wrapped in Admit ... Done. Plugins are real nri-faulty processes.

const (
	matrixRequestTimeout      = 300 * time.Millisecond
	matrixRegistrationTimeout = time.Second
	guardName                 = "guard"
	guardIdx                  = "10"
)

// ginkgoLogger sends the policy's log to the ginkgo writer (shown on failure).
type ginkgoLogger struct{}

func (ginkgoLogger) Debugf(f string, a ...any) { GinkgoWriter.Printf("DEBUG "+f+"\n", a...) }
func (ginkgoLogger) Infof(f string, a ...any)  { GinkgoWriter.Printf("INFO  "+f+"\n", a...) }
func (ginkgoLogger) Warnf(f string, a ...any)  { GinkgoWriter.Printf("WARN  "+f+"\n", a...) }
func (ginkgoLogger) Errorf(f string, a ...any) { GinkgoWriter.Printf("ERROR "+f+"\n", a...) }

// decisions records every decision of the policy.
type decisions struct {
	mu  sync.Mutex
	all []nripolicy.Decision
}

func (d *decisions) Decided(x nripolicy.Decision) {
	d.mu.Lock()
	d.all = append(d.all, x)
	d.mu.Unlock()
}

func (d *decisions) count(outcome nripolicy.Outcome, ev nripolicy.Event) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	n := 0
	for _, x := range d.all {
		if x.Outcome == outcome && x.Event == ev {
			n++
		}
	}
	return n
}

// list returns a copy of the decisions so far.
func (d *decisions) list() []nripolicy.Decision {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]nripolicy.Decision(nil), d.all...)
}

func (d *decisions) last() (nripolicy.Decision, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.all) == 0 {
		return nripolicy.Decision{}, false
	}
	return d.all[len(d.all)-1], true
}

// readinessLog records every ReadinessHook call.
type readinessLog struct {
	mu    sync.Mutex
	calls [][]nripolicy.PluginState
}

func (r *readinessLog) ReadinessChanged(states []nripolicy.PluginState) {
	r.mu.Lock()
	r.calls = append(r.calls, append([]nripolicy.PluginState(nil), states...))
	r.mu.Unlock()
}

// sawState reports whether some call reported plugin key in state.
func (r *readinessLog) sawState(key string, state nripolicy.PluginStateKind) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, c := range r.calls {
		for _, s := range c {
			if s.Key == key && s.State == state {
				return true
			}
		}
	}
	return false
}

// env is one runtime: a policy attached to a started adaptation.
type env struct {
	dir, sock string
	policy    *nripolicy.Policy
	a         *adaptation.Adaptation
	decided   *decisions
	readiness *readinessLog
}

// guardConfig returns a policy requiring guard (key) for events with fp.
func guardConfig(key string, fp nripolicy.FailPolicy, events ...nripolicy.Event) *nripolicy.Config {
	pc := nripolicy.DefaultPluginConfig()
	pc.FailPolicy = fp
	if len(events) > 0 {
		pc.Events = events
	}
	cfg := nripolicy.DefaultConfig()
	cfg.Plugins = map[string]*nripolicy.PluginConfig{key: pc}
	return cfg
}

func newEnv(cfg *nripolicy.Config) *env {
	GinkgoHelper()
	adaptation.SetPluginRequestTimeout(matrixRequestTimeout)
	adaptation.SetPluginRegistrationTimeout(matrixRegistrationTimeout)
	DeferCleanup(func() {
		adaptation.SetPluginRequestTimeout(adaptation.DefaultPluginRequestTimeout)
		adaptation.SetPluginRegistrationTimeout(adaptation.DefaultPluginRegistrationTimeout)
	})
	dir, err := testrig.SocketDir()
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(os.RemoveAll, dir) // registered first: runs after the plugins and the adaptation stopped
	e := &env{dir: dir, sock: filepath.Join(dir, "nri.sock"), decided: &decisions{}, readiness: &readinessLog{}}
	e.policy, err = nripolicy.New(cfg,
		nripolicy.WithLogger(ginkgoLogger{}),
		nripolicy.WithDecisionHook(e.decided),
		nripolicy.WithReadinessHook(e.readiness))
	Expect(err).NotTo(HaveOccurred())
	e.a, err = testrig.NewAdaptation(e.sock, nil, e.policy.AdaptationOptions(nil, nil, nil)...)
	Expect(err).NotTo(HaveOccurred())
	e.policy.Attach(e.a)
	Expect(e.a.Start()).To(Succeed())
	DeferCleanup(e.a.Stop)
	return e
}

// startPlugin starts nri-faulty as idx-name without waiting for it.
func (e *env) startPlugin(name, idx string, args ...string) *testrig.Faulty {
	GinkgoHelper()
	f, err := testrig.StartFaulty(faultyBin, e.dir, e.sock, name, idx, args...)
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(f.Kill)
	return f
}

// plugin starts nri-faulty and waits until it is in the adaptation's relay
// list (see upstreamRig.faulty for why BlockPluginSync is enough).
func (e *env) plugin(name, idx string, args ...string) *testrig.Faulty {
	GinkgoHelper()
	f := e.startPlugin(name, idx, args...)
	_, err := f.WaitReady(readyTimeout)
	Expect(err).NotTo(HaveOccurred())
	e.a.BlockPluginSync().Unblock()
	return f
}

func (e *env) guard(args ...string) *testrig.Faulty {
	GinkgoHelper()
	return e.plugin(guardName, guardIdx, args...)
}

// result is the outcome of one gated request.
type result struct {
	err   error
	acted bool // guard's adjustment (CreateContainer) or log line (RunPodSandbox) is there
}

// escaped reports a request that succeeded without guard having acted.
func (r result) escaped() bool { return r.err == nil && !r.acted }

// request runs one gated request for ev on pod the way a runtime does.
// guardLog, if not nil, is the plugin whose log proves it acted on a RunPodSandbox.
func (e *env) request(ev nripolicy.Event, pod *api.PodSandbox, guardLog *testrig.Faulty) result {
	switch ev {
	case nripolicy.EventCreateContainer:
		rsp, err := e.create(pod)
		return result{err: err, acted: err == nil && testrig.Acted(rsp, guardName)}
	case nripolicy.EventRunPodSandbox:
		err := e.runPod(pod)
		return result{err: err, acted: err == nil && guardLog != nil && guardLog.ActedOn(string(ev), pod.GetUid())}
	}
	panic("unsupported event " + ev)
}

func (e *env) create(pod *api.PodSandbox) (*api.CreateContainerResponse, error) {
	ctr := testrig.Container(pod, "ctr")
	ctx, adm, err := e.policy.Admit(context.Background(), nripolicy.Request{
		Event: nripolicy.EventCreateContainer, Pod: pod, Container: ctr})
	if err != nil {
		return nil, err
	}
	rsp, err := e.a.CreateContainer(ctx, &api.CreateContainerRequest{Pod: pod, Container: ctr})
	if err = adm.Done(err); err != nil {
		return nil, err
	}
	return rsp, nil
}

func (e *env) runPod(pod *api.PodSandbox) error {
	ctx, adm, err := e.policy.Admit(context.Background(), nripolicy.Request{
		Event: nripolicy.EventRunPodSandbox, Pod: pod})
	if err != nil {
		return err
	}
	return adm.Done(e.a.RunPodSandbox(ctx, &api.RunPodSandboxRequest{Pod: pod}))
}

// pluginsReady returns the NRIPluginsReady condition status, and whether there is one.
func pluginsReady(p *nripolicy.Policy) (status, present bool) {
	for _, c := range p.Conditions() {
		if c.Type == nripolicy.ConditionNRIPluginsReady {
			return c.Status, true
		}
	}
	return false, false
}

func condition(p *nripolicy.Policy, typ string) (nripolicy.Condition, bool) {
	for _, c := range p.Conditions() {
		if c.Type == typ {
			return c, true
		}
	}
	return nripolicy.Condition{}, false
}

func guardState(p *nripolicy.Policy, key string) (nripolicy.PluginState, bool) {
	for _, s := range p.Snapshot() {
		if s.Key == key {
			return s, true
		}
	}
	return nripolicy.PluginState{}, false
}

// guardStateOf polls the state of the plugin with key.
func guardStateOf(p *nripolicy.Policy, key string) func() nripolicy.PluginStateKind {
	return func() nripolicy.PluginStateKind {
		s, _ := guardState(p, key)
		return s.State
	}
}

// waitNotReady waits until the policy reports NRIPluginsReady false.
func waitNotReady(p *nripolicy.Policy) {
	GinkgoHelper()
	Eventually(func() bool { s, _ := pluginsReady(p); return s }).
		WithTimeout(2 * time.Second).WithPolling(time.Millisecond).Should(BeFalse())
}

// expectRefused asserts a refusal by the policy for guard and event ev that wraps kind.
func expectRefused(r result, ev nripolicy.Event, kind error) {
	GinkgoHelper()
	Expect(r.err).To(HaveOccurred(), "request must be refused")
	Expect(errors.Is(r.err, nripolicy.ErrRefused)).To(BeTrue(), "refusal must wrap ErrRefused: %v", r.err)
	if kind != nil {
		Expect(errors.Is(r.err, kind)).To(BeTrue(), "refusal must wrap %v: %v", kind, r.err)
	}
	var re *nripolicy.RefusalError
	Expect(errors.As(r.err, &re)).To(BeTrue(), "refusal must be a *RefusalError: %T %v", r.err, r.err)
	Expect(re.Plugin).To(HaveSuffix(guardName))
	Expect(re.Event).To(Equal(ev))
	Expect(re.Reason).NotTo(BeEmpty())
	Expect(r.err.Error()).To(And(ContainSubstring(guardName), ContainSubstring(string(ev))))
}

func describeResult(r result) string {
	return fmt.Sprintf("err=%v acted=%v", r.err, r.acted)
}
