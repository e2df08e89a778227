package nripolicy

import (
	"fmt"
	"sync/atomic"
	"time"

	"github.com/containerd/nri/pkg/adaptation"
)

// Logger is the logger the policy writes to. logrus.FieldLogger satisfies it.
type Logger interface {
	Debugf(format string, args ...any)
	Infof(format string, args ...any)
	Warnf(format string, args ...any)
	Errorf(format string, args ...any)
}

// Outcome is the outcome of a decision.
type Outcome string

const (
	// OutcomeAllowed is a request allowed after waiting for a plugin.
	OutcomeAllowed Outcome = "allowed"
	// OutcomeRefused is a refused request.
	OutcomeRefused Outcome = "refused"
	// OutcomeIgnored is a request let through although a fail_policy=ignore
	// plugin could not act on it.
	OutcomeIgnored Outcome = "ignored"
)

// Decision is one non-trivial decision about one plugin for one request.
type Decision struct {
	Plugin    string
	Event     Event
	Namespace string
	Pod       string
	Container string
	Outcome   Outcome
	Reason    string
	Waited    time.Duration
}

// DecisionHook is told about every non-trivial decision: refused, ignored
// and allowed after a wait. It is called synchronously on the request path
// and must not block.
type DecisionHook interface {
	Decided(d Decision)
}

// ReadinessHook is told about changes of the plugins' states, with a
// fresh snapshot. It is called on a goroutine of the policy's own, never
// from upstream's locked paths; calls are serialized and coalesced, and the
// last call carries the latest state.
type ReadinessHook interface {
	ReadinessChanged(states []PluginState)
}

// Option configures a Policy.
type Option func(*Policy) error

// WithLogger sets the logger; the default discards everything.
func WithLogger(l Logger) Option {
	return func(p *Policy) error {
		if l == nil {
			return fmt.Errorf("nripolicy: nil logger")
		}
		p.log = l
		return nil
	}
}

// WithDecisionHook sets the decision hook; the default is a no-op.
func WithDecisionHook(h DecisionHook) Option {
	return func(p *Policy) error {
		if h == nil {
			return fmt.Errorf("nripolicy: nil decision hook")
		}
		p.decided = h
		return nil
	}
}

// WithReadinessHook sets the readiness hook; the default is a no-op.
func WithReadinessHook(h ReadinessHook) Option {
	return func(p *Policy) error {
		if h == nil {
			return fmt.Errorf("nripolicy: nil readiness hook")
		}
		p.readiness = h
		return nil
	}
}

// WithDefaultRuntimeHandler names the runtime's default handler (CRI-O's
// default_runtime, containerd's default_runtime_name). A pod without a
// runtime handler (the kubelet sends none for pods without a RuntimeClass)
// runs with it, so runtime_handlers scopes match it under that name.
func WithDefaultRuntimeHandler(name string) Option {
	return func(p *Policy) error {
		p.defaultHandler = name
		return nil
	}
}

type nopLogger struct{}

func (nopLogger) Debugf(string, ...any) {}
func (nopLogger) Infof(string, ...any)  {}
func (nopLogger) Warnf(string, ...any)  {}
func (nopLogger) Errorf(string, ...any) {}

type nopDecisionHook struct{}

func (nopDecisionHook) Decided(Decision) {}

type nopReadinessHook struct{}

func (nopReadinessHook) ReadinessChanged([]PluginState) {}

// Policy is the NRI plugin policy of one runtime, attached to one
// adaptation. It is safe for concurrent use.
type Policy struct {
	log       Logger
	decided   DecisionHook
	readiness ReadinessHook

	cur atomic.Pointer[compiled]
	trk *tracker
	// defaultHandler is the handler of pods that name none.
	defaultHandler string
	// onWait, if set (by tests), is called when an Admit starts waiting.
	onWait func(Event)

	// adaptation is set by Attach; Admit uses its BlockPluginSync as a
	// barrier after a plugin's synchronization (see Admit).
	adaptation atomic.Pointer[adaptation.Adaptation]

	// hookRunning and hookPending run one ReadinessHook deliverer at a
	// time; hookGen (owned by the deliverer) is the last delivered view.
	hookRunning atomic.Bool
	hookPending atomic.Bool
	hookGen     uint64
}

// New returns a policy for cfg (nil means DefaultConfig()). cfg is
// validated and compiled; later changes to cfg have no effect (use Reload).
func New(cfg *Config, opts ...Option) (*Policy, error) {
	if cfg == nil {
		cfg = DefaultConfig()
	}
	c, err := compile(cfg)
	if err != nil {
		return nil, err
	}
	p := &Policy{log: nopLogger{}, decided: nopDecisionHook{}, readiness: nopReadinessHook{}}
	for _, o := range opts {
		if err := o(p); err != nil {
			return nil, err
		}
	}
	p.cur.Store(c)
	p.trk = newTracker(p)
	return p, nil
}

// Attach tells the policy which adaptation it is wired into. Call it after
// adaptation.New and before Start. Admit needs it to wait for upstream to
// add a just-synchronized plugin to its relay list; without it Admit
// refuses every request that a plugin is required for (ErrNotAttached).
func (p *Policy) Attach(a *adaptation.Adaptation) {
	p.adaptation.Store(a)
}

// Reload validates cfg and swaps it in atomically. Admissions already in
// flight finish with the policy they started with. A bad cfg keeps the
// old policy.
func (p *Policy) Reload(cfg *Config) error {
	if cfg == nil {
		cfg = DefaultConfig()
	}
	c, err := compile(cfg)
	if err != nil {
		return err
	}
	p.cur.Store(c)
	p.log.Infof("nri policy reloaded: %d required plugin(s)", len(c.plugins))
	p.trk.reloaded()
	return nil
}

// Config returns a copy of the configuration in effect.
func (p *Policy) Config() *Config {
	return p.cur.Load().cfg.clone()
}

func (c *Config) clone() *Config {
	n := &Config{ExemptStaticPods: c.ExemptStaticPods, TolerateMissingPluginsAnnotation: c.TolerateMissingPluginsAnnotation}
	if c.Plugins != nil {
		n.Plugins = make(map[string]*PluginConfig, len(c.Plugins))
		for k, v := range c.Plugins {
			if v == nil {
				// Kept nil so that Validate reports the empty table instead of a panic here.
				n.Plugins[k] = nil
				continue
			}
			pc := *v
			pc.Events = append([]Event(nil), v.Events...)
			pc.Namespaces = append([]string(nil), v.Namespaces...)
			pc.ExcludeNamespaces = append([]string(nil), v.ExcludeNamespaces...)
			pc.RuntimeHandlers = append([]string(nil), v.RuntimeHandlers...)
			n.Plugins[k] = &pc
		}
	}
	return n
}

// notifyReadiness schedules a ReadinessHook call with the latest
// snapshot. Changes happen inside upstream's accept loop (under its sync
// lock) and inside relays (under its relay lock), so the hook runs on a
// goroutine of its own: a hook that calls back into the runtime or the
// adaptation cannot deadlock them. Calls are serialized and coalesced; the
// last call always carries the latest state.
func (p *Policy) notifyReadiness() {
	if _, nop := p.readiness.(nopReadinessHook); nop {
		return
	}
	p.hookPending.Store(true)
	if p.hookRunning.CompareAndSwap(false, true) {
		go p.deliverReadiness()
	}
}

func (p *Policy) deliverReadiness() {
	for {
		for p.hookPending.Swap(false) {
			v := p.trk.view()
			if v.gen == p.hookGen {
				continue
			}
			p.hookGen = v.gen
			p.readiness.ReadinessChanged(p.snapshot(p.cur.Load(), v))
		}
		p.hookRunning.Store(false)
		// A change may have come in after the last Swap and before the
		// Store: take over again unless another deliverer already did.
		if !p.hookPending.Load() || !p.hookRunning.CompareAndSwap(false, true) {
			return
		}
	}
}
