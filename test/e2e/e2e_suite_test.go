// Package e2e drives a real nrigate daemon through the CRI gRPC API with the
// real bin/nri-faulty plugin, at a volume the BATS suite cannot reach.
package e2e

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nrigate/nrigate/internal/testenv"
	. "github.com/onsi/ginkgo/v2"
	"github.com/onsi/ginkgo/v2/reporters"
	. "github.com/onsi/gomega"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func TestE2E(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "nrigate e2e")
}

// With GINKGO_REPORT_DIR set (hack/test-summary.sh sets it), the suite
// writes ginkgo's JSON report there, so that the summary counts the specs
// rather than the one Go test that runs them.
var _ = ReportAfterSuite("JSON report for hack/test-summary.sh", func(r Report) {
	if dir := os.Getenv("GINKGO_REPORT_DIR"); dir != "" {
		Expect(reporters.GenerateJSONReport(r, filepath.Join(dir, "e2e.json"))).To(Succeed())
	}
})

var (
	repoRoot  string
	testImage string
)

var _ = BeforeSuite(func() {
	if os.Getuid() != 0 {
		prereqSkip("needs root")
	}
	root, err := filepath.Abs("../..")
	Expect(err).NotTo(HaveOccurred())
	repoRoot = root
	for _, b := range []string{"bin/nrigate", "bin/nri-faulty"} {
		if _, err := os.Stat(filepath.Join(repoRoot, b)); err != nil {
			prereqSkip(b + " not built (run make build)")
		}
	}
	for _, c := range []string{"runc", "conmon", "jq"} {
		if _, err := exec.LookPath(c); err != nil {
			prereqSkip(c + " not installed")
		}
	}
	if _, err := os.Stat("/bin/busybox"); err != nil {
		prereqSkip("busybox-static not installed")
	}
	dir, err := os.MkdirTemp("", "nrig-e2e")
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(os.RemoveAll, dir)
	testImage = filepath.Join(dir, "busybox.tar")
	out, err := exec.Command(filepath.Join(repoRoot, "hack/make-test-image.sh"), testImage).CombinedOutput()
	Expect(err).NotTo(HaveOccurred(), string(out))
})

// daemon is a running nrigate with its CRI clients.
type daemon struct {
	dir     string
	nriSock string
	cmd     *exec.Cmd
	conn    *grpc.ClientConn
	rt      runtimeapi.RuntimeServiceClient
	img     runtimeapi.ImageServiceClient
}

// e2eRuntime is the runtime the suite drives: NRIGATE_E2E_RUNTIME=nrigate
// (the in-tree daemon, default), crio or containerd (the patched builds in
// bin/, started by test/e2e/runtime.sh with the BATS helpers' config).
var e2eRuntime = func() string {
	if r := os.Getenv("NRIGATE_E2E_RUNTIME"); r != "" {
		return r
	}
	return "nrigate"
}()

// prereqSkip skips for a missing prerequisite; under CI=true it fails
// instead, so that CI cannot pass by skipping (internal/testenv's rule).
func prereqSkip(why string) {
	if testenv.CI() {
		Fail("CI=true, so this suite may not skip: " + why)
	}
	Skip(why)
}

// requireInTree skips a spec that measures the in-tree daemon itself.
func requireInTree() {
	if e2eRuntime != "nrigate" {
		Skip("measures the in-tree daemon's own process; NRIGATE_E2E_RUNTIME=" + e2eRuntime)
	}
}

// startDaemon starts nrigate (or the NRIGATE_E2E_RUNTIME runtime) with NRI
// on and extra TOML (policy tables), pulls the test image and registers
// its cleanup.
func startDaemon(extra string) *daemon {
	if e2eRuntime != "nrigate" {
		return startRealRuntime(extra)
	}
	dir, err := os.MkdirTemp("", "nrig")
	Expect(err).NotTo(HaveOccurred())
	d := &daemon{dir: dir, nriSock: filepath.Join(dir, "nri.sock")}
	sock := filepath.Join(dir, "cri.sock")
	Expect(os.MkdirAll(filepath.Join(dir, "conf.d"), 0o755)).To(Succeed())
	conf := fmt.Sprintf(`[crio]
root = %[1]q
runroot = %[2]q
[crio.api]
listen = %[3]q
[crio.runtime]
log_level = "info"
[crio.runtime.runtimes.runc]
runtime_root = %[4]q
[crio.nri]
enable_nri = true
nri_listen = %[5]q
nri_plugin_dir = %[6]q
nri_plugin_config_dir = %[6]q
nri_plugin_request_timeout = "2s"
%[7]s
`, filepath.Join(dir, "root"), filepath.Join(dir, "run"), sock, filepath.Join(dir, "runc"), d.nriSock,
		filepath.Join(dir, "plugins"), extra)
	Expect(os.WriteFile(filepath.Join(dir, "crio.conf"), []byte(conf), 0o644)).To(Succeed())
	logf, err := os.Create(filepath.Join(dir, "daemon.log"))
	Expect(err).NotTo(HaveOccurred())
	d.cmd = exec.Command(filepath.Join(repoRoot, "bin/nrigate"), "-c", filepath.Join(dir, "crio.conf"), "-d", filepath.Join(dir, "conf.d"))
	d.cmd.Stderr = logf
	Expect(d.cmd.Start()).To(Succeed())
	DeferCleanup(d.cleanup)
	d.conn, err = grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	Expect(err).NotTo(HaveOccurred())
	d.rt, d.img = runtimeapi.NewRuntimeServiceClient(d.conn), runtimeapi.NewImageServiceClient(d.conn)
	Eventually(func() error {
		_, err := d.rt.Status(context.Background(), &runtimeapi.StatusRequest{})
		return err
	}, 20*time.Second, 50*time.Millisecond).Should(Succeed())
	_, err = d.img.PullImage(context.Background(), &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: "oci-archive:" + testImage}})
	Expect(err).NotTo(HaveOccurred())
	return d
}

// cleanup removes the pods through the daemon, stops it and unmounts
// whatever is left under its directory.
func (d *daemon) cleanup() {
	ctx := context.Background()
	if pods, err := d.rt.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{}); err == nil {
		for _, p := range pods.Items {
			_, _ = d.rt.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: p.Id})
			_, _ = d.rt.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: p.Id})
		}
	}
	_ = d.conn.Close()
	if d.cmd == nil {
		out, err := exec.Command(filepath.Join(repoRoot, "test/e2e/runtime.sh"), "stop", d.dir).CombinedOutput()
		if err != nil {
			GinkgoWriter.Printf("runtime.sh stop: %v: %s\n", err, out)
		}
		_ = os.RemoveAll(d.dir)
		return
	}
	_ = d.cmd.Process.Signal(syscall.SIGTERM)
	_ = d.cmd.Wait()
	var mounts []string
	if f, err := os.Open("/proc/self/mounts"); err == nil {
		s := bufio.NewScanner(f)
		for s.Scan() {
			if fs := strings.Fields(s.Text()); len(fs) > 1 && strings.HasPrefix(fs[1], d.dir+"/") {
				mounts = append(mounts, fs[1])
			}
		}
		f.Close()
	}
	sort.Sort(sort.Reverse(sort.StringSlice(mounts)))
	for _, m := range mounts {
		_ = syscall.Unmount(m, syscall.MNT_DETACH)
	}
	_ = os.RemoveAll(d.dir)
}

// startRealRuntime starts CRI-O or containerd through test/e2e/runtime.sh
// with extra as the CRI-O-syntax policy drop-in.
func startRealRuntime(extra string) *daemon {
	dir, err := os.MkdirTemp("", "nrig")
	Expect(err).NotTo(HaveOccurred())
	d := &daemon{dir: dir}
	policy := filepath.Join(dir, "e2e-policy.toml")
	Expect(os.WriteFile(policy, []byte(extra), 0o644)).To(Succeed())
	cmd := exec.Command(filepath.Join(repoRoot, "test/e2e/runtime.sh"), "start", dir, policy)
	cmd.Env = append(os.Environ(), "RUNTIME="+e2eRuntime, "TEST_IMAGE="+testImage)
	cmd.Stderr = GinkgoWriter
	out, err := cmd.Output()
	if ee, ok := err.(*exec.ExitError); ok && ee.ExitCode() == 3 {
		_ = os.RemoveAll(dir)
		prereqSkip("runtime " + e2eRuntime + " not available (see the log above)")
	}
	Expect(err).NotTo(HaveOccurred(), "runtime.sh start %s", e2eRuntime)
	DeferCleanup(d.cleanup)
	env := map[string]string{}
	for _, l := range strings.Split(string(out), "\n") {
		if k, v, ok := strings.Cut(l, "="); ok {
			env[k] = v
		}
	}
	d.nriSock = env["NRI_SOCK"]
	d.conn, err = grpc.NewClient("unix://"+env["CRI_SOCK"], grpc.WithTransportCredentials(insecure.NewCredentials()))
	Expect(err).NotTo(HaveOccurred())
	d.rt, d.img = runtimeapi.NewRuntimeServiceClient(d.conn), runtimeapi.NewImageServiceClient(d.conn)
	return d
}

// runPod creates a pod in namespace default.
func (d *daemon) runPod(name string) (string, *runtimeapi.PodSandboxConfig) {
	id, cfg, err := d.newPod(name)
	ExpectWithOffset(1, err).NotTo(HaveOccurred())
	return id, cfg
}
