package nripolicy

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/containerd/nri/pkg/api"
)

// status is the state of one requirement in one view.
type status struct {
	state PluginStateKind
	// best is the instance that decided the state, for messages.
	best *connView
	// subscribed is what the synchronized instances subscribe to, together.
	subscribed api.EventMask
	// missing are the checked events no synchronized instance subscribes to.
	missing api.EventMask
	// others are registered plugins with the base name but another index.
	others []string
}

// check evaluates r in the view, for the gated event ev, or for every
// event r is required for when ev is api.Event_UNKNOWN (readiness).
//
// r is ready when a connected instance (a connection whose identity
// matches r) is synchronized and, together, the synchronized instances
// subscribe to every checked event. Instances still synchronizing do not
// count yet: upstream relays nothing to them. Without a synchronized
// instance the newest connected one decides (registered), then the
// newest closed one (disconnected).
func (v *view) check(r *requirement, ev api.Event) status {
	st := status{state: StateNotRegistered}
	var newestSynced, newestLive, newestClosed *connView
	for _, i := range v.byBase[r.base] {
		cv := &v.conns[i]
		if !r.matches(cv.base, cv.idx) {
			if !cv.closed {
				st.others = append(st.others, cv.idx+"-"+cv.base)
			}
			continue
		}
		switch {
		case cv.closed:
			newestClosed = newer(newestClosed, cv)
		case cv.synced:
			newestSynced = newer(newestSynced, cv)
			st.subscribed |= cv.events
		default:
			newestLive = newer(newestLive, cv)
		}
	}
	switch {
	case newestSynced != nil:
	case newestLive != nil:
		st.state, st.best = StateRegistered, newestLive
		return st
	case newestClosed != nil:
		st.state, st.best = StateDisconnected, newestClosed
		return st
	default:
		return st
	}
	mask := r.apiMask
	if ev != api.Event_UNKNOWN {
		mask = 0
		mask.Set(ev)
	}
	st.best = newestSynced
	if st.missing = mask &^ st.subscribed; st.missing != 0 {
		st.state = StateNotSubscribed
		return st
	}
	st.state = StateReady
	return st
}

func newer(cur, cv *connView) *connView {
	if cur == nil || cv.since.After(cur.since) {
		return cv
	}
	return cur
}

// actors calls fn with every synchronized, connected instance of r that
// subscribes to ev: each of them must answer the request.
func (v *view) actors(r *requirement, ev api.Event, fn func(c *conn)) {
	for _, i := range v.byBase[r.base] {
		cv := &v.conns[i]
		if !cv.closed && cv.synced && cv.events.IsSet(ev) && r.matches(cv.base, cv.idx) {
			fn(cv.c)
		}
	}
}

// reason describes a state that is not ready, for refusals and conditions.
func (st *status) reason(r *requirement) string {
	switch st.state {
	case StateNotRegistered:
		if len(st.others) > 0 {
			return fmt.Sprintf("is not registered (registered with another index: %s)", strings.Join(st.others, ", "))
		}
		return "is not registered"
	case StateRegistered:
		return fmt.Sprintf("is registered as %s but not synchronized", st.best.idx+"-"+st.best.base)
	case StateNotSubscribed:
		subscribed := strings.Join(eventNames(st.subscribed), ",")
		if subscribed == "" {
			subscribed = "none"
		}
		return fmt.Sprintf("is not subscribed to %s (required for: %s; subscribed: %s)",
			strings.Join(eventNames(st.missing), ","), strings.Join(eventNames(r.apiMask), ","), subscribed)
	case StateDisconnected:
		return fmt.Sprintf("is disconnected at %s (%s)", st.best.since.UTC().Format(time.RFC3339Nano), st.best.closeReason)
	}
	return "is ready"
}

// eventNames lists the upstream event names in a mask.
func eventNames(m api.EventMask) []string {
	var out []string
	for e := api.Event(1); e < api.Event_LAST; e++ {
		if m.IsSet(e) {
			out = append(out, e.PrettyName())
		}
	}
	return out
}

// PluginStateKind is the state of a plugin.
type PluginStateKind string

const (
	// StateNotRegistered is a configured plugin without a connection.
	StateNotRegistered PluginStateKind = "not registered"
	// StateRegistered is a plugin that registered but is not synchronized yet.
	StateRegistered PluginStateKind = "registered"
	// StateReady is a registered, synchronized plugin subscribed to every
	// event it is required for.
	StateReady PluginStateKind = "ready"
	// StateNotSubscribed is a synchronized plugin that does not subscribe
	// to every event it is required for: misconfigured.
	StateNotSubscribed PluginStateKind = "not subscribed"
	// StateDisconnected is a plugin whose last connection closed.
	StateDisconnected PluginStateKind = "disconnected"
)

// PluginState is one plugin instance in a Snapshot.
type PluginState struct {
	// Key is the configured key, or idx-name for an unconfigured plugin.
	Key string
	// Name and Index are the plugin's base name and index (Index is empty
	// while a base-name key has no connection).
	Name, Index string
	State       PluginStateKind
	// Configured says the policy names the plugin.
	Configured bool
	// KeyReady says whether the plugin as a whole (Key) is ready: with
	// several instances, every instance has an entry of its own, and the
	// key is ready while its synchronized instances together subscribe to
	// every event it is required for.
	KeyReady bool
	// Events are the events the plugin subscribed to.
	Events     []string
	FailPolicy FailPolicy
	Readiness  Readiness
	// Since is when the plugin entered State.
	Since time.Time
	// LastError is the last error upstream reported for the plugin, or why
	// its connection closed.
	LastError string
}

// Snapshot returns the configured plugins, with one entry per connected
// instance (or one entry while none is connected), and the connected
// unconfigured plugins, sorted by key and index.
func (p *Policy) Snapshot() []PluginState {
	return p.snapshot(p.cur.Load(), p.trk.view())
}

func (p *Policy) snapshot(c *compiled, v *view) []PluginState {
	out := make([]PluginState, 0, len(c.plugins))
	for _, r := range c.plugins {
		st := v.check(r, api.Event_UNKNOWN)
		base := PluginState{Key: r.key, Name: r.base, Index: r.idx, State: st.state, Configured: true,
			KeyReady: st.state == StateReady, FailPolicy: r.policy, Readiness: r.readiness, Since: p.trk.created}
		live := 0
		// Every connected instance has an entry of its own.
		for _, i := range v.byBase[r.base] {
			cv := &v.conns[i]
			if cv.closed || !r.matches(cv.base, cv.idx) {
				continue
			}
			live++
			out = append(out, instanceState(base, cv, r, st.state, v))
		}
		if live > 0 {
			continue
		}
		if b := st.best; b != nil {
			base = instanceState(base, b, r, st.state, v)
		}
		out = append(out, base)
	}
	for i := range v.conns {
		cv := &v.conns[i]
		if cv.closed || c.names(&ident{base: cv.base, idx: cv.idx}) {
			continue
		}
		state := StateReady
		if !cv.synced {
			state = StateRegistered
		}
		out = append(out, PluginState{Key: cv.idx + "-" + cv.base, Name: cv.base, Index: cv.idx, State: state,
			KeyReady: state == StateReady, Events: eventNames(cv.events), Since: cv.since, LastError: v.lastErr[cv.idx+"-"+cv.base]})
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].Key != out[j].Key {
			return out[i].Key < out[j].Key
		}
		return out[i].Index < out[j].Index
	})
	return out
}

// instanceState is the entry of one instance cv of requirement r, whose
// state as a whole is keyState.
func instanceState(ps PluginState, cv *connView, r *requirement, keyState PluginStateKind, v *view) PluginState {
	ps.Index, ps.Since, ps.Events = cv.idx, cv.since, eventNames(cv.events)
	ps.LastError = v.lastErr[cv.idx+"-"+cv.base]
	switch {
	case cv.closed:
		ps.State = StateDisconnected
		if ps.LastError == "" {
			ps.LastError = cv.closeReason
		}
	case !cv.synced:
		ps.State = StateRegistered
	case cv.events&r.apiMask == 0 || keyState == StateNotSubscribed:
		ps.State = StateNotSubscribed
	default:
		ps.State = StateReady
	}
	return ps
}

// Readiness condition types and reasons.
const (
	ConditionNRIPluginsReady = "NRIPluginsReady"
	ConditionNetworkReady    = "NetworkReady"
	ReasonNRIPluginsNotReady = "NRIPluginsNotReady"
	ReasonNRIPluginNotReady  = "NRIPluginNotReady"
)

// Condition is a runtime-agnostic CRI status condition.
type Condition struct {
	Type    string
	Status  bool
	Reason  string
	Message string
}

// Conditions returns the readiness conditions: none without configured
// plugins (or on a nil Policy, for NRI disabled); otherwise
// NRIPluginsReady and, only while a readiness="network" fail plugin is not
// ready, NetworkReady=false for the runtime to merge into its own network
// condition.
func (p *Policy) Conditions() []Condition {
	if p == nil {
		return nil
	}
	c, v := p.cur.Load(), p.trk.view()
	if len(c.plugins) == 0 {
		return nil
	}
	var missing, network []string
	for _, r := range c.plugins {
		if r.policy != FailPolicyFail || r.readiness == ReadinessNone {
			continue
		}
		st := v.check(r, api.Event_UNKNOWN)
		if st.state == StateReady {
			continue
		}
		m := fmt.Sprintf("%q %s", r.key, st.reason(r))
		missing = append(missing, m)
		if r.readiness == ReadinessNetwork {
			network = append(network, m)
		}
	}
	ready := Condition{Type: ConditionNRIPluginsReady, Status: true}
	if len(missing) > 0 {
		ready.Status = false
		ready.Reason = ReasonNRIPluginsNotReady
		ready.Message = "required NRI plugins not ready: " + strings.Join(missing, "; ")
	}
	out := []Condition{ready}
	if len(network) > 0 {
		out = append(out, Condition{Type: ConditionNetworkReady, Status: false, Reason: ReasonNRIPluginNotReady,
			Message: "network NRI plugins not ready: " + strings.Join(network, "; ")})
	}
	return out
}

// Changed returns a channel that is closed at the next change of any
// plugin's state or of the policy. Call it again for the next change.
func (p *Policy) Changed() <-chan struct{} {
	return p.trk.view().changed
}

// VerboseInfoKey is the key of the policy's entry in the verbose CRI
// Status info (crictl info), in every runtime.
const VerboseInfoKey = "nri"

// Info is the verbose CRI Status entry of the NRI integration and its
// policy. Runtimes publish it under VerboseInfoKey, so that operators and
// tools read the same document from CRI-O, containerd and nrigate.
type Info struct {
	// Enabled says whether the runtime's NRI support is enabled.
	Enabled bool `json:"enabled"`
	// Socket is the NRI socket plugins connect to.
	Socket string `json:"socket,omitempty"`
	// Policy is the policy in effect, with its defaults filled in.
	Policy *Config `json:"policy,omitempty"`
	// Plugins are the configured plugins and the connected unconfigured ones.
	Plugins []PluginInfo `json:"plugins"`
}

// PluginInfo is one plugin in Info.
type PluginInfo struct {
	Key        string    `json:"key"`
	Name       string    `json:"name"`
	Index      string    `json:"index,omitempty"`
	State      string    `json:"state"`
	Configured bool      `json:"configured"`
	Events     []string  `json:"events"`
	FailPolicy string    `json:"fail_policy,omitempty"`
	Readiness  string    `json:"readiness,omitempty"`
	Since      time.Time `json:"since"`
	LastError  string    `json:"last_error,omitempty"`
}

// Info returns the verbose Status entry; on a nil Policy (NRI disabled)
// it says so and lists no plugins.
func (p *Policy) Info(socket string) Info {
	info := Info{Plugins: []PluginInfo{}}
	if p == nil {
		return info
	}
	info.Enabled, info.Socket, info.Policy = true, socket, p.cur.Load().cfg.clone()
	for _, ps := range p.Snapshot() {
		info.Plugins = append(info.Plugins, PluginInfo{
			Key: ps.Key, Name: ps.Name, Index: ps.Index, State: string(ps.State), Configured: ps.Configured,
			Events: ps.Events, FailPolicy: string(ps.FailPolicy), Readiness: string(ps.Readiness),
			Since: ps.Since, LastError: ps.LastError,
		})
	}
	return info
}

// VerboseInfo returns Info as the JSON value of VerboseInfoKey, ready to
// merge into the verbose CRI Status info map. A nil Policy is NRI disabled.
func (p *Policy) VerboseInfo(socket string) (map[string]string, error) {
	b, err := json.Marshal(p.Info(socket))
	if err != nil {
		return nil, fmt.Errorf("nri: marshalling the verbose status: %w", err)
	}
	return map[string]string{VerboseInfoKey: string(b)}, nil
}
