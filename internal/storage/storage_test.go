package storage

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	logtest "github.com/sirupsen/logrus/hooks/test"

	"github.com/nrigate/nrigate/internal/testenv"
)

// testImage builds the busybox test archive with hack/make-test-image.sh.
func testImage(t *testing.T) string {
	t.Helper()
	testenv.SkipShort(t, "builds the test image")
	testenv.RequireFiles(t, "/bin/busybox")
	testenv.RequireCommands(t, "jq")
	out := filepath.Join(t.TempDir(), "busybox.tar")
	cmd := exec.Command("../../hack/make-test-image.sh", out)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("make-test-image: %v\n%s", err, b)
	}
	return out
}

func openStore(t *testing.T, driver string) *Store {
	t.Helper()
	testenv.SkipShort(t, "opens a real store")
	testenv.RequireRoot(t, "containers/storage")
	dir := t.TempDir()
	log := logrus.New()
	log.SetOutput(os.Stderr)
	s, err := Open(Options{Root: filepath.Join(dir, "root"), RunRoot: filepath.Join(dir, "run"), Driver: driver, Logger: log})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Shutdown(); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
	})
	return s
}

func TestOpenRequiresDirs(t *testing.T) {
	if _, err := Open(Options{}); err == nil {
		t.Fatal("Open without root succeeded")
	}
}

func TestOpenDefaultsToOverlay(t *testing.T) {
	s := openStore(t, "")
	if d := s.Driver(); d != DriverOverlay && d != DriverVFS {
		t.Fatalf("driver %q, want overlay or vfs fallback", d)
	}
}

func TestParseSource(t *testing.T) {
	for _, tc := range []struct{ in, name string }{
		{"busybox", "docker.io/library/busybox:latest"},
		{"docker://quay.io/x/y:1", "quay.io/x/y:1"},
		{"oci-archive:/tmp/busybox.tar", "localhost/busybox:latest"},
		{"oci:/tmp/layout:v2", "localhost/layout:v2"},
	} {
		_, name, err := parseSource(tc.in)
		if err != nil {
			t.Errorf("parseSource(%q): %v", tc.in, err)
			continue
		}
		if name != tc.name {
			t.Errorf("parseSource(%q) name %q, want %q", tc.in, name, tc.name)
		}
	}
	for _, bad := range []string{"", "UPPER/case", "oci-archive:"} {
		if _, _, err := parseSource(bad); err == nil {
			t.Errorf("parseSource(%q) succeeded", bad)
		}
	}
}

func TestImageLifecycle(t *testing.T) {
	archive := testImage(t)
	ctx := context.Background()
	for _, driver := range []string{"", DriverVFS} {
		t.Run("driver="+driver, func(t *testing.T) {
			s := openStore(t, driver)
			ref := "oci-archive:" + archive
			img, err := s.PullImage(ctx, ref)
			if err != nil {
				t.Fatalf("PullImage: %v", err)
			}
			if img.Config == nil || len(img.Config.Config.Cmd) == 0 || img.Config.Config.Cmd[0] != "sh" {
				t.Fatalf("image config %+v, want Cmd [sh]", img.Config)
			}
			if img.Size == 0 {
				t.Error("image size 0")
			}
			// Only the image's own name: the transport string is no tag.
			if len(img.Names) != 1 || img.Names[0] != "localhost/busybox:latest" {
				t.Errorf("names %v, want only localhost/busybox:latest (not %q)", img.Names, ref)
			}
			for _, q := range []string{ref, "localhost/busybox", img.ID, img.ID[:12], "sha256:" + img.ID} {
				got, err := s.ImageStatus(ctx, q)
				if err != nil || got.ID != img.ID {
					t.Errorf("ImageStatus(%q) = %v, %v", q, got, err)
				}
			}
			list, err := s.ListImages(ctx)
			if err != nil || len(list) != 1 {
				t.Fatalf("ListImages = %d images, %v", len(list), err)
			}
			fsi, err := s.ImageFsInfo()
			if err != nil || fsi.UsedBytes < 1<<20 || fsi.InodesUsed == 0 {
				t.Fatalf("ImageFsInfo = %+v, %v", fsi, err)
			}

			// Container root filesystem.
			if err := s.CreateContainer("c1", "c1-name", img.ID); err != nil {
				t.Fatalf("CreateContainer: %v", err)
			}
			mnt, err := s.Mount("c1")
			if err != nil {
				t.Fatalf("Mount: %v", err)
			}
			if _, err := os.Stat(filepath.Join(mnt, "bin", "busybox")); err != nil {
				t.Errorf("rootfs lacks busybox: %v", err)
			}
			if err := s.Unmount("c1"); err != nil {
				t.Fatalf("Unmount: %v", err)
			}
			if err := s.DeleteContainer("c1"); err != nil {
				t.Fatalf("DeleteContainer: %v", err)
			}
			if s.ContainerExists("c1") {
				t.Error("container still exists after delete")
			}
			if err := s.DeleteContainer("c1"); err != nil {
				t.Errorf("second DeleteContainer: %v", err)
			}
			if _, err := s.Mount("c1"); !errors.Is(err, ErrContainerNotFound) {
				t.Errorf("Mount deleted = %v, want ErrContainerNotFound", err)
			}

			if err := s.RemoveImage(ref); err != nil {
				t.Fatalf("RemoveImage: %v", err)
			}
			if _, err := s.ImageStatus(ctx, img.ID); !errors.Is(err, ErrImageNotFound) {
				t.Errorf("ImageStatus after remove = %v, want ErrImageNotFound", err)
			}
			if err := s.RemoveImage(ref); !errors.Is(err, ErrImageNotFound) {
				t.Errorf("second RemoveImage = %v, want ErrImageNotFound", err)
			}
			if err := s.CreateContainer("c2", "c2", img.ID); !errors.Is(err, ErrImageNotFound) {
				t.Errorf("CreateContainer from removed image = %v, want ErrImageNotFound", err)
			}
		})
	}
}

func TestPullOCILayoutWithTag(t *testing.T) {
	archive := testImage(t)
	s := openStore(t, "")
	dir := filepath.Join(t.TempDir(), "layout")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if b, err := exec.Command("tar", "-xf", archive, "-C", dir).CombinedOutput(); err != nil {
		t.Fatalf("untar: %v %s", err, b)
	}
	img, err := s.PullImage(context.Background(), "oci:"+dir+":latest")
	if err != nil {
		t.Fatalf("PullImage oci: %v", err)
	}
	if !contains(img.Names, "localhost/layout:latest") {
		t.Errorf("names %v miss localhost/layout:latest", img.Names)
	}
	if _, err := s.PullImage(context.Background(), "oci:"+dir+":nosuchtag"); err == nil {
		t.Error("pull of a missing tag succeeded")
	}
}

func TestPullUsesTheArchivesImageName(t *testing.T) {
	testenv.RequireFiles(t, "/bin/busybox")
	testenv.RequireCommands(t, "jq")
	s := openStore(t, "")
	out := filepath.Join(t.TempDir(), "named.tar")
	if b, err := exec.Command("../../hack/make-test-image.sh", out, "quay.io/nrigate/busybox:1.0").CombinedOutput(); err != nil {
		t.Fatalf("make-test-image: %v %s", err, b)
	}
	img, err := s.PullImage(context.Background(), "oci-archive:"+out)
	if err != nil {
		t.Fatal(err)
	}
	if !contains(img.Names, "quay.io/nrigate/busybox:1.0") {
		t.Errorf("names %v lack the archive's quay.io/nrigate/busybox:1.0", img.Names)
	}
}

func TestPullDockerWithoutRegistryFails(t *testing.T) {
	s := openStore(t, "")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, err := s.PullImage(ctx, "docker://127.0.0.1:1/nothing/here:v1")
	if err == nil {
		t.Fatal("pull from an unreachable registry succeeded")
	}
	if !strings.Contains(err.Error(), "127.0.0.1:1/nothing/here:v1") {
		t.Errorf("error %q does not name the reference", err)
	}
	if list, _ := s.ListImages(ctx); len(list) != 0 {
		t.Errorf("failed pull left %d images", len(list))
	}
}

func contains(l []string, s string) bool {
	for _, x := range l {
		if x == s {
			return true
		}
	}
	return false
}

func TestOverlayFailureFallsBackToVFSWithReason(t *testing.T) {
	testenv.SkipShort(t, "opens a real store")
	testenv.RequireRoot(t, "containers/storage")
	dir := t.TempDir()
	log, hook := logtest.NewNullLogger()
	// An option overlay rejects makes its initialization fail like an
	// unsupported filesystem would.
	s, err := Open(Options{Root: filepath.Join(dir, "root"), RunRoot: filepath.Join(dir, "run"),
		DriverOptions: []string{"overlay.nosuchoption=1"}, Logger: log})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	defer s.Shutdown()
	if s.Driver() != DriverVFS {
		t.Fatalf("driver %q, want vfs fallback", s.Driver())
	}
	var reason string
	for _, e := range hook.AllEntries() {
		if e.Level == logrus.WarnLevel && strings.Contains(e.Message, "falling back to vfs") {
			if err, ok := e.Data[logrus.ErrorKey].(error); ok {
				reason = err.Error()
			}
		}
	}
	if !strings.Contains(reason, "nosuchoption") {
		t.Errorf("fallback warning reason %q does not say why overlay failed", reason)
	}

	// An explicitly chosen other driver does not fall back.
	if _, err := Open(Options{Root: filepath.Join(dir, "r2"), RunRoot: filepath.Join(dir, "run2"), Driver: "nosuchdriver", Logger: log}); err == nil {
		t.Error("Open with an unknown driver succeeded")
	}
}
