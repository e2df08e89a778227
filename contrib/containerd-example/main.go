// Command containerd-example shows how containerd would adopt
// pkg/nripolicy. It builds the upstream adaptation options the way
// containerd's NRI integration builds them from its NRI config (socket
// path, plugin path, plugin config path, timeouts, external connections,
// default validator), decodes the policy from the containerd-style table
// [plugins."io.containerd.nri.v1.nri".policy], and wires the policy in
// through its public options only. It is compiled by `make build` and its
// config decoding is unit-tested, so the example cannot rot.
//
//	containerd-example --config /etc/containerd/config.toml
//
// It serves NRI plugins until interrupted; it does not run containers.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/BurntSushi/toml"
	"github.com/containerd/nri/pkg/adaptation"
	validator "github.com/containerd/nri/plugins/default-validator/builtin"

	"github.com/nrigate/nrigate/pkg/nripolicy"
)

// NRIConfig mirrors the fields of containerd's NRI plugin config
// (plugins."io.containerd.nri.v1.nri") that its integration turns into
// adaptation options, plus the policy table this module adds.
type NRIConfig struct {
	// Disable turns NRI off.
	Disable bool `toml:"disable"`
	// SocketPath is the NRI socket external plugins connect to.
	SocketPath string `toml:"socket_path"`
	// PluginPath is the directory of pre-installed plugins.
	PluginPath string `toml:"plugin_path"`
	// PluginConfigPath is the directory of pre-installed plugins' configs.
	PluginConfigPath string `toml:"plugin_config_path"`
	// PluginRegistrationTimeout bounds a plugin's registration.
	PluginRegistrationTimeout nripolicy.Duration `toml:"plugin_registration_timeout"`
	// PluginRequestTimeout bounds each plugin request.
	PluginRequestTimeout nripolicy.Duration `toml:"plugin_request_timeout"`
	// DisableConnections disables connections from external plugins.
	DisableConnections bool `toml:"disable_connections"`
	// DefaultValidator configures upstream's builtin default validator.
	DefaultValidator *validator.DefaultValidatorConfig `toml:"default_validator"`
	// Policy is the nripolicy table.
	Policy *nripolicy.Config `toml:"policy"`
}

// Default values, as containerd ships them.
const (
	DefaultSocketPath                = "/var/run/nri/nri.sock"
	DefaultPluginPath                = "/opt/nri/plugins"
	DefaultPluginConfigPath          = "/etc/nri/conf.d"
	DefaultPluginRegistrationTimeout = 5 * time.Second
	DefaultPluginRequestTimeout      = 2 * time.Second
)

// containerdConfig is the part of containerd's config.toml this example reads.
type containerdConfig struct {
	Plugins struct {
		NRI *NRIConfig `toml:"io.containerd.nri.v1.nri"`
	} `toml:"plugins"`
}

// DecodeConfig reads containerd's config.toml text and returns its NRI
// config with defaults filled in and the policy validated. A config
// without an NRI table gets the defaults and no policy (nothing required).
func DecodeConfig(data string) (*NRIConfig, error) {
	var cc containerdConfig
	md, err := toml.Decode(data, &cc)
	if err != nil {
		return nil, fmt.Errorf("parse containerd config: %w", err)
	}
	if undec := md.Undecoded(); len(undec) > 0 {
		// containerd ignores tables of other plugins; only keys inside
		// the policy table are typos worth reporting.
		for _, k := range undec {
			if len(k) > 3 && k[0] == "plugins" && k[1] == "io.containerd.nri.v1.nri" && k[2] == "policy" {
				return nil, fmt.Errorf("plugins.%q.%s: unknown key", k[1], k[2:].String())
			}
		}
	}
	cfg := cc.Plugins.NRI
	if cfg == nil {
		cfg = &NRIConfig{}
	}
	if cfg.SocketPath == "" {
		cfg.SocketPath = DefaultSocketPath
	}
	if cfg.PluginPath == "" {
		cfg.PluginPath = DefaultPluginPath
	}
	if cfg.PluginConfigPath == "" {
		cfg.PluginConfigPath = DefaultPluginConfigPath
	}
	if cfg.PluginRegistrationTimeout == 0 {
		cfg.PluginRegistrationTimeout = nripolicy.Duration(DefaultPluginRegistrationTimeout)
	}
	if cfg.PluginRequestTimeout == 0 {
		cfg.PluginRequestTimeout = nripolicy.Duration(DefaultPluginRequestTimeout)
	}
	if cfg.Policy == nil {
		cfg.Policy = nripolicy.DefaultConfig()
	}
	// Defaults first, so that a table naming only fail_policy validates
	// with the default events and readiness.
	cfg.Policy.SetDefaults()
	if err := cfg.Policy.Validate(); err != nil {
		// Validation names keys relative to the policy table; prefix them
		// with containerd's table so the operator finds the line.
		return nil, fmt.Errorf("plugins.\"io.containerd.nri.v1.nri\".policy.%w", err)
	}
	return cfg, nil
}

// AdaptationOptions builds the adaptation options in the order
// containerd's integration does, with the policy's metrics and ttrpc
// options in place of the runtime's own (the policy wraps them, so the
// runtime must not pass WithMetrics or WithTTRPCOptions separately).
func (c *NRIConfig) AdaptationOptions(pol *nripolicy.Policy, runtimeMetrics adaptation.Metrics) []adaptation.Option {
	opts := []adaptation.Option{
		adaptation.WithPluginPath(c.PluginPath),
		adaptation.WithPluginConfigPath(c.PluginConfigPath),
		adaptation.WithSocketPath(c.SocketPath),
	}
	if c.DisableConnections {
		opts = append(opts, adaptation.WithDisabledExternalConnections())
	}
	if c.DefaultValidator != nil {
		opts = append(opts, adaptation.WithDefaultValidator(c.DefaultValidator))
	}
	return append(opts, pol.AdaptationOptions(runtimeMetrics, nil, nil)...)
}

// stdLogger adapts the standard logger to nripolicy.Logger; containerd
// would pass its logrus entry (log.G(ctx)), which satisfies it directly.
type stdLogger struct{}

func (stdLogger) Debugf(f string, a ...any) {}
func (stdLogger) Infof(f string, a ...any)  { log.Printf("info: "+f, a...) }
func (stdLogger) Warnf(f string, a ...any)  { log.Printf("warning: "+f, a...) }
func (stdLogger) Errorf(f string, a ...any) { log.Printf("error: "+f, a...) }

// Start builds the policy and the adaptation and starts serving plugins.
func Start(cfg *NRIConfig, syncFn adaptation.SyncFn, updateFn adaptation.UpdateFn) (*nripolicy.Policy, *adaptation.Adaptation, error) {
	// Process-wide upstream timeouts, set like containerd does before New.
	adaptation.SetPluginRegistrationTimeout(cfg.PluginRegistrationTimeout.Std())
	adaptation.SetPluginRequestTimeout(cfg.PluginRequestTimeout.Std())

	pol, err := nripolicy.New(cfg.Policy, nripolicy.WithLogger(stdLogger{}))
	if err != nil {
		return nil, nil, err
	}
	a, err := adaptation.New("containerd-example", "v0", syncFn, updateFn, cfg.AdaptationOptions(pol, nil)...)
	if err != nil {
		return nil, nil, fmt.Errorf("create NRI adaptation: %w", err)
	}
	// Attach after New and before Start, so that the policy sees the
	// first plugin's registration.
	pol.Attach(a)
	if err := a.Start(); err != nil {
		return nil, nil, fmt.Errorf("start NRI adaptation: %w", err)
	}
	return pol, a, nil
}

// CreateContainer shows the relay a runtime wraps with Admit and Done; in
// containerd this is (*local).CreateContainer in internal/nri.
//
//   - Admit runs BEFORE any runtime lock and before BlockPluginSync: it may
//     wait up to registration_wait for a required plugin, and a plugin's
//     Synchronize needs those locks to finish.
//   - An Admit error is a refusal before the relay: return it to the CRI
//     caller unchanged (it names the plugin and what to do).
//   - The ctx Admit returns must be the one passed to the adaptation: it
//     carries the admission the ttrpc interceptor records answers on.
//   - Done(relayErr) returns relayErr if the relay failed (a plugin's own
//     error always fails), or a refusal if a required plugin subscribed to
//     CreateContainer did not answer (skipped, timed out, lost connection).
//     On a refusal the runtime undoes the container it prepared.
func CreateContainer(ctx context.Context, pol *nripolicy.Policy, a *adaptation.Adaptation, pod *adaptation.PodSandbox, ctr *adaptation.Container) (*adaptation.ContainerAdjustment, error) {
	ctx, adm, err := pol.Admit(ctx, nripolicy.Request{Event: nripolicy.EventCreateContainer, Pod: pod, Container: ctr})
	if err != nil {
		return nil, err
	}
	// containerd takes its NRI lock here, after admission.
	rsp, err := a.CreateContainer(ctx, &adaptation.CreateContainerRequest{Pod: pod, Container: ctr})
	if err = adm.Done(err); err != nil {
		return nil, err
	}
	return rsp.GetAdjust(), nil
}

func main() {
	path := flag.String("config", "/etc/containerd/config.toml", "containerd config file")
	flag.Parse()
	data, err := os.ReadFile(*path)
	if err != nil {
		log.Fatal(err)
	}
	cfg, err := DecodeConfig(string(data))
	if err != nil {
		log.Fatal(err)
	}
	if cfg.Disable {
		log.Print("NRI is disabled")
		return
	}
	syncFn := func(ctx context.Context, cb adaptation.SyncCB) error {
		_, err := cb(ctx, nil, nil) // no pods or containers to report
		return err
	}
	updateFn := func(context.Context, []*adaptation.ContainerUpdate) ([]*adaptation.ContainerUpdate, error) {
		return nil, errors.New("containerd-example runs no containers")
	}
	pol, a, err := Start(cfg, syncFn, updateFn)
	if err != nil {
		log.Fatal(err)
	}
	defer a.Stop()
	log.Printf("serving NRI plugins on %s; required plugins: %v", cfg.SocketPath, cfg.Policy.Names())

	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	for {
		select {
		case <-sig:
			return
		case <-pol.Changed():
			for _, c := range pol.Conditions() {
				log.Printf("condition %s=%v %s %s", c.Type, c.Status, c.Reason, c.Message)
			}
		}
	}
}
