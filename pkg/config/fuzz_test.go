package config

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// FuzzLoad feeds arbitrary bytes to the loader as a crio.conf: any input
// must give a configuration or an error, never a panic, and a loaded
// configuration must survive Validate and a WriteTemplate round trip.
func FuzzLoad(f *testing.F) {
	f.Add([]byte(""))
	f.Add([]byte("[crio]\nroot = \"/r\"\n"))
	f.Add([]byte("[crio.nri.policy.plugins.\"10-guard\"]\nfail_policy = \"fail\"\n"))
	f.Add([]byte("[crio.nri.policy.plugins.x]\npod_selector = \"app in (a,b),!x\"\nnamespaces = [\"[\"]\n"))
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, data []byte) {
		file := filepath.Join(dir, "crio.conf")
		if err := os.WriteFile(file, data, 0o600); err != nil {
			t.Fatal(err)
		}
		cfg, _, err := LoadFiles(file)
		if err != nil {
			if cfg != nil {
				t.Fatalf("LoadFiles returned both a config and error %v", err)
			}
			return
		}
		if cfg == nil {
			t.Fatal("LoadFiles returned neither a config nor an error")
		}
		if err := cfg.Validate(); err != nil {
			t.Fatalf("a loaded config fails Validate: %v", err)
		}
		var buf bytes.Buffer
		if err := WriteTemplate(&buf, cfg); err != nil {
			t.Fatalf("WriteTemplate: %v", err)
		}
		out := filepath.Join(dir, "template.conf")
		if err := os.WriteFile(out, buf.Bytes(), 0o600); err != nil {
			t.Fatal(err)
		}
		again, _, err := LoadFiles(out)
		if err != nil {
			t.Fatalf("the template of a loaded config does not reload: %v\ninput:\n%s\ntemplate:\n%s", err, data, buf.Bytes())
		}
		var buf2 bytes.Buffer
		if err := WriteTemplate(&buf2, again); err != nil {
			t.Fatalf("WriteTemplate of the reloaded config: %v", err)
		}
		if !bytes.Equal(buf.Bytes(), buf2.Bytes()) {
			t.Fatalf("template is not stable across a reload:\nfirst:\n%s\nsecond:\n%s", buf.Bytes(), buf2.Bytes())
		}
	})
}
