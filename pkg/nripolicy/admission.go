package nripolicy

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/containerd/nri/pkg/api"
	"github.com/containerd/ttrpc"
	"google.golang.org/grpc/codes"
)

// Request is one gated request.
type Request struct {
	Event Event
	// Pod is the pod of the request.
	Pod *api.PodSandbox
	// Container is nil for RunPodSandbox; its name is used in messages.
	Container *api.Container
}

type admissionKey struct{}

// answerKind classifies a plugin's answer to the gated call.
type answerKind uint8

const (
	answerOK answerKind = iota
	answerTransport
	answerPluginError
)

type answer struct {
	c    *conn
	kind answerKind
	err  error
}

// Admission is one admitted request. The runtime calls Done after the
// relay. It keeps the compiled policy it started with.
type Admission struct {
	p      *Policy
	pol    *compiled
	event  Event
	ns     string
	pod    string
	ctr    string
	waited time.Duration
	// acts are the instances that must answer the event during the relay:
	// per requirement (contiguous, in requirement order), every
	// synchronized connection of the plugin that subscribes to the event.
	acts    []act
	actsBuf [4]act

	mu      sync.Mutex
	answers []answer
	ansBuf  [4]answer
}

// record is called by a connection's interceptor with its answer.
func (a *Admission) record(c *conn, err error, resp *ttrpc.Response) {
	an := answer{c: c, err: err}
	switch {
	case err != nil:
		an.kind = answerTransport
	case resp.Status != nil && resp.Status.Code != int32(codes.OK):
		an.kind = answerPluginError
	}
	a.mu.Lock()
	if a.answers == nil {
		a.answers = a.ansBuf[:0]
	}
	a.answers = append(a.answers, an)
	a.mu.Unlock()
}

// trivial is the admission of a request no plugin is required for.
var trivial = &Admission{}

// act is one instance that must answer a request for requirement r.
type act struct {
	r *requirement
	c *conn
}

type missingPlugin struct {
	r  *requirement
	st status
}

// Admit checks a gated request before the relay. It waits, up to each
// missing plugin's registration_wait, for the plugins required for the
// request to become ready, without holding any lock. An error means the
// request is refused and must not be relayed. Otherwise the runtime
// relays with the returned ctx and calls Done with the relay's error.
//
// The runtime must call Admit before it takes any runtime lock and before
// its own adaptation.BlockPluginSync: after a plugin's synchronization
// Admit takes and releases BlockPluginSync once, to be sure upstream has
// added the plugin to its relay list.
func (p *Policy) Admit(ctx context.Context, req Request) (context.Context, *Admission, error) {
	pol := p.cur.Load()
	reqs := pol.required(req.Event, req.Pod, p.defaultHandler)
	if len(reqs) == 0 {
		return ctx, trivial, nil
	}
	if p.adaptation.Load() == nil {
		return nil, nil, fmt.Errorf("%w: refusing %s of %s/%s", ErrNotAttached, req.Event, req.Pod.GetNamespace(), req.Pod.GetName())
	}
	ev := req.Event.apiEvent()
	a := &Admission{p: p, pol: pol, event: req.Event, ns: req.Pod.GetNamespace(), pod: req.Pod.GetName(), ctr: req.Container.GetName()}
	a.acts = a.actsBuf[:0]

	var (
		start    time.Time
		missing  []missingPlugin
		dropped  []*requirement // ignore-plugins whose wait expired
		waitedOn []*requirement
		unlisted []*conn
		timer    *time.Timer
	)
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	v := p.trk.view()
	for {
		a.acts, missing, unlisted = a.acts[:0], missing[:0], unlisted[:0]
		for _, r := range reqs {
			if contains(dropped, r) {
				continue
			}
			st := v.check(r, ev)
			if st.state != StateReady {
				missing = append(missing, missingPlugin{r, st})
				continue
			}
			v.actors(r, ev, func(c *conn) {
				a.acts = append(a.acts, act{r, c})
				if !c.listed.Load() {
					unlisted = append(unlisted, c)
				}
			})
		}
		if len(missing) == 0 {
			break
		}
		now := time.Now()
		if start.IsZero() {
			start = now
			if p.onWait != nil {
				p.onWait(req.Event)
			}
		}
		elapsed := now.Sub(start)
		next := time.Duration(-1)
		for _, m := range missing {
			if !contains(waitedOn, m.r) {
				waitedOn = append(waitedOn, m.r)
			}
			if elapsed < m.r.wait {
				if left := m.r.wait - elapsed; next < 0 || left < next {
					next = left
				}
				continue
			}
			if m.r.policy == FailPolicyFail {
				return nil, nil, p.refuse(a, m.r, m.st.reason(m.r), ErrPluginNotReady, nil, elapsed)
			}
			p.ignore(a, m.r, m.st.reason(m.r), elapsed)
			dropped = append(dropped, m.r)
		}
		if next < 0 {
			continue // only expired ignore-plugins were missing: evaluate the rest again
		}
		if timer == nil {
			timer = time.NewTimer(next)
		} else {
			timer.Reset(next)
		}
		select {
		case <-v.changed:
		case <-timer.C:
		case <-ctx.Done():
			for _, m := range missing {
				if m.r.policy == FailPolicyFail {
					return nil, nil, p.refuse(a, m.r, m.st.reason(m.r)+" when the caller gave up waiting", ErrPluginNotReady, ctx.Err(), time.Since(start))
				}
			}
			return nil, nil, fmt.Errorf("nri: gave up waiting for NRI plugins: %w", ctx.Err())
		}
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
		v = p.trk.view()
	}
	if len(unlisted) > 0 {
		if ad := p.adaptation.Load(); ad != nil {
			// Upstream adds a plugin to its relay list after the runtime's
			// sync callback returns, still holding the sync write lock.
			ad.BlockPluginSync().Unblock()
		}
		for _, c := range unlisted {
			c.listed.Store(true)
		}
	}
	if !start.IsZero() {
		a.waited = time.Since(start)
		for _, r := range waitedOn {
			if !contains(dropped, r) {
				p.decided.Decided(Decision{Plugin: r.key, Event: a.event, Namespace: a.ns, Pod: a.pod, Container: a.ctr,
					Outcome: OutcomeAllowed, Reason: "became ready", Waited: a.waited})
			}
		}
	}
	if len(a.acts) == 0 {
		return ctx, a, nil
	}
	if len(a.acts) > len(a.ansBuf) {
		a.answers = make([]answer, 0, len(a.acts))
	}
	return context.WithValue(ctx, admissionKey{}, a), a, nil
}

func contains(list []*requirement, r *requirement) bool {
	for _, x := range list {
		if x == r {
			return true
		}
	}
	return false
}

func (p *Policy) refuse(a *Admission, r *requirement, reason string, kind, cause error, waited time.Duration) error {
	err := &RefusalError{Plugin: r.key, Event: a.event, Namespace: a.ns, Pod: a.pod, Container: a.ctr,
		Reason: reason, Waited: waited, Err: kind, RegistrationWait: r.wait, Cause: cause}
	p.log.Warnf("%v", err)
	p.decided.Decided(Decision{Plugin: r.key, Event: a.event, Namespace: a.ns, Pod: a.pod, Container: a.ctr,
		Outcome: OutcomeRefused, Reason: reason, Waited: waited})
	return err
}

func (p *Policy) ignore(a *Admission, r *requirement, reason string, waited time.Duration) {
	p.log.Warnf("nri: plugin %q is required for %s of %s (fail_policy=ignore) but %s; waited %s; proceeding without it",
		r.key, a.event, a.subject(), reason, waited.Round(time.Millisecond))
	p.decided.Decided(Decision{Plugin: r.key, Event: a.event, Namespace: a.ns, Pod: a.pod, Container: a.ctr,
		Outcome: OutcomeIgnored, Reason: reason, Waited: waited})
}

func (a *Admission) subject() string {
	if a.ctr != "" {
		return fmt.Sprintf("container %q in pod %s/%s", a.ctr, a.ns, a.pod)
	}
	return fmt.Sprintf("pod %s/%s", a.ns, a.pod)
}

// Done checks the request after the relay. It returns relayErr if it is
// not nil (a plugin's own error always fails the request). Otherwise it
// refuses the request if an instance of a required fail-plugin that
// subscribes to the event did not answer it successfully: it was skipped
// (closed), timed out or lost its connection. With several instances of
// one plugin, every one of them must have answered. Misses of
// ignore-plugins are logged and counted but never refuse. Done is safe on
// a nil *Admission.
func (a *Admission) Done(relayErr error) error {
	if a == nil || relayErr != nil || len(a.acts) == 0 {
		return relayErr
	}
	a.mu.Lock()
	answers := a.answers
	a.mu.Unlock()
	var refusal error
	for i := 0; i < len(a.acts); {
		r := a.acts[i].r
		var failed *act
		var failedAnswer *answer
		for ; i < len(a.acts) && a.acts[i].r == r; i++ {
			if failed != nil {
				continue
			}
			if ok, an := a.answered(a.acts[i].c, answers); !ok {
				failed, failedAnswer = &a.acts[i], an
			}
		}
		if failed == nil {
			continue
		}
		reason, cause := notActedReason(failedAnswer, a.event)
		if inst := failed.c.name.Load(); inst != nil && (r.idx == "" || a.instances(r) > 1) {
			reason = fmt.Sprintf("%s (instance %s)", reason, inst)
		}
		if r.policy == FailPolicyFail {
			if refusal == nil {
				refusal = a.p.refuse(a, r, reason, ErrPluginNotActed, cause, a.waited)
			} else {
				a.p.decided.Decided(Decision{Plugin: r.key, Event: a.event, Namespace: a.ns, Pod: a.pod, Container: a.ctr,
					Outcome: OutcomeRefused, Reason: reason, Waited: a.waited})
			}
			continue
		}
		a.p.ignore(a, r, reason, a.waited)
	}
	return refusal
}

// answered reports whether instance c answered successfully. Otherwise it
// returns c's failed answer, nil if c was not called at all. A plugin that
// restarted between Admit and the relay answers on a new connection with
// the same identity: that answer counts for c if the new connection was
// not one of the instances Admit saw, which must answer for themselves.
func (a *Admission) answered(c *conn, answers []answer) (bool, *answer) {
	var own *answer
	for i := range answers {
		if an := &answers[i]; an.c == c {
			if an.kind == answerOK {
				return true, nil
			}
			own = an
		}
	}
	if own != nil {
		return false, own
	}
	id := c.name.Load()
	for i := range answers {
		an := &answers[i]
		if an.kind != answerOK || a.admitted(an.c) {
			continue
		}
		if aid := an.c.name.Load(); aid != nil && id != nil && *aid == *id {
			return true, nil
		}
	}
	return false, nil
}

// admitted reports whether c is one of the instances Admit saw.
func (a *Admission) admitted(c *conn) bool {
	for _, x := range a.acts {
		if x.c == c {
			return true
		}
	}
	return false
}

// instances is how many instances of r had to answer.
func (a *Admission) instances(r *requirement) int {
	n := 0
	for _, x := range a.acts {
		if x.r == r {
			n++
		}
	}
	return n
}

func notActedReason(an *answer, ev Event) (string, error) {
	switch {
	case an == nil:
		return fmt.Sprintf("was not called for %s (skipped: its connection closed before the request reached it)", ev), nil
	case an.kind == answerPluginError:
		return fmt.Sprintf("answered %s with an error the relay did not report", ev), nil
	case errors.Is(an.err, context.DeadlineExceeded):
		return fmt.Sprintf("did not answer %s within the plugin request timeout", ev), an.err
	case errors.Is(an.err, ttrpc.ErrClosed), errors.Is(an.err, ttrpc.ErrServerClosed):
		return fmt.Sprintf("lost its connection while handling %s", ev), an.err
	case errors.Is(an.err, ttrpc.ErrProtocol):
		return fmt.Sprintf("failed %s with a protocol error: %v", ev, an.err), an.err
	}
	return fmt.Sprintf("failed %s: %v", ev, an.err), an.err
}
