// Command nri-bench measures what NRI and the admission policy cost end to
// end in patched CRI-O and containerd. For each runtime of -runtimes
// (crio, containerd) it measures
//
//	(a) NRI off (enable_nri = false / disable = true),
//	(b) NRI on, one plugin (nri-faulty, ok mode) running, the pod not in
//	    the scope of any required plugin,
//	(c) the same plugin required with fail_policy = "fail" for the pod,
//
// each set through the runtime's own config: test/e2e/runtime.sh writes it
// with the runtime's config script (contrib/cri-o/crio-test-config.sh,
// contrib/containerd/containerd-test-config.sh) as the BATS suites do.
// (a) runs in a daemon of its own. (b) and (c) share one daemon whose
// policy requires the plugin in one namespace only, with a pod outside and
// a pod inside it, and the creates alternate between the two pods: both
// see the same daemon at the same moment, so that the policy's cost is not
// lost in how much one daemon start differs from the next. It creates and
// removes -n containers per configuration through the CRI socket from
// -workers clients, and prints the throughput (workers / mean create+remove
// time: what the configuration sustains on its own), p50/p99 create latency
// and the ratios (c)/(b) and (b)/(a). The daemons run in -rounds rounds in
// rotating order. (c) is compared with (b) round by round: the median of
// the per-round throughput ratios and the ratio of the p99s over all
// creates, each with a 95 % interval from resampling whole rounds, and a
// verdict against the targets (met, missed, or unsettled: more rounds
// needed).
//
// It then measures the registration_wait release: with the required plugin
// absent a create waits; the plugin is started and the time from its
// "ready <timestamp>" line (printed after Synchronize) to the create
// returning is recorded, -reps times. Each runtime is measured once, in the
// order given, and the runtimes are printed side by side at the end.
//
// With -barrier it measures CRI-O's publication barrier instead, on the
// benchmark build bin/crio-bench (barrier.go, make bench-barrier).
//
// It needs root, runc, conmon, busybox-static, jq, `make build` and the
// runtimes' builds (make crio containerd), like the suites.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nrigate/nrigate/test/critest"
)

// gatedNamespace is the only namespace in which the daemon of (b) and (c)
// requires the plugin.
const gatedNamespace = "nri-bench-gated"

// setup is one benchmarked configuration: a pod in a daemon.
type setup struct {
	name      string
	namespace string
}

var setups = []setup{
	{name: "a: NRI off", namespace: "default"},
	{name: "b: plugin, not required", namespace: "default"},
	{name: "c: plugin required", namespace: gatedNamespace},
}

// daemonRun is a daemon started for a round and the setups measured in it.
type daemonRun struct {
	nri    bool  // NRI on and nri-faulty running
	setups []int // indexes into setups
}

// daemonRuns are the daemons of a round: (a) alone, (b) and (c) side by side.
var daemonRuns = []daemonRun{{setups: []int{0}}, {nri: true, setups: []int{1, 2}}}

type options struct {
	repo, faulty       string
	n, workers, rounds int
	reps               int
	image              string
	runtimes, bindir   string
	runtime            string // the one being measured
	// -barrier: CRI-O's publication barrier (barrier.go).
	barrier                     bool
	barrierDelay, barrierPeriod time.Duration
	barrierRegs                 int
	barrierListLock             bool
	barrierStopGrace            time.Duration
	barrierUpdateAcross         bool
}

func main() {
	var o options
	flag.StringVar(&o.repo, "repo", ".", "repository root (for hack/make-test-image.sh)")
	flag.StringVar(&o.faulty, "faulty", "bin/nri-faulty", "nri-faulty binary")
	flag.IntVar(&o.n, "n", 200, "containers created and removed per configuration and round")
	flag.IntVar(&o.workers, "workers", 4, "concurrent CRI clients")
	flag.IntVar(&o.rounds, "rounds", 11, "interleaved rounds of the three configurations")
	flag.IntVar(&o.reps, "reps", 20, "registration_wait release repetitions (0 skips)")
	flag.StringVar(&o.runtimes, "runtimes", "crio", "comma-separated runtimes to measure, each once: crio, containerd")
	flag.StringVar(&o.bindir, "bindir", "bin", "directory of the patched crio, pinns, containerd, shim and ctr binaries (with -barrier: bin/crio-bench)")
	flag.BoolVar(&o.barrier, "barrier", false, "measure CRI-O's publication barrier instead (barrier.go; make crio-bench builds bin/crio-bench)")
	flag.DurationVar(&o.barrierDelay, "barrier-delay", 100*time.Millisecond, "-barrier: the per-create cost injected before the relay")
	flag.DurationVar(&o.barrierPeriod, "barrier-period", 100*time.Millisecond, "-barrier: how often a plugin re-registers")
	flag.IntVar(&o.barrierRegs, "barrier-regs", 10, "-barrier: registrations per round and variant with creates in flight (half as many idle)")
	flag.BoolVar(&o.barrierListLock, "barrier-listlock", false, "-barrier: add a third daemon, the series' block with containers listed to plugins under their state lock, as the series did before (what that lock costs)")
	flag.BoolVar(&o.barrierUpdateAcross, "barrier-update-across", false, "-barrier: add a daemon whose container updates keep plugin synchronization blocked across the runtime's update, which waits for a stop, as the series did before (what that costs)")
	flag.DurationVar(&o.barrierStopGrace, "barrier-stop-grace", 3*time.Second, "-barrier: the grace period of the stop of a container ignoring SIGTERM, stopped and updated throughout the creates (0: none)")
	flag.Parse()
	if o.barrier && !isFlagSet("bindir") {
		o.bindir = "bin/crio-bench"
	}
	if o.barrier && !isFlagSet("workers") {
		o.workers = 8
	}
	go stopOnSignal()
	err := run(o)
	// An interrupted run fails here while stopOnSignal still stops the
	// daemons: let it finish, and exit.
	running.Lock()
	if err != nil {
		fmt.Fprintln(os.Stderr, "nri-bench:", err)
		os.Exit(1)
	}
}

func run(o options) error {
	if os.Getuid() != 0 {
		return fmt.Errorf("needs root")
	}
	for _, p := range []*string{&o.faulty, &o.repo, &o.bindir} {
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
	running.Lock()
	running.workDir = dir
	running.Unlock()
	o.image = filepath.Join(dir, "busybox.tar")
	if out, err := exec.Command(filepath.Join(o.repo, "hack/make-test-image.sh"), o.image).CombinedOutput(); err != nil {
		return fmt.Errorf("make-test-image: %v: %s", err, out)
	}
	if o.barrier {
		o.runtime = "crio"
		return runBarrier(o)
	}
	type summary struct {
		runtime string
		med     []result
		cmp     comparison
	}
	var all []summary
	seen := map[string]bool{}
	for _, rt := range strings.Split(o.runtimes, ",") {
		o.runtime = strings.TrimSpace(rt)
		if o.runtime != "crio" && o.runtime != "containerd" {
			return fmt.Errorf("-runtimes: %q is not crio or containerd", o.runtime)
		}
		if seen[o.runtime] {
			return fmt.Errorf("-runtimes: %s named twice", o.runtime)
		}
		seen[o.runtime] = true
		med, cmp, err := runOne(o)
		if err != nil {
			return fmt.Errorf("%s: %w", o.runtime, err)
		}
		all = append(all, summary{o.runtime, med, cmp})
	}
	fmt.Printf("\nside by side, %d rounds of %d creates each; (c) a pod the ok plugin is required for vs (b) a pod it is not required for, in the same daemon\n", o.rounds, o.n)
	fmt.Println("(ctr/s of the median round: workers / mean create+remove time; ratio = median of per-round (c)/(b); p99 over all creates; [95 % interval over rounds]):")
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

// isFlagSet reports whether the flag was given on the command line.
func isFlagSet(name string) bool {
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

// The targets of (c) against (b).
const (
	minThroughputRatio = 0.97
	maxP99Ratio        = 1.05
)

// runOne measures o.runtime: the three configurations in rounds, then the
// registration_wait release. It returns the median rounds and the
// comparison of (c) with (b).
func runOne(o options) ([]result, comparison, error) {
	fmt.Printf("nri-bench: runtime=%s n=%d workers=%d rounds=%d (create+remove, containers not started)\n",
		o.runtime, o.n, o.workers, o.rounds)
	results := make([][]result, len(setups))
	for r := range o.rounds {
		// Rotate the order so that no daemon always goes first.
		for k := range daemonRuns {
			dr := daemonRuns[(k+r)%len(daemonRuns)]
			res, err := benchRun(o, dr)
			if err != nil {
				return nil, comparison{}, fmt.Errorf("round %d: %w", r+1, err)
			}
			for j, i := range dr.setups {
				fmt.Printf("round %d %-25s %7.1f ctr/s  create p50 %6.2f ms  p99 %6.2f ms\n", r+1, setups[i].name,
					res[j].rate, ms(res[j].p50), ms(res[j].p99))
				results[i] = append(results[i], res[j])
			}
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
		fmt.Printf("  %-25s %7.1f ctr/s  create p50 %6.2f ms  p99 %6.2f ms\n", setups[i].name, med[i].rate, ms(med[i].p50), ms(med[i].p99))
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
	// rate is the containers created and removed per second the
	// configuration sustains on its own: workers / mean create+remove time.
	rate     float64
	p50, p99 time.Duration
	lats     []time.Duration // create latencies
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

// daemon is a runtime started for one configuration, with the plugin.
type daemon struct {
	*critest.Runtime
	plugin *critest.Plugin
}

// running are the daemons started and not yet stopped: an interrupted run
// stops them rather than leave a runtime, its containers and its mounts
// behind.
var running = struct {
	sync.Mutex
	daemons map[*daemon]bool
	workDir string // the test image's directory
}{daemons: map[*daemon]bool{}}

// stopOnSignal stops the running daemons on SIGINT or SIGTERM, then exits.
// It holds running's lock to the end, so that neither main's exit nor a
// daemon's own stop gets in its way.
func stopOnSignal() {
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	s := <-sig
	fmt.Fprintf(os.Stderr, "nri-bench: %v: stopping the runtimes it started\n", s)
	running.Lock()
	for d := range running.daemons {
		d.stopNow()
	}
	if running.workDir != "" {
		_ = os.RemoveAll(running.workDir)
	}
	os.Exit(130)
}

// guardPolicy requires the plugin guard, fail-closed, in namespace (every
// namespace when empty), in CRI-O's syntax (the containerd config script
// converts it).
func guardPolicy(regWait, namespace string) string {
	p := fmt.Sprintf("[crio.nri.required_plugins.\"guard\"]\nfail_policy = \"fail\"\nregistration_wait = %q\n", regWait)
	if namespace != "" {
		p += fmt.Sprintf("namespaces = [%q]\n", namespace)
	}
	return p
}

// startDaemon starts the runtime with NRI on or off and policy.
func startDaemon(o options, nri bool, policy string) (*daemon, error) {
	return launchDaemon(o, critest.Options{Policy: policy, NRIOff: !nri})
}

// launchDaemon starts the runtime with opts, completed with the runtime,
// image and binaries of o, in a new directory, and records it so that an
// interrupted run stops it.
func launchDaemon(o options, opts critest.Options) (*daemon, error) {
	dir, err := os.MkdirTemp("", "nrigb")
	if err != nil {
		return nil, err
	}
	opts.Repo, opts.Runtime, opts.Dir, opts.Image, opts.BinDir = o.repo, o.runtime, dir, o.image, o.bindir
	var stderr strings.Builder
	r, err := critest.Start(opts, &stderr)
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("%w: %s", err, stderr.String())
	}
	d := &daemon{Runtime: r}
	running.Lock()
	running.daemons[d] = true
	running.Unlock()
	return d, nil
}

// startPlugin starts nri-faulty as 10-guard and returns when it printed
// "ready", with the time stamp it printed.
func (d *daemon) startPlugin(o options) (time.Time, error) {
	p, err := critest.StartPlugin(o.faulty, d.NRISock, filepath.Join(d.Dir, "faulty.log"), 10*time.Second,
		"--name", "guard", "--idx", "10")
	if err != nil {
		return time.Time{}, err
	}
	d.plugin = p
	return p.Ready, nil
}

func (d *daemon) killPlugin() {
	if d.plugin != nil {
		d.plugin.Kill()
		d.plugin = nil
	}
}

// stop stops the plugin and the runtime and removes its directory.
func (d *daemon) stop() {
	running.Lock()
	delete(running.daemons, d)
	running.Unlock()
	d.stopNow()
}

// stopNow stops the daemon without updating running (stopOnSignal holds it).
func (d *daemon) stopNow() {
	d.killPlugin()
	if err := d.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "nri-bench:", err)
	}
	_ = os.RemoveAll(d.Dir)
}

// createRemove creates and removes one container and returns the create's
// latency and the time of both.
func (d *daemon) createRemove(podID string, cfg *runtimeapi.PodSandboxConfig, name string) (time.Duration, time.Duration, error) {
	ctx := context.Background()
	t0 := time.Now()
	r, err := d.RT.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{PodSandboxId: podID, SandboxConfig: cfg, Config: critest.ContainerConfig(name)})
	lat := time.Since(t0)
	if err != nil {
		return 0, 0, err
	}
	_, err = d.RT.RemoveContainer(ctx, &runtimeapi.RemoveContainerRequest{ContainerId: r.ContainerId})
	return lat, time.Since(t0), err
}

// benchRun starts the daemon of dr, with a pod for each of its setups,
// and creates and removes o.n containers in each pod from o.workers
// clients, the pods taking turns. It returns a result per setup.
func benchRun(o options, dr daemonRun) ([]result, error) {
	policy := ""
	if dr.nri {
		policy = guardPolicy("0s", gatedNamespace)
	}
	d, err := startDaemon(o, dr.nri, policy)
	if err != nil {
		return nil, err
	}
	defer d.stop()
	type pod struct {
		id   string
		cfg  *runtimeapi.PodSandboxConfig
		lats []time.Duration
		busy time.Duration // create+remove time of all its containers
	}
	pods := make([]*pod, len(dr.setups))
	for j, i := range dr.setups {
		id, cfg, err := d.RunPodIn(fmt.Sprintf("bench%d", i), setups[i].namespace)
		if err != nil {
			return nil, err
		}
		pods[j] = &pod{id: id, cfg: cfg}
	}
	if dr.nri {
		// Before the plugin starts, the policy must refuse the create in
		// (c)'s pod and let (b)'s through, or the two measure the same.
		for j, i := range dr.setups {
			_, _, err := d.createRemove(pods[j].id, pods[j].cfg, "scope-check")
			if refused := status.Code(err) == codes.FailedPrecondition; refused != (setups[i].namespace == gatedNamespace) {
				return nil, fmt.Errorf("%s: create without the plugin: %v; the policy does not scope as configured", setups[i].name, err)
			}
		}
		if _, err := d.startPlugin(o); err != nil {
			return nil, err
		}
	}
	for _, p := range pods {
		for w := range 10 { // warm-up
			if _, _, err := d.createRemove(p.id, p.cfg, fmt.Sprintf("warm%d", w)); err != nil {
				return nil, err
			}
		}
	}
	var (
		mu    sync.Mutex
		first error
		wg    sync.WaitGroup
	)
	jobs := make(chan int)
	for range o.workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range jobs {
				p := pods[i%len(pods)]
				lat, busy, err := d.createRemove(p.id, p.cfg, fmt.Sprintf("c%d", i))
				mu.Lock()
				if err != nil && first == nil {
					first = err
				}
				p.lats = append(p.lats, lat)
				p.busy += busy
				mu.Unlock()
			}
		}()
	}
	for i := range o.n * len(pods) {
		jobs <- i
	}
	close(jobs)
	wg.Wait()
	if first != nil {
		return nil, first
	}
	res := make([]result, len(pods))
	for j, p := range pods {
		p50, p99 := percentiles(p.lats)
		res[j] = result{rate: float64(o.workers) * float64(len(p.lats)) / p.busy.Seconds(), p50: p50, p99: p99, lats: p.lats}
	}
	return res, nil
}

// benchRelease measures, reps times, how long a create waiting on
// registration_wait takes to return after the required plugin is ready.
func benchRelease(o options) ([]time.Duration, error) {
	d, err := startDaemon(o, true, guardPolicy("30s", ""))
	if err != nil {
		return nil, err
	}
	defer d.stop()
	podID, cfg, err := d.RunPod("release")
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
		before, err := d.CreatesLogged()
		if err != nil {
			return nil, err
		}
		done := make(chan ret, 1)
		go func() {
			r, err := d.RT.CreateContainer(context.Background(), &runtimeapi.CreateContainerRequest{
				PodSandboxId: podID, SandboxConfig: cfg, Config: critest.ContainerConfig(fmt.Sprintf("r%d", i))})
			var id string
			if r != nil {
				id = r.ContainerId
			}
			done <- ret{time.Now(), id, err}
		}()
		// The create has reached the runtime (its log says so); it must
		// not return before the plugin is up.
		if err := critest.Await(10*time.Second, "the create reaching the runtime", func() (bool, error) {
			n, err := d.CreatesLogged()
			return n > before, err
		}); err != nil {
			return nil, err
		}
		select {
		case r := <-done:
			return nil, fmt.Errorf("create returned before the plugin started (err %v)", r.err)
		default:
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
		if _, err := d.RT.RemoveContainer(context.Background(), &runtimeapi.RemoveContainerRequest{ContainerId: r.id}); err != nil {
			return nil, err
		}
		d.killPlugin()
		// The runtime has seen the connection drop: the next create waits again.
		if err := critest.Await(10*time.Second, "NRIPluginsReady=false after the plugin's exit", func() (bool, error) {
			ready, found, err := d.Condition("NRIPluginsReady")
			return found && !ready, err
		}); err != nil {
			return nil, err
		}
	}
	return lats, nil
}
