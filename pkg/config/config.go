// Package config loads the nrigate configuration: the crio.conf format of
// CRI-O (a main file plus *.conf drop-ins), with the NRI policy of
// pkg/nripolicy embedded as [crio.nri.policy].
package config

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/containerd/nri/plugins/default-validator/builtin"
	"github.com/sirupsen/logrus"

	"github.com/nrigate/nrigate/pkg/nripolicy"
)

// Defaults of the daemon. They follow CRI-O where CRI-O has the key, and use
// nrigate's own paths so that nrigate and CRI-O can share a machine.
const (
	DefaultConfigFile             = "/etc/nrigate/crio.conf"
	DefaultConfigDir              = "/etc/nrigate/crio.conf.d"
	DefaultListen                 = "/var/run/nrigate/nrigate.sock"
	DefaultRoot                   = "/var/lib/nrigate"
	DefaultRunRoot                = "/run/nrigate"
	DefaultStorageDriver          = "overlay"
	DefaultRuntime                = "runc"
	DefaultRuntimePath            = "/usr/sbin/runc"
	DefaultRuntimeRoot            = "/run/runc"
	DefaultMonitorPath            = "/usr/bin/conmon"
	DefaultLogLevel               = "info"
	DefaultCgroupManager          = CgroupManagerCgroupfs
	DefaultNRIListen              = "/var/run/nri/nri.sock"
	DefaultNRIPluginDir           = "/opt/nri/plugins"
	DefaultNRIPluginConfigDir     = "/etc/nri/conf.d"
	DefaultNRIRegistrationTimeout = 5 * time.Second
	DefaultNRIRequestTimeout      = 2 * time.Second
	DefaultMetricsHost            = "127.0.0.1"
	DefaultMetricsPort            = 9090
)

// Cgroup managers of [crio.runtime] cgroup_manager: only cgroupfs works.
// The systemd manager needs systemd as PID 1 and a systemd cgroup driver,
// which nrigate does not implement; it is refused rather than ignored.
const (
	CgroupManagerCgroupfs = "cgroupfs"
	CgroupManagerSystemd  = "systemd"
)

// RuntimeTypeOCI is the only runtime_type nrigate supports: an OCI runtime
// supervised by conmon.
const RuntimeTypeOCI = "oci"

// ErrInvalid is wrapped by every error about a bad configuration value or
// an unreadable configuration file.
var ErrInvalid = errors.New("invalid configuration")

// Duration is a time.Duration written as a Go duration string ("5s").
type Duration = nripolicy.Duration

// Config is the whole configuration file: everything lives under [crio].
type Config struct {
	Crio CrioConfig `toml:"crio"`
}

// CrioConfig is the [crio] table.
type CrioConfig struct {
	// Root is where persistent state (images, containers) is stored.
	Root string `toml:"root"`
	// RunRoot is where transient state (sockets, exit files) is stored.
	RunRoot string `toml:"runroot"`
	// StorageDriver is the containers/storage graph driver.
	StorageDriver string `toml:"storage_driver"`

	API     APIConfig     `toml:"api"`
	Runtime RuntimeConfig `toml:"runtime"`
	NRI     NRIConfig     `toml:"nri"`
	Metrics MetricsConfig `toml:"metrics"`
}

// APIConfig is the [crio.api] table.
type APIConfig struct {
	// Listen is the path of the CRI unix socket.
	Listen string `toml:"listen"`
}

// RuntimeConfig is the [crio.runtime] table.
type RuntimeConfig struct {
	// DefaultRuntime names the entry of Runtimes used when a request names no handler.
	DefaultRuntime string `toml:"default_runtime"`
	// LogLevel is the daemon's log level (a logrus level name).
	LogLevel string `toml:"log_level"`
	// CgroupManager must be "cgroupfs" (systemd is refused).
	CgroupManager string `toml:"cgroup_manager"`
	// Runtimes are the runtime handlers, keyed by handler name.
	Runtimes map[string]*RuntimeHandler `toml:"runtimes"`
}

// RuntimeHandler is one [crio.runtime.runtimes.NAME] table.
type RuntimeHandler struct {
	// RuntimePath is the OCI runtime binary. When empty, the binary named
	// like the handler is looked up in $PATH at load time.
	RuntimePath string `toml:"runtime_path"`
	// RuntimeType is the kind of runtime; only "oci" is supported.
	RuntimeType string `toml:"runtime_type"`
	// RuntimeRoot is the runtime's state directory (runc --root).
	RuntimeRoot string `toml:"runtime_root"`
	// MonitorPath is the conmon binary that supervises the runtime.
	MonitorPath string `toml:"monitor_path"`
}

// NRIConfig is the [crio.nri] table, with CRI-O's keys and defaults.
type NRIConfig struct {
	// Enabled turns NRI support on.
	Enabled bool `toml:"enable_nri"`
	// SocketPath is where NRI plugins connect.
	SocketPath string `toml:"nri_listen"`
	// PluginPath holds pre-installed plugins that the runtime starts itself.
	PluginPath string `toml:"nri_plugin_dir"`
	// PluginConfigPath holds configuration drop-ins for the pre-installed plugins.
	PluginConfigPath string `toml:"nri_plugin_config_dir"`
	// PluginRegistrationTimeout bounds how long a plugin may take to register.
	PluginRegistrationTimeout Duration `toml:"nri_plugin_registration_timeout"`
	// PluginRequestTimeout bounds how long a plugin may take to answer a request.
	PluginRequestTimeout Duration `toml:"nri_plugin_request_timeout"`
	// DisableConnections stops externally started plugins from connecting.
	DisableConnections bool `toml:"nri_disable_connections"`
	// DefaultValidator configures NRI's built-in default validator.
	DefaultValidator DefaultValidatorConfig `toml:"default_validator"`
	// Policy is the nrigate NRI policy: which plugins are required, and how.
	Policy nripolicy.Config `toml:"policy"`
}

// DefaultValidatorConfig is the [crio.nri.default_validator] table. Its
// keys are CRI-O's; Upstream maps them onto NRI's own configuration.
type DefaultValidatorConfig struct {
	Enable                                bool     `toml:"nri_enable_default_validator"`
	RejectOCIHookAdjustment               bool     `toml:"nri_validator_reject_oci_hook_adjustment"`
	RejectRuntimeDefaultSeccompAdjustment bool     `toml:"nri_validator_reject_runtime_default_seccomp_adjustment"`
	RejectUnconfinedSeccompAdjustment     bool     `toml:"nri_validator_reject_unconfined_seccomp_adjustment"`
	RejectCustomSeccompAdjustment         bool     `toml:"nri_validator_reject_custom_seccomp_adjustment"`
	RejectNamespaceAdjustment             bool     `toml:"nri_validator_reject_namespace_adjustment"`
	RejectSysctlAdjustment                bool     `toml:"nri_validator_reject_sysctl_adjustment"`
	RequiredPlugins                       []string `toml:"nri_validator_required_plugins"`
	TolerateMissingAnnotation             string   `toml:"nri_validator_tolerate_missing_plugins_annotation"`
}

// Upstream returns the configuration in the form NRI's
// adaptation.WithDefaultValidator takes.
func (v *DefaultValidatorConfig) Upstream() *builtin.DefaultValidatorConfig {
	return &builtin.DefaultValidatorConfig{
		Enable:                                v.Enable,
		RejectOCIHookAdjustment:               v.RejectOCIHookAdjustment,
		RejectRuntimeDefaultSeccompAdjustment: v.RejectRuntimeDefaultSeccompAdjustment,
		RejectUnconfinedSeccompAdjustment:     v.RejectUnconfinedSeccompAdjustment,
		RejectCustomSeccompAdjustment:         v.RejectCustomSeccompAdjustment,
		RejectNamespaceAdjustment:             v.RejectNamespaceAdjustment,
		RejectSysctlAdjustment:                v.RejectSysctlAdjustment,
		RequiredPlugins:                       append([]string(nil), v.RequiredPlugins...),
		TolerateMissingAnnotation:             v.TolerateMissingAnnotation,
	}
}

// MetricsConfig is the [crio.metrics] table.
type MetricsConfig struct {
	// Enable turns the Prometheus metrics endpoint on.
	Enable bool `toml:"enable_metrics"`
	// Host is the address the metrics endpoint listens on.
	Host string `toml:"metrics_host"`
	// Port is the TCP port of the metrics endpoint.
	Port int `toml:"metrics_port"`
}

// DefaultConfig returns the configuration used when no file sets anything.
func DefaultConfig() *Config {
	return &Config{Crio: CrioConfig{
		Root:          DefaultRoot,
		RunRoot:       DefaultRunRoot,
		StorageDriver: DefaultStorageDriver,
		API: APIConfig{
			Listen: DefaultListen,
		},
		Runtime: RuntimeConfig{
			DefaultRuntime: DefaultRuntime,
			LogLevel:       DefaultLogLevel,
			CgroupManager:  DefaultCgroupManager,
			Runtimes: map[string]*RuntimeHandler{
				DefaultRuntime: DefaultRuntimeHandler(),
			},
		},
		NRI: NRIConfig{
			Enabled:                   true,
			SocketPath:                DefaultNRIListen,
			PluginPath:                DefaultNRIPluginDir,
			PluginConfigPath:          DefaultNRIPluginConfigDir,
			PluginRegistrationTimeout: Duration(DefaultNRIRegistrationTimeout),
			PluginRequestTimeout:      Duration(DefaultNRIRequestTimeout),
			Policy:                    *nripolicy.DefaultConfig(),
		},
		Metrics: MetricsConfig{
			Host: DefaultMetricsHost,
			Port: DefaultMetricsPort,
		},
	}}
}

// DefaultRuntimeHandler returns the default runc handler: Debian's runc
// supervised by Debian's conmon.
func DefaultRuntimeHandler() *RuntimeHandler {
	return &RuntimeHandler{
		RuntimePath: DefaultRuntimePath,
		RuntimeType: RuntimeTypeOCI,
		RuntimeRoot: DefaultRuntimeRoot,
		MonitorPath: DefaultMonitorPath,
	}
}

// DefaultHandler returns the handler named by default_runtime, or nil.
func (c *Config) DefaultHandler() *RuntimeHandler {
	return c.Crio.Runtime.Runtimes[c.Crio.Runtime.DefaultRuntime]
}

// ValidationError is a bad value: it names the file that set it (empty for
// a default or a command-line override), the dotted key, the value and what
// is allowed.
type ValidationError struct {
	File    string
	Key     string
	Value   string
	Allowed string
	// cause is the policy error this one was made from, if any.
	cause error
}

// Error implements error.
func (e *ValidationError) Error() string {
	msg := fmt.Sprintf("%s = %s: %s", e.Key, e.Value, e.Allowed)
	if e.File != "" {
		msg = e.File + ": " + msg
	}
	return "invalid configuration: " + msg
}

// Unwrap makes the error match ErrInvalid and, for policy keys,
// nripolicy.ErrInvalidConfig.
func (e *ValidationError) Unwrap() []error {
	if e.cause != nil {
		return []error{ErrInvalid, e.cause}
	}
	return []error{ErrInvalid}
}

// PolicyKeyPrefix is the dotted key of the policy table.
const PolicyKeyPrefix = "crio.nri.policy"

// Validate checks the whole configuration and returns the first bad value
// as a *ValidationError (without a file name; Load adds it).
func (c *Config) Validate() error {
	q := func(s string) string { return fmt.Sprintf("%q", s) }
	bad := func(key, value, allowed string) error {
		return &ValidationError{Key: key, Value: value, Allowed: allowed}
	}
	cc := &c.Crio
	for key, v := range map[string]string{"crio.root": cc.Root, "crio.runroot": cc.RunRoot, "crio.api.listen": cc.API.Listen} {
		if !strings.HasPrefix(v, "/") {
			return bad(key, q(v), "must be an absolute path")
		}
	}
	if _, err := logrus.ParseLevel(cc.Runtime.LogLevel); err != nil {
		return bad("crio.runtime.log_level", q(cc.Runtime.LogLevel), `allowed values are "trace", "debug", "info", "warn", "error", "fatal", "panic"`)
	}
	switch cc.Runtime.CgroupManager {
	case CgroupManagerCgroupfs:
	case CgroupManagerSystemd:
		return bad("crio.runtime.cgroup_manager", q(cc.Runtime.CgroupManager),
			`nrigate has no systemd cgroup manager (it needs systemd as PID 1 and a systemd cgroup driver); the only allowed value is "cgroupfs"`)
	default:
		return bad("crio.runtime.cgroup_manager", q(cc.Runtime.CgroupManager), `the only allowed value is "cgroupfs"`)
	}
	for _, name := range sortedKeys(cc.Runtime.Runtimes) {
		h := cc.Runtime.Runtimes[name]
		prefix := "crio.runtime.runtimes." + quoteKey(name)
		if h == nil {
			return bad(prefix, "(empty)", "a runtime handler table")
		}
		if !strings.HasPrefix(h.RuntimePath, "/") {
			return bad(prefix+".runtime_path", q(h.RuntimePath), "must be an absolute path (or empty, with "+q(name)+" in $PATH)")
		}
		if !strings.HasPrefix(h.MonitorPath, "/") {
			return bad(prefix+".monitor_path", q(h.MonitorPath), "must be an absolute path")
		}
		switch h.RuntimeType {
		case RuntimeTypeOCI:
		default:
			return bad(prefix+".runtime_type", q(h.RuntimeType), `allowed values are "oci"`)
		}
	}
	if cc.DefaultHandlerMissing() {
		return bad("crio.runtime.default_runtime", q(cc.Runtime.DefaultRuntime), "must name a [crio.runtime.runtimes.NAME] table (configured: "+strings.Join(quoteAll(sortedKeys(cc.Runtime.Runtimes)), ", ")+")")
	}
	nri := &cc.NRI
	if nri.Enabled && !strings.HasPrefix(nri.SocketPath, "/") && !nri.DisableConnections {
		return bad("crio.nri.nri_listen", q(nri.SocketPath), "must be an absolute path")
	}
	if nri.PluginRegistrationTimeout <= 0 {
		return bad("crio.nri.nri_plugin_registration_timeout", q(nri.PluginRegistrationTimeout.Std().String()), "must be a positive duration")
	}
	if nri.PluginRequestTimeout <= 0 {
		return bad("crio.nri.nri_plugin_request_timeout", q(nri.PluginRequestTimeout.Std().String()), "must be a positive duration")
	}
	policyErr := nri.Policy.Validate()
	if policyErr == nil {
		policyErr = nri.Policy.CheckNRIEnabled(nri.Enabled, "crio.nri.enable_nri = false")
	}
	if err := policyErr; err != nil {
		var fe *nripolicy.FieldError
		if errors.As(err, &fe) {
			return &ValidationError{Key: PolicyKeyPrefix + "." + fe.Key, Value: fe.Value, Allowed: fe.Allowed, cause: err}
		}
		return &ValidationError{Key: PolicyKeyPrefix, Value: "(table)", Allowed: err.Error(), cause: err}
	}
	if c.Crio.Metrics.Port < 0 || c.Crio.Metrics.Port > 65535 {
		return bad("crio.metrics.metrics_port", fmt.Sprint(c.Crio.Metrics.Port), "must be a TCP port (0-65535)")
	}
	return nil
}

// DefaultHandlerMissing reports whether default_runtime names no handler.
func (cc *CrioConfig) DefaultHandlerMissing() bool {
	h, ok := cc.Runtime.Runtimes[cc.Runtime.DefaultRuntime]
	return !ok || h == nil
}

func quoteAll(in []string) []string {
	out := make([]string, len(in))
	for i, s := range in {
		out[i] = fmt.Sprintf("%q", s)
	}
	return out
}
