package config

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/BurntSushi/toml"

	"github.com/nrigate/nrigate/pkg/nripolicy"
)

// Warning is a problem that does not stop the daemon, such as a key that
// nrigate does not know (a full CRI-O configuration still loads).
type Warning struct {
	File string
	Key  string
	// Reason is empty for an unknown key; otherwise it says why a known
	// key has no effect.
	Reason string
}

// String describes the warning.
func (w Warning) String() string {
	if w.Reason != "" {
		return fmt.Sprintf("%s: %s: %s", w.File, w.Key, w.Reason)
	}
	return fmt.Sprintf("%s: unknown configuration key %s (ignored)", w.File, w.Key)
}

// unusedHandlers warns about runtime handler tables a file set other than
// default_runtime's: the CRI server serves that one handler only and
// refuses requests naming another.
func (c *Config) unusedHandlers(origin map[string]string) []Warning {
	var out []Warning
	for _, name := range sortedKeys(c.Crio.Runtime.Runtimes) {
		if name == c.Crio.Runtime.DefaultRuntime {
			continue
		}
		key := "crio.runtime.runtimes." + quoteKey(name)
		file := setIn(origin, joinKey(splitKey(key)))
		if file == "" {
			continue // a built-in default
		}
		out = append(out, Warning{File: file, Key: key, Reason: fmt.Sprintf(
			"only the default_runtime handler (%q) is served; requests naming %q are refused", c.Crio.Runtime.DefaultRuntime, name)})
	}
	return out
}

// Load reads the main file and then every *.conf drop-in of dir in lexical
// order over the defaults, key by key: a later file wins for each key it
// sets, and a list it sets replaces the earlier list. A missing file is
// fine when it is the default path; a missing dir is always fine. The
// result is validated; errors wrap ErrInvalid and name the file and key.
func Load(file, dir string) (*Config, []Warning, error) {
	var files []string
	if file != "" {
		if _, err := os.Stat(file); err == nil {
			files = append(files, file)
		} else if !errors.Is(err, fs.ErrNotExist) || file != DefaultConfigFile {
			return nil, nil, fmt.Errorf("%w: config file %s: %w", ErrInvalid, file, err)
		}
	}
	if dir != "" {
		dropins, err := filepath.Glob(filepath.Join(dir, "*.conf"))
		if err != nil {
			return nil, nil, fmt.Errorf("%w: config dir %s: %w", ErrInvalid, dir, err)
		}
		if _, err := os.Stat(dir); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, nil, fmt.Errorf("%w: config dir %s: %w", ErrInvalid, dir, err)
		}
		sort.Strings(dropins)
		files = append(files, dropins...)
	}
	return LoadFiles(files...)
}

// LoadFiles merges the given files, in order, over the defaults and
// validates the result. Every file must exist.
func LoadFiles(files ...string) (*Config, []Warning, error) {
	cfg := DefaultConfig()
	var warnings []Warning
	origin := map[string]string{}
	for _, f := range files {
		w, err := cfg.decodeFile(f, origin)
		if err != nil {
			return nil, nil, err
		}
		warnings = append(warnings, w...)
	}
	cfg.normalize()
	if err := cfg.Validate(); err != nil {
		var ve *ValidationError
		if errors.As(err, &ve) {
			ve.File = originOf(origin, ve.Key)
		}
		return nil, warnings, err
	}
	return cfg, append(warnings, cfg.unusedHandlers(origin)...), nil
}

// decodeFile merges one file into c and records, for every key it sets,
// that this file set it.
func (c *Config) decodeFile(file string, origin map[string]string) ([]Warning, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrInvalid, file, err)
	}
	// Map-valued tables (runtimes, policy plugins) are replaced entry by
	// entry by the decoder; keep the earlier entries so that a drop-in
	// which sets one key of a plugin keeps the plugin's other keys.
	oldRuntimes := maps(c.Crio.Runtime.Runtimes)
	oldPlugins := maps(c.Crio.NRI.Policy.Plugins)

	md, err := toml.Decode(string(data), c)
	if err != nil {
		return nil, decodeError(file, err)
	}
	if len(oldRuntimes)+len(oldPlugins) > 0 {
		var raw map[string]any
		if _, err := toml.Decode(string(data), &raw); err != nil {
			return nil, decodeError(file, err)
		}
		if err := mergeEntries(raw, []string{"crio", "runtime", "runtimes"}, oldRuntimes, c.Crio.Runtime.Runtimes,
			func(h *RuntimeHandler) *RuntimeHandler { v := *h; return &v }); err != nil {
			return nil, decodeError(file, err)
		}
		if err := mergeEntries(raw, []string{"crio", "nri", "policy", "plugins"}, oldPlugins, c.Crio.NRI.Policy.Plugins,
			clonePlugin); err != nil {
			return nil, decodeError(file, err)
		}
	}
	for _, k := range md.Keys() {
		origin[joinKey(k)] = file
	}
	var warnings []Warning
	undecoded := md.Undecoded()
	unknown := make(map[string]bool, len(undecoded))
	for _, k := range undecoded {
		unknown[joinKey(k)] = true
	}
	for _, k := range undecoded {
		// Report the outermost unknown key only: the keys of an unknown
		// table add nothing.
		if hasUnknownParent(k, unknown) {
			continue
		}
		warnings = append(warnings, Warning{File: file, Key: k.String()})
	}
	return warnings, nil
}

func hasUnknownParent(k toml.Key, unknown map[string]bool) bool {
	for n := 1; n < len(k); n++ {
		if unknown[joinKey(k[:n])] {
			return true
		}
	}
	return false
}

func maps[V any](m map[string]*V) map[string]*V {
	out := make(map[string]*V, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// mergeEntries re-applies the keys a file set for an entry of a map-valued
// table onto a copy of the entry as it was before the file.
func mergeEntries[V any](raw map[string]any, path []string, old, cur map[string]*V, clone func(*V) *V) error {
	tbl := raw
	for _, p := range path {
		next, ok := tbl[p].(map[string]any)
		if !ok {
			return nil
		}
		tbl = next
	}
	for name, sub := range tbl {
		prev := old[name]
		if prev == nil {
			continue
		}
		var buf bytes.Buffer
		if err := toml.NewEncoder(&buf).Encode(sub); err != nil {
			return err
		}
		merged := clone(prev)
		if _, err := toml.Decode(buf.String(), merged); err != nil {
			return err
		}
		cur[name] = merged
	}
	return nil
}

func clonePlugin(p *nripolicy.PluginConfig) *nripolicy.PluginConfig {
	v := *p
	v.Events = slices.Clone(p.Events)
	v.Namespaces = slices.Clone(p.Namespaces)
	v.ExcludeNamespaces = slices.Clone(p.ExcludeNamespaces)
	v.RuntimeHandlers = slices.Clone(p.RuntimeHandlers)
	return &v
}

// normalize applies the policy and runtime handler defaults and makes empty lists nil, so that
// "key = []" and a missing key load to the same configuration. Events are
// left alone: an explicit empty list is an error, not the default.
func (c *Config) normalize() {
	c.Crio.NRI.Policy.SetDefaults()
	for name, h := range c.Crio.Runtime.Runtimes {
		if h == nil {
			continue
		}
		if h.RuntimePath == "" {
			// Like CRI-O: a handler without a path runs the binary named
			// like the handler, found in $PATH.
			if p, err := exec.LookPath(name); err == nil {
				h.RuntimePath = p
			}
		}
		if h.RuntimeType == "" {
			h.RuntimeType = RuntimeTypeOCI
		}
		if h.MonitorPath == "" {
			h.MonitorPath = DefaultMonitorPath
		}
	}
	nilIfEmpty(&c.Crio.NRI.DefaultValidator.RequiredPlugins)
	for _, p := range c.Crio.NRI.Policy.Plugins {
		if p == nil {
			continue
		}
		nilIfEmpty(&p.Namespaces)
		nilIfEmpty(&p.ExcludeNamespaces)
		nilIfEmpty(&p.RuntimeHandlers)
	}
}

func nilIfEmpty(s *[]string) {
	if len(*s) == 0 {
		*s = nil
	}
}

// typeErrorRE matches the decoder's type errors, which are not ParseErrors:
// toml: line 2 (last key "crio.nri.enable_nri"): incompatible types: ...
var typeErrorRE = regexp.MustCompile(`^toml: line (\d+) \(last key "([^"]*)"\): (.*)$`)

// decodeError names the file and, where the decoder knows it, the key.
func decodeError(file string, err error) error {
	var pe toml.ParseError
	if errors.As(err, &pe) {
		msg := pe.Message
		if pe.LastKey != "" {
			return fmt.Errorf("%w: %s: line %d: %s: %s", ErrInvalid, file, pe.Position.Line, pe.LastKey, msg)
		}
		return fmt.Errorf("%w: %s: line %d: %s", ErrInvalid, file, pe.Position.Line, msg)
	}
	if m := typeErrorRE.FindStringSubmatch(err.Error()); m != nil {
		return fmt.Errorf("%w: %s: line %s: %s: %s", ErrInvalid, file, m[1], m[2], m[3])
	}
	return fmt.Errorf("%w: %s: %s", ErrInvalid, file, strings.TrimPrefix(err.Error(), "toml: "))
}

// joinKey is the canonical form of a key used to find its origin.
func joinKey(k []string) string { return strings.Join(k, "\x00") }

// setIn returns a file that set table (a joinKey) or a key in it, ignoring
// enclosing tables (the greatest path when several did, for a stable
// answer); "" when no file did.
func setIn(origin map[string]string, table string) string {
	file := ""
	for k, f := range origin {
		if (k == table || strings.HasPrefix(k, table+"\x00")) && f > file {
			file = f
		}
	}
	return file
}

// originOf returns the file that set key, or the file that set the
// nearest enclosing table; "" when the value is a default.
func originOf(origin map[string]string, dotted string) string {
	parts := splitKey(dotted)
	for n := len(parts); n > 0; n-- {
		if f, ok := origin[joinKey(parts[:n])]; ok {
			return f
		}
	}
	return ""
}

// splitKey splits a dotted TOML key with bare or "quoted" parts.
func splitKey(dotted string) []string {
	var parts []string
	for len(dotted) > 0 {
		if dotted[0] == '"' {
			end := 1
			for end < len(dotted) && (dotted[end] != '"' || dotted[end-1] == '\\') {
				end++
			}
			if end >= len(dotted) {
				return append(parts, dotted)
			}
			s, err := strconv.Unquote(dotted[:end+1])
			if err != nil {
				s = dotted[1:end]
			}
			parts = append(parts, s)
			dotted = strings.TrimPrefix(dotted[end+1:], ".")
			continue
		}
		i := strings.IndexByte(dotted, '.')
		if i < 0 {
			return append(parts, dotted)
		}
		parts = append(parts, dotted[:i])
		dotted = dotted[i+1:]
	}
	return parts
}

var bareKeyRE = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

// quoteKey writes one key part as TOML does: bare when it can be.
func quoteKey(k string) string {
	if bareKeyRE.MatchString(k) {
		return k
	}
	return strconv.Quote(k)
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
