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
	// acts are the requirements whose plugin subscribes to the event and
	// so must answer it during the relay.
	acts    []*requirement
	actsBuf [4]*requirement
	// actConn is, per act, the ready connection seen at Admit: an answer
	// from it is matched by pointer, others by name.
	actConn    []*conn
	actConnBuf [4]*conn

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
	a.acts, a.actConn = a.actsBuf[:0], a.actConnBuf[:0]
	if len(reqs) > len(a.actsBuf) {
		a.acts, a.actConn = make([]*requirement, 0, len(reqs)), make([]*conn, 0, len(reqs))
	}

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
		a.acts, a.actConn, missing, unlisted = a.acts[:0], a.actConn[:0], missing[:0], unlisted[:0]
		for _, r := range reqs {
			if contains(dropped, r) {
				continue
			}
			st := v.check(r, ev, true)
			if st.state != StateReady {
				missing = append(missing, missingPlugin{r, st})
				continue
			}
			if st.subscribed {
				a.acts = append(a.acts, r)
				a.actConn = append(a.actConn, st.best.c)
			}
			unlisted = append(unlisted, st.unlisted...)
		}
		if len(missing) == 0 {
			break
		}
		now := time.Now()
		if start.IsZero() {
			start = now
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
// refuses the request if a required fail-plugin that subscribes to the
// event did not answer it successfully: it was skipped (closed), timed out
// or lost its connection. Misses of ignore-plugins are logged and counted
// but never refuse. Done is safe on a nil *Admission.
func (a *Admission) Done(relayErr error) error {
	if a == nil || relayErr != nil || len(a.acts) == 0 {
		return relayErr
	}
	a.mu.Lock()
	answers := a.answers
	a.mu.Unlock()
	var refusal error
	for k, r := range a.acts {
		var failed *answer
		ok := false
		for i := range answers {
			an := &answers[i]
			if an.c == a.actConn[k] && an.kind == answerOK {
				ok = true
				break
			}
		}
		for i := 0; !ok && i < len(answers); i++ {
			an := &answers[i]
			id := an.c.name.Load()
			if id == nil || !r.matches(id.base, id.idx) {
				continue
			}
			if an.kind == answerOK {
				ok = true
				break
			}
			failed = an
		}
		if ok {
			continue
		}
		reason, cause := notActedReason(failed, a.event)
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
