package main

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nrigate/nrigate/pkg/config"
)

// runApp runs the CLI with args and returns stdout, stderr and the error.
func runApp(t *testing.T, args ...string) (string, string, error) {
	t.Helper()
	app := newApp()
	var out, errOut bytes.Buffer
	app.Writer, app.ErrWriter = &out, &errOut
	err := app.Run(append([]string{"nrigate"}, args...))
	return out.String(), errOut.String(), err
}

func writeConf(t *testing.T, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "crio.conf")
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestConfigFlagPlacement(t *testing.T) {
	a := writeConf(t, "[crio]\nroot = \"/from/a\"\n")
	b := writeConf(t, "[crio]\nroot = \"/from/b\"\n")
	none := filepath.Join(t.TempDir(), "none")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-c", a, "-d", none, "config"}, `root = "/from/a"`},
		{[]string{"config", "-c", a, "-d", none}, `root = "/from/a"`},
		// The flag after the command name is the more specific one.
		{[]string{"-c", a, "config", "-c", b, "-d", none}, `root = "/from/b"`},
		{[]string{"config", "-c", a, "-d", none, "--root", "/flag/root"}, `root = "/flag/root"`},
		{[]string{"--root", "/flag/root", "config", "-c", a, "-d", none}, `root = "/flag/root"`},
	} {
		out, _, err := runApp(t, tc.args...)
		if err != nil {
			t.Errorf("%v: %v", tc.args, err)
			continue
		}
		if !strings.Contains(out, "\n"+tc.want+"\n") {
			t.Errorf("%v: output lacks %q", tc.args, tc.want)
		}
	}
}

func TestConfigDefaultIgnoresFiles(t *testing.T) {
	bad := writeConf(t, "[crio.nri.policy.plugins.guard]\nfail_policy = \"nope\"\n")
	out, _, err := runApp(t, "config", "--default", "-c", bad)
	if err != nil {
		t.Fatalf("config --default read the files: %v", err)
	}
	if !strings.Contains(out, `default_runtime = "runc"`) {
		t.Errorf("default output lacks default_runtime:\n%s", out)
	}
}

func TestBadOverrideIsRefused(t *testing.T) {
	a := writeConf(t, "")
	_, _, err := runApp(t, "config", "-c", a, "-d", "", "--log-level", "chatty")
	if !errors.Is(err, config.ErrInvalid) || !strings.Contains(err.Error(), "command line") ||
		!strings.Contains(err.Error(), "crio.runtime.log_level") {
		t.Errorf("err = %v, want an invalid command-line log level", err)
	}
}

func TestUnknownKeyWarningFields(t *testing.T) {
	a := writeConf(t, "[crio]\nversion_file = \"/x\"\n")
	_, stderr, err := runApp(t, "config", "-c", a, "-d", "")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"file=" + a, "key=crio.version_file", "level=warning"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr %q lacks %q", stderr, want)
		}
	}
}

func TestRunRejectsArguments(t *testing.T) {
	_, _, err := runApp(t, "-c", writeConf(t, ""), "-d", "", "serve")
	if err == nil || !strings.Contains(err.Error(), `unknown command "serve"`) {
		t.Errorf("err = %v, want unknown command", err)
	}
}

func TestVersion(t *testing.T) {
	out, _, err := runApp(t, "version")
	if err != nil || !strings.HasPrefix(out, "nrigate version ") {
		t.Errorf("version: %q, %v", out, err)
	}
}
