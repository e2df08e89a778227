package critest

import (
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
)

func TestMountsUnderAndUnmountUnder(t *testing.T) {
	if os.Geteuid() != 0 {
		// Under CI=true a missing prerequisite fails: CI cannot pass by skipping.
		if os.Getenv("CI") == "true" {
			t.Fatal("CI=true, so this test may not skip: needs root (mounts tmpfs)")
		}
		t.Skip("needs root: mounts tmpfs")
	}
	dir := t.TempDir()
	outer, inner := filepath.Join(dir, "a"), filepath.Join(dir, "a", "b")
	if err := os.Mkdir(outer, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount("tmpfs", outer, "tmpfs", 0, ""); err != nil {
		t.Fatalf("mount %s: %v", outer, err)
	}
	t.Cleanup(func() { _ = syscall.Unmount(outer, syscall.MNT_DETACH) })
	if err := os.Mkdir(inner, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount("tmpfs", inner, "tmpfs", 0, ""); err != nil {
		t.Fatalf("mount %s: %v", inner, err)
	}
	// A sibling whose name starts with dir's must not count as below it.
	sibling := dir + "x"
	if err := os.Mkdir(sibling, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(sibling) })
	if err := syscall.Mount("tmpfs", sibling, "tmpfs", 0, ""); err != nil {
		t.Fatalf("mount %s: %v", sibling, err)
	}
	t.Cleanup(func() { _ = syscall.Unmount(sibling, syscall.MNT_DETACH) })

	ms, err := MountsUnder(dir)
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(ms)
	if !slices.Equal(ms, []string{outer, inner}) {
		t.Fatalf("MountsUnder(%s) = %q, want %q", dir, ms, []string{outer, inner})
	}
	if err := UnmountUnder(dir); err != nil {
		t.Fatalf("UnmountUnder: %v", err)
	}
	if ms, _ := MountsUnder(dir); len(ms) != 0 {
		t.Fatalf("after UnmountUnder, still mounted: %q", ms)
	}
	if ms, _ := MountsUnder(sibling); ms != nil {
		t.Fatalf("sibling %s has mounts below it: %q", sibling, ms)
	}
	if err := os.RemoveAll(dir); err != nil {
		t.Fatalf("state directory not removable after UnmountUnder: %v", err)
	}
}

func TestConfigs(t *testing.T) {
	p := PodConfig("p1", "/logs")
	if p.LogDirectory != "/logs/p1" || p.Metadata.Uid != "p1-uid" || p.Metadata.Namespace != "default" {
		t.Errorf("PodConfig = %v", p)
	}
	if c := ContainerConfig("c1"); !slices.Equal(c.Command, []string{"sleep", "1000"}) || c.Image.Image != TestImage {
		t.Errorf("ContainerConfig default = %v", c)
	}
	if c := ContainerConfig("c2", "true"); !slices.Equal(c.Command, []string{"true"}) {
		t.Errorf("ContainerConfig command = %v", c.Command)
	}
}
