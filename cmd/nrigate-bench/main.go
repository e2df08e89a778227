// Command nrigate-bench measures what NRI and the admission policy cost end
// to end. In one run it starts bin/nrigate three times, with
//
//	(a) no NRI plugin,
//	(b) one plugin (nri-faulty, ok mode) and no policy,
//	(c) the same plugin required with fail_policy = "fail",
//
// creates and removes -n containers through the CRI socket for each from
// -workers clients, and prints containers/second, p50/p99 create latency
// and the ratios (c)/(b) and (b)/(a). The three configurations run in
// -rounds interleaved rounds so that load changes on a shared machine hit
// all of them alike. (c) is compared with (b) round by round: the median of
// the per-round throughput ratios and the ratio of the p99s over all
// creates, each with a 95 % interval from resampling whole rounds, and a
// verdict against the targets (met, missed, or unsettled: more rounds
// needed).
//
// It then measures the registration_wait release: with the required plugin
// absent a create waits; the plugin is started and the time from its
// "ready <timestamp>" line (printed after Synchronize) to the create
// returning is recorded, -reps times.
//
// -runtimes crio,containerd (or nrigate,crio,containerd) measures the
// patched CRI-O and containerd of -bindir the same way, each configuration
// started by test/e2e/runtime.sh with the BATS suites' config (NRI is on in
// all three there; (a) has no plugin running), and prints the runtimes side
// by side at the end.
//
// It needs root, runc, conmon and busybox-static, like the e2e tests.
package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nrigate/nrigate/internal/critest"
)

// setup is one benchmarked daemon configuration.
type setup struct {
	name   string
	nri    bool // NRI enabled and nri-faulty running
	policy bool // guard required, fail-closed
}

var setups = []setup{
	{name: "a: no plugin"},
	{name: "b: plugin, no policy", nri: true},
	{name: "c: plugin required", nri: true, policy: true},
}

type options struct {
	repo, nrigate, faulty string
	n, workers, rounds    int
	reps                  int
	image                 string
	runtimes, bindir      string
	runtime               string // the one being measured
}

func main() {
	var o options
	flag.StringVar(&o.repo, "repo", ".", "repository root (for hack/make-test-image.sh)")
	flag.StringVar(&o.nrigate, "nrigate", "bin/nrigate", "nrigate binary")
	flag.StringVar(&o.faulty, "faulty", "bin/nri-faulty", "nri-faulty binary")
	flag.IntVar(&o.n, "n", 200, "containers created and removed per configuration and round")
	flag.IntVar(&o.workers, "workers", 4, "concurrent CRI clients")
	flag.IntVar(&o.rounds, "rounds", 11, "interleaved rounds of the three configurations")
	flag.IntVar(&o.reps, "reps", 20, "registration_wait release repetitions (0 skips)")
	flag.StringVar(&o.runtimes, "runtimes", "nrigate", "comma-separated runtimes to measure: nrigate, crio, containerd")
	flag.StringVar(&o.bindir, "bindir", "bin", "directory of the patched crio, pinns, containerd, shim and ctr binaries")
	flag.Parse()
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "nrigate-bench:", err)
		os.Exit(1)
	}
}

func run(o options) error {
	if os.Getuid() != 0 {
		return fmt.Errorf("needs root")
	}
	for _, p := range []*string{&o.nrigate, &o.faulty, &o.repo, &o.bindir} {
		a, err := filepath.Abs(*p)
		if err != nil {
			return err
		}
		*p = a
	}
	dir, err := os.MkdirTemp("", "nrigb")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	o.image = filepath.Join(dir, "busybox.tar")
	if out, err := exec.Command(filepath.Join(o.repo, "hack/make-test-image.sh"), o.image).CombinedOutput(); err != nil {
		return fmt.Errorf("make-test-image: %v: %s", err, out)
	}
	type summary struct {
		runtime string
		med     []result
		cmp     comparison
	}
	var all []summary
	for _, rt := range strings.Split(o.runtimes, ",") {
		o.runtime = strings.TrimSpace(rt)
		med, cmp, err := runOne(o)
		if err != nil {
			return fmt.Errorf("%s: %w", o.runtime, err)
		}
		all = append(all, summary{o.runtime, med, cmp})
	}
	fmt.Printf("\nside by side, %d rounds of %d creates; (c) required ok plugin vs (b) same plugin not required\n", o.rounds, o.n)
	fmt.Println("(ctr/s of the median round; ratio = median of per-round (c)/(b); p99 over all creates; [95 % interval over rounds]):")
	fmt.Printf("  %-11s %10s %10s %22s %11s %11s %22s\n", "runtime", "(b) ctr/s", "(c) ctr/s", "throughput ratio", "(b) p99 ms", "(c) p99 ms", "p99 ratio")
	for _, a := range all {
		b, c, k := a.med[1], a.med[2], a.cmp
		fmt.Printf("  %-11s %10.1f %10.1f %22s %11.2f %11.2f %22s\n", a.runtime, b.rate, c.rate,
			fmt.Sprintf("%.3f [%.3f, %.3f]", k.rate, k.rateLo, k.rateHi), ms(b.p99), ms(c.p99),
			fmt.Sprintf("%.3f [%.3f, %.3f]", k.p99, k.p99Lo, k.p99Hi))
	}
	fmt.Println("  targets: throughput ratio >= 0.97, p99 ratio <= 1.05")
	for _, a := range all {
		fmt.Printf("  %-11s throughput %s, p99 %s\n", a.runtime, verdict(a.cmp.rateLo, a.cmp.rateHi, minThroughputRatio, true),
			verdict(a.cmp.p99Lo, a.cmp.p99Hi, maxP99Ratio, false))
	}
	return nil
}

// The targets of (c) against (b).
const (
	minThroughputRatio = 0.97
	maxP99Ratio        = 1.05
)

// runOne measures o.runtime: the three configurations in interleaved
// rounds, then the registration_wait release. It returns the median rounds
// and the comparison of (c) with (b).
func runOne(o options) ([]result, comparison, error) {
	fmt.Printf("nrigate-bench: runtime=%s n=%d workers=%d rounds=%d (create+remove, containers not started)\n",
		o.runtime, o.n, o.workers, o.rounds)
	results := make([][]result, len(setups))
	for r := range o.rounds {
		// Rotate the order so that no configuration always goes first.
		for k := range setups {
			i := (k + r) % len(setups)
			res, err := benchOne(o, setups[i])
			if err != nil {
				return nil, comparison{}, fmt.Errorf("%s: %w", setups[i].name, err)
			}
			fmt.Printf("round %d %-22s %7.1f ctr/s  create p50 %6.2f ms  p99 %6.2f ms\n", r+1, setups[i].name,
				res.rate, ms(res.p50), ms(res.p99))
			results[i] = append(results[i], res)
		}
	}
	cmp := compare(results[1], results[2], uint64(o.rounds)<<32|uint64(o.n))
	fmt.Println("median round (throughput), p50/p99 over all rounds:")
	med := make([]result, len(setups))
	for i, rs := range results {
		var pooled []time.Duration
		for _, r := range rs {
			pooled = append(pooled, r.lats...)
		}
		rs = slices.Clone(rs)
		sort.Slice(rs, func(a, b int) bool { return rs[a].rate < rs[b].rate })
		med[i] = rs[len(rs)/2]
		// The median round's throughput; p50/p99 over every round's creates
		// (one round's p99 is its 2nd-slowest create: noise).
		med[i].p50, med[i].p99 = percentiles(pooled)
		fmt.Printf("  %-22s %7.1f ctr/s  create p50 %6.2f ms  p99 %6.2f ms\n", setups[i].name, med[i].rate, ms(med[i].p50), ms(med[i].p99))
	}
	fmt.Printf("throughput (c)/(b), median of rounds = %.3f [%.3f, %.3f] (target >= %.2f: %s)\n",
		cmp.rate, cmp.rateLo, cmp.rateHi, minThroughputRatio, verdict(cmp.rateLo, cmp.rateHi, minThroughputRatio, true))
	fmt.Printf("p99 (c)/(b) = %.3f [%.3f, %.3f] (target <= %.2f: %s)   throughput (b)/(a) of median rounds = %.3f\n",
		cmp.p99, cmp.p99Lo, cmp.p99Hi, maxP99Ratio, verdict(cmp.p99Lo, cmp.p99Hi, maxP99Ratio, false), med[1].rate/med[0].rate)
	if o.reps > 0 {
		lat, err := benchRelease(o)
		if err != nil {
			return nil, comparison{}, fmt.Errorf("registration_wait release: %w", err)
		}
		p50, p99 := percentiles(lat)
		fmt.Printf("registration_wait release (plugin ready -> create returns), %d reps: p50 %.2f ms  p99 %.2f ms  max %.2f ms\n",
			len(lat), ms(p50), ms(p99), ms(slices.Max(lat)))
	}
	return med, cmp, nil
}

type result struct {
	rate     float64 // containers created and removed per second
	p50, p99 time.Duration
	lats     []time.Duration
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// percentiles returns the nearest-rank p50 and p99 of ds.
func percentiles(ds []time.Duration) (time.Duration, time.Duration) {
	s := slices.Clone(ds)
	slices.Sort(s)
	rank := func(p float64) time.Duration {
		i := int(p*float64(len(s))+0.999999) - 1
		return s[max(0, min(i, len(s)-1))]
	}
	return rank(0.50), rank(0.99)
}

// daemon is a running nrigate with its CRI client.
type daemon struct {
	dir, nriSock string
	cmd          *exec.Cmd // nil for CRI-O and containerd (script)
	script       string    // test/e2e/runtime.sh for CRI-O and containerd
	conn         *grpc.ClientConn
	rt           runtimeapi.RuntimeServiceClient
	plugin       *exec.Cmd
}

func startDaemon(o options, s setup, regWait string) (*daemon, error) {
	if o.runtime != "nrigate" {
		return startReal(o, s, regWait)
	}
	dir, err := os.MkdirTemp("", "nrigb")
	if err != nil {
		return nil, err
	}
	d := &daemon{dir: dir, nriSock: filepath.Join(dir, "nri.sock")}
	sock := filepath.Join(dir, "cri.sock")
	nri := "enable_nri = false"
	if s.nri {
		nri = fmt.Sprintf(`enable_nri = true
nri_listen = %q
nri_plugin_dir = %[2]q
nri_plugin_config_dir = %[2]q
nri_plugin_request_timeout = "2s"`, d.nriSock, filepath.Join(dir, "plugins"))
	}
	policy := ""
	if s.policy {
		policy = fmt.Sprintf("[crio.nri.policy.plugins.guard]\nfail_policy = \"fail\"\nregistration_wait = %q\n", regWait)
	}
	conf := fmt.Sprintf(`[crio]
root = %q
runroot = %q
[crio.api]
listen = %q
[crio.runtime]
log_level = "warn"
[crio.runtime.runtimes.runc]
runtime_root = %q
[crio.nri]
%s
%s`, filepath.Join(dir, "root"), filepath.Join(dir, "run"), sock, filepath.Join(dir, "runc"), nri, policy)
	if err := os.MkdirAll(filepath.Join(dir, "conf.d"), 0o755); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, "crio.conf"), []byte(conf), 0o644); err != nil {
		return nil, err
	}
	logf, err := os.Create(filepath.Join(dir, "daemon.log"))
	if err != nil {
		return nil, err
	}
	d.cmd = exec.Command(o.nrigate, "-c", filepath.Join(dir, "crio.conf"), "-d", filepath.Join(dir, "conf.d"))
	d.cmd.Stderr = logf
	if err := d.cmd.Start(); err != nil {
		return nil, err
	}
	d.conn, err = grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		d.stop()
		return nil, err
	}
	d.rt = runtimeapi.NewRuntimeServiceClient(d.conn)
	deadline := time.Now().Add(20 * time.Second)
	for {
		_, err := d.rt.Status(context.Background(), &runtimeapi.StatusRequest{})
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			d.stop()
			return nil, fmt.Errorf("daemon did not answer: %w", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	img := runtimeapi.NewImageServiceClient(d.conn)
	if _, err := img.PullImage(context.Background(), &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: "oci-archive:" + o.image}}); err != nil {
		d.stop()
		return nil, err
	}
	return d, nil
}

// startReal starts CRI-O or containerd with test/e2e/runtime.sh (the BATS
// helpers' config); the test image is imported by the script.
func startReal(o options, s setup, regWait string) (*daemon, error) {
	dir, err := os.MkdirTemp("", "nrigb")
	if err != nil {
		return nil, err
	}
	d := &daemon{dir: dir, script: filepath.Join(o.repo, "test/e2e/runtime.sh")}
	policy := ""
	if s.policy {
		policy = fmt.Sprintf("[crio.nri.policy.plugins.guard]\nfail_policy = \"fail\"\nregistration_wait = %q\n", regWait)
	}
	pf := filepath.Join(dir, "bench-policy.toml")
	if err := os.WriteFile(pf, []byte(policy), 0o644); err != nil {
		return nil, err
	}
	cmd := exec.Command(d.script, "start", dir, pf)
	cmd.Env = append(os.Environ(), "RUNTIME="+o.runtime, "TEST_IMAGE="+o.image, "RUNTIME_BINDIR="+o.bindir, "REPO_ROOT="+o.repo)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		d.stop()
		return nil, fmt.Errorf("runtime.sh start %s: %v: %s", o.runtime, err, stderr.String())
	}
	env := map[string]string{}
	for _, l := range strings.Split(string(out), "\n") {
		if k, v, ok := strings.Cut(l, "="); ok {
			env[k] = v
		}
	}
	d.nriSock = env["NRI_SOCK"]
	d.conn, err = grpc.NewClient("unix://"+env["CRI_SOCK"], grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		d.stop()
		return nil, err
	}
	d.rt = runtimeapi.NewRuntimeServiceClient(d.conn)
	return d, nil
}

// startPlugin starts nri-faulty as 10-guard and returns when it printed
// "ready", with the time stamp it printed.
func (d *daemon) startPlugin(o options) (time.Time, error) {
	cmd := exec.Command(o.faulty, "--name", "guard", "--idx", "10", "--socket", d.nriSock,
		"--log-file", filepath.Join(d.dir, "faulty.log"))
	out, err := cmd.StdoutPipe()
	if err != nil {
		return time.Time{}, err
	}
	if err := cmd.Start(); err != nil {
		return time.Time{}, err
	}
	d.plugin = cmd
	ready := make(chan time.Time, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if ts, ok := strings.CutPrefix(sc.Text(), "ready "); ok {
				t, _ := time.Parse(time.RFC3339Nano, ts)
				ready <- t
				break
			}
		}
		_, _ = io.Copy(io.Discard, out)
	}()
	select {
	case t := <-ready:
		return t, nil
	case <-time.After(10 * time.Second):
		d.killPlugin()
		return time.Time{}, fmt.Errorf("nri-faulty never printed ready")
	}
}

func (d *daemon) killPlugin() {
	if d.plugin != nil {
		_ = d.plugin.Process.Kill()
		_ = d.plugin.Wait()
		d.plugin = nil
	}
}

// stop removes the pods, stops the daemon and the plugin, and unmounts what
// is left under the daemon's directory.
func (d *daemon) stop() {
	ctx := context.Background()
	if d.rt != nil {
		if pods, err := d.rt.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{}); err == nil {
			for _, p := range pods.Items {
				_, _ = d.rt.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: p.Id})
				_, _ = d.rt.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: p.Id})
			}
		}
	}
	if d.conn != nil {
		_ = d.conn.Close()
	}
	d.killPlugin()
	if d.cmd == nil {
		if d.script != "" {
			_ = exec.Command(d.script, "stop", d.dir).Run()
		}
		_ = os.RemoveAll(d.dir)
		return
	}
	_ = d.cmd.Process.Signal(syscall.SIGTERM)
	_ = d.cmd.Wait()
	_ = critest.UnmountUnder(d.dir)
	_ = os.RemoveAll(d.dir)
}

func (d *daemon) pod(name string) (string, *runtimeapi.PodSandboxConfig, error) {
	cfg := critest.PodConfig(name, filepath.Join(d.dir, "logs"))
	r, err := d.rt.RunPodSandbox(context.Background(), &runtimeapi.RunPodSandboxRequest{Config: cfg})
	if err != nil {
		return "", nil, err
	}
	return r.PodSandboxId, cfg, nil
}

// createRemove creates and removes one container and returns the create's
// latency.
func (d *daemon) createRemove(podID string, cfg *runtimeapi.PodSandboxConfig, name string) (time.Duration, error) {
	ctx := context.Background()
	t0 := time.Now()
	r, err := d.rt.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{PodSandboxId: podID, SandboxConfig: cfg, Config: critest.ContainerConfig(name)})
	lat := time.Since(t0)
	if err != nil {
		return 0, err
	}
	_, err = d.rt.RemoveContainer(ctx, &runtimeapi.RemoveContainerRequest{ContainerId: r.ContainerId})
	return lat, err
}

func benchOne(o options, s setup) (result, error) {
	d, err := startDaemon(o, s, "10s")
	if err != nil {
		return result{}, err
	}
	defer d.stop()
	if s.nri {
		if _, err := d.startPlugin(o); err != nil {
			return result{}, err
		}
	}
	podID, cfg, err := d.pod("bench")
	if err != nil {
		return result{}, err
	}
	for i := range 10 { // warm-up
		if _, err := d.createRemove(podID, cfg, fmt.Sprintf("warm%d", i)); err != nil {
			return result{}, err
		}
	}
	var (
		mu    sync.Mutex
		lats  []time.Duration
		first error
		wg    sync.WaitGroup
	)
	jobs := make(chan int)
	start := time.Now()
	for range o.workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range jobs {
				lat, err := d.createRemove(podID, cfg, fmt.Sprintf("c%d", i))
				mu.Lock()
				if err != nil && first == nil {
					first = err
				}
				lats = append(lats, lat)
				mu.Unlock()
			}
		}()
	}
	for i := range o.n {
		jobs <- i
	}
	close(jobs)
	wg.Wait()
	el := time.Since(start)
	if first != nil {
		return result{}, first
	}
	p50, p99 := percentiles(lats)
	return result{rate: float64(o.n) / el.Seconds(), p50: p50, p99: p99, lats: lats}, nil
}

// benchRelease measures, reps times, how long a create waiting on
// registration_wait takes to return after the required plugin is ready.
func benchRelease(o options) ([]time.Duration, error) {
	d, err := startDaemon(o, setups[2], "30s")
	if err != nil {
		return nil, err
	}
	defer d.stop()
	podID, cfg, err := d.pod("release")
	if err != nil {
		return nil, err
	}
	var lats []time.Duration
	for i := range o.reps {
		type ret struct {
			at  time.Time
			id  string
			err error
		}
		done := make(chan ret, 1)
		go func() {
			r, err := d.rt.CreateContainer(context.Background(), &runtimeapi.CreateContainerRequest{
				PodSandboxId: podID, SandboxConfig: cfg, Config: critest.ContainerConfig(fmt.Sprintf("r%d", i))})
			var id string
			if r != nil {
				id = r.ContainerId
			}
			done <- ret{time.Now(), id, err}
		}()
		// Let the create reach the wait; it must not return before the
		// plugin is up.
		select {
		case r := <-done:
			return nil, fmt.Errorf("create returned before the plugin started (err %v)", r.err)
		case <-time.After(300 * time.Millisecond):
		}
		readyAt, err := d.startPlugin(o)
		if err != nil {
			return nil, err
		}
		r := <-done
		if r.err != nil {
			return nil, r.err
		}
		lats = append(lats, r.at.Sub(readyAt))
		if _, err := d.rt.RemoveContainer(context.Background(), &runtimeapi.RemoveContainerRequest{ContainerId: r.id}); err != nil {
			return nil, err
		}
		d.killPlugin()
		// Give the daemon time to see the connection drop, so that the
		// next create waits again.
		time.Sleep(300 * time.Millisecond)
	}
	return lats, nil
}
