package nripolicy

import (
	"errors"
	"fmt"
	"path"
	"sort"
	"strings"
	"time"

	"github.com/containerd/nri/pkg/api"
	"k8s.io/apimachinery/pkg/labels"
)

// FailPolicy says what happens to a gated request when a required plugin
// cannot act on it.
type FailPolicy string

const (
	// FailPolicyFail refuses the request.
	FailPolicyFail FailPolicy = "fail"
	// FailPolicyIgnore lets the request through, logs a warning and counts it.
	FailPolicyIgnore FailPolicy = "ignore"
	// FailPolicySkip is an alias of FailPolicyIgnore.
	FailPolicySkip FailPolicy = "skip"
)

// Event is an NRI event that the policy can gate.
type Event string

const (
	// EventRunPodSandbox gates pod sandbox creation.
	EventRunPodSandbox Event = "RunPodSandbox"
	// EventCreateContainer gates container creation.
	EventCreateContainer Event = "CreateContainer"
	// EventUpdateContainer gates container resource updates.
	EventUpdateContainer Event = "UpdateContainer"
)

// Readiness says how a plugin's readiness is reported through CRI Status.
type Readiness string

const (
	// ReadinessCondition reports the plugin in the NRIPluginsReady condition.
	ReadinessCondition Readiness = "condition"
	// ReadinessNetwork also holds NetworkReady false while the plugin is not ready.
	ReadinessNetwork Readiness = "network"
	// ReadinessNone keeps the plugin out of every condition.
	ReadinessNone Readiness = "none"
)

const (
	// DefaultFailPolicy is the fail policy of a plugin that sets none.
	DefaultFailPolicy = FailPolicyFail
	// DefaultReadiness is the readiness mode of a plugin that sets none.
	DefaultReadiness = ReadinessCondition
	// DefaultRegistrationWait is how long a request waits for a missing plugin by default.
	DefaultRegistrationWait = time.Duration(0)
	// DefaultExemptStaticPods is whether static pods are exempt by default.
	DefaultExemptStaticPods = true
	// StaticPodSourceAnnotation is the kubelet annotation that names a pod's config source.
	StaticPodSourceAnnotation = "kubernetes.io/config.source"
	// APIPodSource is the config source of pods that came through the API server.
	APIPodSource = "api"
)

// DefaultEvents returns the gated events of a plugin that sets none.
func DefaultEvents() []Event { return []Event{EventCreateContainer} }

// GatedEvents returns every event that can be gated, in a stable order.
func GatedEvents() []Event { return gatedEvents[:] }

var gatedEvents = [...]Event{EventRunPodSandbox, EventCreateContainer, EventUpdateContainer}

var (
	// ErrInvalidConfig is wrapped by every validation error.
	ErrInvalidConfig = errors.New("invalid NRI policy configuration")
	// ErrPolicyWithoutNRI is wrapped by the error of a policy that names
	// plugins while the runtime's NRI support is disabled: it would gate nothing.
	ErrPolicyWithoutNRI = errors.New("NRI policy names plugins but NRI is disabled")
)

// Duration is a time.Duration that reads and writes Go duration strings
// ("5s") in TOML, JSON and YAML.
type Duration time.Duration

// UnmarshalText parses a Go duration string.
func (d *Duration) UnmarshalText(text []byte) error {
	v, err := time.ParseDuration(string(text))
	if err != nil {
		return fmt.Errorf("%q is not a duration (use Go syntax such as \"500ms\", \"5s\", \"1m\")", string(text))
	}
	*d = Duration(v)
	return nil
}

// MarshalText formats the duration as a Go duration string.
func (d Duration) MarshalText() ([]byte, error) { return []byte(time.Duration(d).String()), nil }

// Std returns the duration as a time.Duration.
func (d Duration) Std() time.Duration { return time.Duration(d) }

// Config is the policy: global settings and one entry per required plugin.
// It is embedded by runtimes under their NRI table ([crio.nri.policy] in
// CRI-O, [plugins."io.containerd.nri.v1.nri".policy] in containerd).
type Config struct {
	// ExemptStaticPods exempts pods whose kubernetes.io/config.source
	// annotation is present and not "api".
	ExemptStaticPods bool `toml:"exempt_static_pods" json:"exempt_static_pods" yaml:"exempt_static_pods"`
	// TolerateMissingPluginsAnnotation names a pod annotation that, set to
	// "true", exempts the pod from every requirement. Empty disables it.
	TolerateMissingPluginsAnnotation string `toml:"tolerate_missing_plugins_annotation" json:"tolerate_missing_plugins_annotation" yaml:"tolerate_missing_plugins_annotation"`
	// Plugins maps a plugin key (base name "guard", or "10-guard") to its requirement.
	Plugins map[string]*PluginConfig `toml:"plugins" json:"plugins,omitempty" yaml:"plugins,omitempty"`
}

// PluginConfig is the requirement for one plugin.
type PluginConfig struct {
	// FailPolicy is "fail" or "ignore" (alias "skip").
	FailPolicy FailPolicy `toml:"fail_policy" json:"fail_policy" yaml:"fail_policy"`
	// Events lists the gated events; default ["CreateContainer"].
	Events []Event `toml:"events" json:"events" yaml:"events"`
	// RegistrationWait is how long a request waits for the plugin to become ready.
	RegistrationWait Duration `toml:"registration_wait" json:"registration_wait" yaml:"registration_wait"`
	// Readiness is "condition", "network" or "none".
	Readiness Readiness `toml:"readiness" json:"readiness" yaml:"readiness"`
	// Namespaces are glob patterns of pod namespaces in scope; empty means all.
	Namespaces []string `toml:"namespaces" json:"namespaces" yaml:"namespaces"`
	// ExcludeNamespaces are glob patterns of pod namespaces out of scope.
	ExcludeNamespaces []string `toml:"exclude_namespaces" json:"exclude_namespaces" yaml:"exclude_namespaces"`
	// PodSelector is a Kubernetes label selector on pod labels; empty means all.
	PodSelector string `toml:"pod_selector" json:"pod_selector" yaml:"pod_selector"`
	// ExcludePodSelector is a label selector of pods out of scope, such as the plugin's own pods.
	ExcludePodSelector string `toml:"exclude_pod_selector" json:"exclude_pod_selector" yaml:"exclude_pod_selector"`
	// RuntimeHandlers are the runtime handlers in scope; empty means all.
	RuntimeHandlers []string `toml:"runtime_handlers" json:"runtime_handlers" yaml:"runtime_handlers"`
}

// DefaultConfig returns the policy with its defaults and no plugins.
func DefaultConfig() *Config {
	return &Config{ExemptStaticPods: DefaultExemptStaticPods}
}

// DefaultPluginConfig returns a plugin requirement with every default.
func DefaultPluginConfig() *PluginConfig {
	return &PluginConfig{
		FailPolicy:       DefaultFailPolicy,
		Events:           DefaultEvents(),
		RegistrationWait: Duration(DefaultRegistrationWait),
		Readiness:        DefaultReadiness,
	}
}

// FieldError is a validation error that names the dotted key, the value
// and what is allowed. Runtimes prefix the key with their own table.
type FieldError struct {
	Key     string
	Value   string
	Allowed string
	// Err is a more specific sentinel the error matches, if any.
	Err error
}

// Error implements error.
func (e *FieldError) Error() string {
	return fmt.Sprintf("%s = %s: %s", e.Key, e.Value, e.Allowed)
}

// Unwrap makes every FieldError match ErrInvalidConfig, and Err if set.
func (e *FieldError) Unwrap() []error {
	if e.Err != nil {
		return []error{ErrInvalidConfig, e.Err}
	}
	return []error{ErrInvalidConfig}
}

// PluginKeyPrefix is the dotted prefix of a plugin's keys, relative to the policy table.
func PluginKeyPrefix(key string) string { return fmt.Sprintf("plugins.%q", key) }

// Names returns the configured plugin keys in sorted order.
func (c *Config) Names() []string {
	names := make([]string, 0, len(c.Plugins))
	for k := range c.Plugins {
		names = append(names, k)
	}
	sort.Strings(names)
	return names
}

// Validate checks the policy and returns the first error, naming the
// key relative to the policy table (e.g. plugins."guard".fail_policy).
func (c *Config) Validate() error {
	for _, key := range c.Names() {
		p := c.Plugins[key]
		prefix := PluginKeyPrefix(key)
		if p == nil {
			return &FieldError{Key: prefix, Value: "(empty)", Allowed: "a plugin table"}
		}
		if err := validatePluginKey(key); err != nil {
			return &FieldError{Key: prefix, Value: fmt.Sprintf("%q", key), Allowed: err.Error()}
		}
		if err := p.Validate(); err != nil {
			var fe *FieldError
			if errors.As(err, &fe) {
				return &FieldError{Key: prefix + "." + fe.Key, Value: fe.Value, Allowed: fe.Allowed, Err: fe.Err}
			}
			return fmt.Errorf("%s: %w", prefix, err)
		}
	}
	return nil
}

// CheckNRIEnabled returns an error wrapping ErrPolicyWithoutNRI (and
// ErrInvalidConfig) when the policy names plugins but the runtime's NRI
// support is disabled. Runtimes call it from their config validation,
// with the name of their own enable key (enable_nri in CRI-O, disable in
// containerd's NRI plugin table) in enableKey.
func (c *Config) CheckNRIEnabled(enabled bool, enableKey string) error {
	if enabled || len(c.Plugins) == 0 {
		return nil
	}
	names := c.Names()
	for i, n := range names {
		names[i] = fmt.Sprintf("%q", n)
	}
	return &FieldError{Key: "plugins", Value: "[" + strings.Join(names, ", ") + "]",
		Allowed: fmt.Sprintf("NRI is disabled (%s), so the policy would gate nothing: enable NRI or remove the plugin tables", enableKey),
		Err:     ErrPolicyWithoutNRI}
}

// validatePluginKey accepts a plugin base name or INDEX-NAME.
func validatePluginKey(key string) error {
	if idx, base, err := api.ParsePluginName(key); err == nil && idx != "" {
		if err := api.CheckPluginName(base); err != nil {
			return fmt.Errorf("a plugin base name or INDEX-NAME (%v)", err)
		}
		return nil
	}
	if err := api.CheckPluginName(key); err != nil {
		return fmt.Errorf("a plugin base name or INDEX-NAME (%v)", err)
	}
	return nil
}

// Validate checks one plugin requirement; keys in errors are relative to
// the plugin's table.
func (p *PluginConfig) Validate() error {
	switch p.FailPolicy {
	case FailPolicyFail, FailPolicyIgnore, FailPolicySkip:
	default:
		return &FieldError{Key: "fail_policy", Value: fmt.Sprintf("%q", p.FailPolicy), Allowed: `allowed values are "fail", "ignore" (alias "skip")`}
	}
	if len(p.Events) == 0 {
		return &FieldError{Key: "events", Value: "[]", Allowed: `list at least one of "RunPodSandbox", "CreateContainer", "UpdateContainer" (or leave the key out for ["CreateContainer"])`}
	}
	for _, e := range p.Events {
		if !e.gated() {
			return &FieldError{Key: "events", Value: fmt.Sprintf("%q", e), Allowed: `allowed values are "RunPodSandbox", "CreateContainer", "UpdateContainer"; teardown events are never gated`}
		}
	}
	if p.RegistrationWait < 0 {
		return &FieldError{Key: "registration_wait", Value: fmt.Sprintf("%q", p.RegistrationWait.Std()), Allowed: "must not be negative"}
	}
	switch p.Readiness {
	case ReadinessCondition, ReadinessNetwork, ReadinessNone:
	default:
		return &FieldError{Key: "readiness", Value: fmt.Sprintf("%q", p.Readiness), Allowed: `allowed values are "condition", "network", "none"`}
	}
	for i, list := range [][]string{p.Namespaces, p.ExcludeNamespaces} {
		key := [...]string{"namespaces", "exclude_namespaces"}[i]
		for _, pat := range list {
			if _, err := path.Match(pat, ""); err != nil {
				return &FieldError{Key: key, Value: fmt.Sprintf("%q", pat), Allowed: "must be a glob pattern (path.Match syntax: *, ?, [a-z])"}
			}
		}
	}
	for i, sel := range []string{p.PodSelector, p.ExcludePodSelector} {
		key := [...]string{"pod_selector", "exclude_pod_selector"}[i]
		if _, err := labels.Parse(sel); err != nil {
			return &FieldError{Key: key, Value: fmt.Sprintf("%q", sel), Allowed: "must be a Kubernetes label selector (" + strings.TrimSpace(err.Error()) + ")"}
		}
	}
	return nil
}

// Policy reports the effective fail policy, folding the "skip" alias.
func (p *PluginConfig) Policy() FailPolicy {
	if p.FailPolicy == FailPolicySkip {
		return FailPolicyIgnore
	}
	return p.FailPolicy
}

// Gates reports whether the plugin is required for event e.
func (p *PluginConfig) Gates(e Event) bool {
	for _, g := range p.Events {
		if g == e {
			return true
		}
	}
	return false
}

func (e Event) gated() bool {
	for _, g := range gatedEvents {
		if g == e {
			return true
		}
	}
	return false
}

// SetDefaults fills every unset field of the requirement with its default.
// Loaders call it after decoding, so a table that names only fail_policy
// gets the default events, wait and readiness.
func (p *PluginConfig) SetDefaults() {
	if p.FailPolicy == "" {
		p.FailPolicy = DefaultFailPolicy
	}
	if p.Events == nil {
		p.Events = DefaultEvents()
	}
	if p.Readiness == "" {
		p.Readiness = DefaultReadiness
	}
}

// SetDefaults fills the defaults of every plugin requirement.
func (c *Config) SetDefaults() {
	for _, p := range c.Plugins {
		if p != nil {
			p.SetDefaults()
		}
	}
}
