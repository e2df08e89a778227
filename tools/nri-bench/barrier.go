package main

// nri-bench -barrier: what CRI-O's publication barrier costs. CRI-O blocks
// NRI plugin synchronization (BlockPluginSync, a read lock which a
// registering plugin takes for writing) while a container creation is
// between its relay to plugins and being listed to them. The series held
// the block around the whole creation; it now takes it right before the
// relay. This compares the two in the same run, in two CRI-O daemons of
// the benchmark build (contrib/cri-o/build.sh bench: the series plus
// contrib/cri-o/bench's knobs), with an injected per-create delay before
// the relay (-barrier-delay) standing for the creation's work outside the
// relay (storage, relabelling volumes, mounts, the spec):
//
//   - how long a plugin's registration waits (from its Configure to its
//     Synchronize) while -workers creates are in flight, and without;
//   - the creates' latency with and without a plugin re-registering every
//     -barrier-period, as p99 ratio.
//
// Throughout the creates (with and without re-registrations), a container
// that ignores SIGTERM is stopped over and over with a grace period of
// -barrier-stop-grace, its resources updated while the stop holds it: the
// update waits for the stop, and must not block plugin synchronization
// while it waits, or every registration, and every create behind it, waits
// for the grace period.
//
// Both daemons have NRI on, no policy, and nri-faulty (ok mode) connected,
// so that every relay reaches a plugin. The variants alternate round by
// round, their order rotating.

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/containerd/nri/pkg/api"
	nrilog "github.com/containerd/nri/pkg/log"
	"github.com/containerd/nri/pkg/stub"
	"github.com/sirupsen/logrus"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nrigate/nrigate/test/critest"
)

// barrierVariant is a way CRI-O blocks plugin synchronization.
type barrierVariant struct {
	name string
	env  []string // the benchmark build's knobs
}

// barrierRound is what a round measured of one variant.
type barrierRound struct {
	regBusy, regIdle []time.Duration // registration waits with creates in flight, and without
	busyRegs         []registration  // the registrations with creates in flight
	plain, rereg     result          // creates without and with re-registrations
	reregs           int             // registrations during rereg
}

func runBarrier(o options) error {
	if o.runtime != "crio" {
		return fmt.Errorf("-barrier measures CRI-O's barrier: -runtimes crio")
	}
	// The registrations' connections close under ttrpc's feet: quiet.
	nrilog.Set(quietLogger{})
	logrus.SetOutput(io.Discard)
	knobs := []string{fmt.Sprintf("CRIO_BENCH_CREATE_DELAY=%s", o.barrierDelay), "CRIO_BENCH_LOG_BLOCK=1"}
	variants := []barrierVariant{
		{name: "block around the whole create", env: append(slices.Clone(knobs), "CRIO_BENCH_WHOLE_CREATE_BLOCK=1")},
		{name: "block from the relay (series)", env: knobs},
	}
	if o.barrierListLock {
		variants = append(variants, barrierVariant{name: "relay, listing with state lock", env: append(slices.Clone(knobs), "CRIO_BENCH_LIST_LOCK=1")})
	}
	if o.barrierUpdateAcross {
		variants = append(variants, barrierVariant{name: "update blocked across a stop", env: append(slices.Clone(knobs), "CRIO_BENCH_UPDATE_BLOCK_ACROSS=1")})
	}
	fmt.Printf("nri-bench -barrier: CRI-O (%s), %d rounds; per round and variant %d registrations with %d creates in flight and %d idle, then %d creates from %d clients without and with a plugin re-registering every %s, a container ignoring SIGTERM stopped (grace %s) and updated throughout; %s injected before each relay\n",
		o.bindir, o.rounds, o.barrierRegs, o.workers, o.barrierRegs/2, o.n, o.workers, o.barrierPeriod, o.barrierStopGrace, o.barrierDelay)
	daemons := make([]*daemon, len(variants))
	pods := make([]struct {
		id  string
		cfg *runtimeapi.PodSandboxConfig
	}, len(variants))
	for i, v := range variants {
		d, err := startBenchDaemon(o, v.env)
		if err != nil {
			return fmt.Errorf("%s: %w", v.name, err)
		}
		defer d.stop()
		daemons[i] = d
		if _, err := d.startPlugin(o); err != nil {
			return fmt.Errorf("%s: %w", v.name, err)
		}
		if pods[i].id, pods[i].cfg, err = d.RunPod("barrier"); err != nil {
			return fmt.Errorf("%s: %w", v.name, err)
		}
		// The knobs are in force: a create takes at least the delay.
		lat, _, err := d.createRemove(pods[i].id, pods[i].cfg, "knob-check")
		if err != nil {
			return fmt.Errorf("%s: %w", v.name, err)
		}
		if lat < o.barrierDelay {
			return fmt.Errorf("%s: a create took %s, less than the injected %s: not the benchmark build (make crio-bench)", v.name, lat, o.barrierDelay)
		}
	}
	rounds := make([][]barrierRound, len(variants))
	for r := range o.rounds {
		for k := range variants {
			i := (k + r) % len(variants)
			br, err := barrierRun(o, daemons[i], pods[i].id, pods[i].cfg, r)
			if err != nil {
				return fmt.Errorf("round %d, %s: %w", r+1, variants[i].name, err)
			}
			p50b, _ := percentiles(br.regBusy)
			p50i, _ := percentiles(br.regIdle)
			_, p99p := percentiles(br.plain.lats)
			_, p99r := percentiles(br.rereg.lats)
			fmt.Printf("round %2d %-31s registration wait p50 %7.2f ms (idle %5.2f ms)  create p99 %7.2f ms, %7.2f ms re-registering (%d registrations)\n",
				r+1, variants[i].name, ms(p50b), ms(p50i), ms(p99p), ms(p99r), br.reregs)
			rounds[i] = append(rounds[i], br)
		}
	}
	fmt.Printf("\nbarrier: %d rounds; injected %s before each relay; %d creates in flight while a plugin registers\n", o.rounds, o.barrierDelay, o.workers)
	fmt.Printf("  %-31s %12s %12s %12s %12s %12s %24s\n", "variant", "reg p50 ms", "reg p99 ms", "reg max ms", "idle p50 ms", "create p50", "create p99 ratio (rereg)")
	cmps := make([]comparison, len(variants))
	for i, v := range variants {
		var busy, idle, plain []time.Duration
		var pl, rr []result
		for k, br := range rounds[i] {
			busy = append(busy, br.regBusy...)
			idle = append(idle, br.regIdle...)
			plain = append(plain, br.plain.lats...)
			pl, rr = append(pl, rounds[i][k].plain), append(rr, rounds[i][k].rereg)
		}
		cmps[i] = compare(pl, rr, uint64(o.rounds)<<32|uint64(i))
		b50, b99 := percentiles(busy)
		i50, _ := percentiles(idle)
		c50, _ := percentiles(plain)
		fmt.Printf("  %-31s %12.2f %12.2f %12.2f %12.2f %12.2f %24s\n", v.name, ms(b50), ms(b99), ms(slices.Max(busy)), ms(i50), ms(c50),
			fmt.Sprintf("%.3f [%.3f, %.3f]", cmps[i].p99, cmps[i].p99Lo, cmps[i].p99Hi))
	}
	for i, v := range variants {
		held, err := blockHolds(daemons[i])
		if err != nil {
			return err
		}
		p50, p99 := percentiles(held)
		fmt.Printf("  %-31s a create held the block: p50 %.2f ms, p99 %.2f ms, max %.2f ms (%d creates)\n",
			v.name, ms(p50), ms(p99), ms(slices.Max(held)), len(held))
		starts, err := syncStarts(daemons[i])
		if err != nil {
			return err
		}
		var regs []registration
		for _, br := range rounds[i] {
			regs = append(regs, br.busyRegs...)
		}
		sends, err := logTimes(daemons[i], "synchronizing plugin 90-registrar")
		if err != nil {
			return err
		}
		before, listing, request := splitWaits(regs, starts, sends)
		if len(before) > 0 {
			b50, b99 := percentiles(before)
			l50, l99 := percentiles(listing)
			r50, r99 := percentiles(request)
			fmt.Printf("  %-31s registration wait, p50/p99 ms: until the sync callback starts %.2f/%.2f, its listing %.2f/%.2f, Synchronize reaching the plugin %.2f/%.2f (%d of %d registrations)\n",
				v.name, ms(b50), ms(b99), ms(l50), ms(l99), ms(r50), ms(r99), len(before), len(regs))
		}
	}
	ratio, lo, hi := medianRatio(rounds[0], rounds[1], uint64(o.rounds))
	fmt.Printf("  registration wait, whole create / relay: median of per-round p50 ratios %.2f [%.2f, %.2f]\n", ratio, lo, hi)
	fmt.Printf("  target: create p99 ratio <= %.2f with the series' block: %s\n", maxP99Ratio,
		verdict(cmps[1].p99Lo, cmps[1].p99Hi, maxP99Ratio, false))
	return nil
}

// startBenchDaemon starts CRI-O of the benchmark build with env, NRI on and
// no policy.
func startBenchDaemon(o options, env []string) (*daemon, error) {
	return launchDaemon(o, critest.Options{Env: env})
}

// barrierRun measures one round of one variant's daemon.
func barrierRun(o options, d *daemon, podID string, cfg *runtimeapi.PodSandboxConfig, round int) (barrierRound, error) {
	var br barrierRound
	// Registrations with no create in flight.
	for range o.barrierRegs / 2 {
		w, err := register(d, 0)
		if err != nil {
			return br, err
		}
		br.regIdle = append(br.regIdle, w)
	}
	// Registrations with o.workers creates in flight, at random moments.
	var err error
	rng := rand.New(rand.NewPCG(uint64(round), 0x6261727269657220))
	err = withCreates(o, d, podID, cfg, fmt.Sprintf("r%d-busy", round), -1, nil, func(<-chan struct{}) error {
		for range o.barrierRegs {
			time.Sleep(time.Duration(rng.Int64N(int64(o.barrierPeriod))))
			reg, err := registerAt(d, 0)
			if err != nil {
				return err
			}
			br.regBusy = append(br.regBusy, reg.synced.Sub(reg.configured))
			br.busyRegs = append(br.busyRegs, reg)
		}
		return nil
	})
	if err != nil {
		return br, err
	}
	// Creates without and with a plugin re-registering, in rotating order,
	// with a stop of a container ignoring SIGTERM in the mix.
	stopStopper, stopperDone := startStopper(o, d, podID, cfg, fmt.Sprintf("r%d-stop", round))
	defer func() {
		stopStopper()
		<-stopperDone
	}()
	for k := range 2 {
		rereg := (k+round)%2 == 1
		var res result
		var regs atomic.Int64
		var f func(<-chan struct{}) error
		if rereg {
			f = func(stop <-chan struct{}) error { return reregisterLoop(d, o.barrierPeriod, &regs, stop) }
		}
		if err := withCreates(o, d, podID, cfg, fmt.Sprintf("r%d-%d", round, k), o.n, &res, f); err != nil {
			return br, err
		}
		if rereg {
			br.rereg, br.reregs = res, int(regs.Load())
		} else {
			br.plain = res
		}
	}
	stopStopper()
	if err := <-stopperDone; err != nil {
		return br, fmt.Errorf("stopper: %w", err)
	}
	stopperDone = closedErr
	return br, nil
}

// closedErr is a channel that has an error, nil, for every receive.
var closedErr = func() chan error { c := make(chan error); close(c); return c }()

// sigtermIgnoringCommand is the command of the stopper's container: sh as
// PID 1, ignoring SIGTERM.
var sigtermIgnoringCommand = []string{"sh", "-c", "trap '' TERM; while true; do sleep 1; done"}

// startStopper starts the stopper: until stopped, it creates and starts a
// container that ignores SIGTERM, stops it with a grace period of
// o.barrierStopGrace and at the same time updates its resources (the update
// waits for the stop), then removes it. With no
// grace period there is no stopper. It returns the stop function and a
// channel with the stopper's error once it stopped.
func startStopper(o options, d *daemon, podID string, cfg *runtimeapi.PodSandboxConfig, prefix string) (func(), chan error) {
	done := make(chan error, 1)
	if o.barrierStopGrace <= 0 {
		done <- nil
		return func() {}, done
	}
	stop := make(chan struct{})
	var once sync.Once
	go func() {
		ctx := context.Background()
		for i := 0; ; i++ {
			select {
			case <-stop:
				done <- nil
				return
			default:
			}
			r, err := d.RT.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{PodSandboxId: podID, SandboxConfig: cfg,
				Config: critest.ContainerConfig(fmt.Sprintf("%s-%d", prefix, i), sigtermIgnoringCommand...)})
			if err != nil {
				done <- err
				return
			}
			if _, err := d.RT.StartContainer(ctx, &runtimeapi.StartContainerRequest{ContainerId: r.ContainerId}); err != nil {
				done <- err
				return
			}
			// The update and the stop at once: an update relayed before the
			// stop took the container's lock waits for the stop after its
			// relay, for the grace period (one that comes later waits before
			// its relay). Its error (the container stopped meanwhile) does
			// not matter.
			stopped := make(chan error, 1)
			updated := make(chan struct{})
			go func() {
				defer close(updated)
				_, _ = d.RT.UpdateContainerResources(ctx, &runtimeapi.UpdateContainerResourcesRequest{ContainerId: r.ContainerId,
					Linux: &runtimeapi.LinuxContainerResources{CpuShares: 512}})
			}()
			go func() {
				_, err := d.RT.StopContainer(ctx, &runtimeapi.StopContainerRequest{ContainerId: r.ContainerId,
					Timeout: int64(o.barrierStopGrace / time.Second)})
				stopped <- err
			}()
			if err := <-stopped; err != nil {
				done <- err
				return
			}
			<-updated
			if _, err := d.RT.RemoveContainer(ctx, &runtimeapi.RemoveContainerRequest{ContainerId: r.ContainerId}); err != nil {
				done <- err
				return
			}
		}
	}()
	return func() { once.Do(func() { close(stop) }) }, done
}

// withCreates creates and removes containers from o.workers clients and,
// once each client has created one (the creates are in flight), runs f
// until it returns or is stopped: with n < 0 the clients create until f
// returns, otherwise n containers, and then f is stopped. The creates'
// latencies go to res.
func withCreates(o options, d *daemon, podID string, cfg *runtimeapi.PodSandboxConfig, prefix string, n int, res *result, f func(stop <-chan struct{}) error) error {
	var (
		mu      sync.Mutex
		first   error
		lats    []time.Duration
		busy    time.Duration
		wg      sync.WaitGroup
		warm    sync.WaitGroup
		next    atomic.Int64
		stopped atomic.Bool
		stopF   = make(chan struct{})
		fErr    = make(chan error, 1)
	)
	warm.Add(o.workers)
	for w := range o.workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var once sync.Once
			defer once.Do(warm.Done)
			for {
				i := next.Add(1)
				if (n >= 0 && i > int64(n)) || (n < 0 && stopped.Load()) {
					return
				}
				lat, b, err := d.createRemove(podID, cfg, fmt.Sprintf("%s-%d-%d", prefix, w, i))
				mu.Lock()
				if err != nil && first == nil {
					first = err
				}
				lats = append(lats, lat)
				busy += b
				mu.Unlock()
				once.Do(warm.Done)
			}
		}()
	}
	if f == nil {
		fErr <- nil
	} else {
		warm.Wait()
		go func() { fErr <- f(stopF) }()
	}
	var err error
	if n < 0 {
		err = <-fErr
		stopped.Store(true)
		wg.Wait()
	} else {
		wg.Wait()
		close(stopF)
		err = <-fErr
	}
	if err != nil {
		return err
	}
	if first != nil {
		return first
	}
	if res != nil {
		p50, p99 := percentiles(lats)
		*res = result{rate: float64(o.workers) * float64(len(lats)) / busy.Seconds(), p50: p50, p99: p99, lats: lats}
	}
	return nil
}

// reregisterLoop registers a plugin every period until stop: it connects,
// is synchronized, stays connected until period after it connected, and
// disconnects.
func reregisterLoop(d *daemon, period time.Duration, regs *atomic.Int64, stop <-chan struct{}) error {
	for {
		select {
		case <-stop:
			return nil
		default:
		}
		start := time.Now()
		if _, err := register(d, period); err != nil {
			return err
		}
		regs.Add(1)
		select {
		case <-stop:
			return nil
		case <-time.After(time.Until(start.Add(period))):
		}
	}
}

// registrar is an NRI plugin which records when it is configured and
// synchronized.
type registrar struct {
	configured, synced time.Time
	done               chan struct{}
}

func (p *registrar) Configure(_ context.Context, _, _, _ string) (api.EventMask, error) {
	p.configured = time.Now()
	return 0, nil
}

func (p *registrar) Synchronize(_ context.Context, _ []*api.PodSandbox, _ []*api.Container) ([]*api.ContainerUpdate, error) {
	p.synced = time.Now()
	close(p.done)
	return nil, nil
}

// RemovePodSandbox subscribes the registrar to an event the benchmark does
// not cause (the NRI stub wants one): it takes part in no relay.
func (p *registrar) RemovePodSandbox(context.Context, *api.PodSandbox) error { return nil }

// registration is when a registering plugin was configured and
// synchronized.
type registration struct{ configured, synced time.Time }

// register is registerAt's wait from configuration to synchronization.
func register(d *daemon, stay time.Duration) (time.Duration, error) {
	r, err := registerAt(d, stay)
	return r.synced.Sub(r.configured), err
}

// registerAt connects a plugin to d, waits until it is synchronized, keeps
// it connected for stay, disconnects it and returns when it was configured
// and synchronized.
func registerAt(d *daemon, stay time.Duration) (registration, error) {
	p := &registrar{done: make(chan struct{})}
	s, err := stub.New(p, stub.WithPluginName("registrar"), stub.WithPluginIdx("90"), stub.WithSocketPath(d.NRISock))
	if err != nil {
		return registration{}, err
	}
	if err := s.Start(context.Background()); err != nil {
		return registration{}, err
	}
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		s.Stop()
		return registration{}, fmt.Errorf("plugin not synchronized in 30s")
	}
	time.Sleep(stay - time.Since(p.configured))
	s.Stop()
	s.Wait()
	return registration{p.configured, p.synced}, nil
}

// syncStarts returns when d's sync callback started synchronizing a plugin
// (internal/nri's log line, once it holds plugin synchronization's block
// and its own lock), from its log.
func syncStarts(d *daemon) ([]time.Time, error) {
	return logTimes(d, "Synchronizing NRI (plugin) with current runtime state")
}

// logTimes returns the time stamps of d's log lines which contain text.
func logTimes(d *daemon, text string) ([]time.Time, error) {
	data, err := os.ReadFile(filepath.Join(d.Dir, "daemon.log"))
	if err != nil {
		return nil, err
	}
	var at []time.Time
	for _, l := range strings.Split(string(data), "\n") {
		if !strings.Contains(l, text) {
			continue
		}
		ts, _, ok := strings.Cut(strings.TrimPrefix(l, `time="`), `"`)
		if !ok {
			continue
		}
		t, err := time.Parse(time.RFC3339Nano, ts)
		if err != nil {
			return nil, fmt.Errorf("daemon.log: %q: %w", l, err)
		}
		at = append(at, t)
	}
	return at, nil
}

// splitWaits splits each registration's wait at its sync callback's start
// and at NRI sending the plugin its Synchronize: the wait for the block and
// the callback's lock, the callback listing the pods and containers, and
// the Synchronize request reaching the plugin.
func splitWaits(regs []registration, starts, sends []time.Time) (before, listing, request []time.Duration) {
	within := func(ts []time.Time, from, to time.Time) (time.Time, bool) {
		for _, t := range ts {
			if !t.Before(from) && !t.After(to) {
				return t, true
			}
		}
		return time.Time{}, false
	}
	for _, r := range regs {
		t1, ok1 := within(starts, r.configured, r.synced)
		if !ok1 {
			continue
		}
		t2, ok2 := within(sends, t1, r.synced)
		if !ok2 {
			continue
		}
		before = append(before, t1.Sub(r.configured))
		listing = append(listing, t2.Sub(t1))
		request = append(request, r.synced.Sub(t2))
	}
	return before, listing, request
}

// medianRatio is the median over rounds of a's registration wait p50
// divided by b's, with its 95 % bootstrap interval over rounds.
func medianRatio(a, b []barrierRound, seed uint64) (float64, float64, float64) {
	n := min(len(a), len(b))
	ratios := make([]float64, n)
	for i := range n {
		pa, _ := percentiles(a[i].regBusy)
		pb, _ := percentiles(b[i].regBusy)
		ratios[i] = float64(pa) / float64(pb)
	}
	m := median(ratios)
	if n < 2 {
		return m, m, m
	}
	rng := rand.New(rand.NewPCG(seed, 0x726174696f))
	meds := make([]float64, bootstrapResamples)
	s := make([]float64, n)
	for r := range meds {
		for k := range s {
			s[k] = ratios[rng.IntN(n)]
		}
		meds[r] = median(s)
	}
	lo, hi := interval95(meds)
	return m, lo, hi
}

// blockHolds returns how long each container creation of d blocked plugin
// synchronization, from the benchmark build's log lines.
func blockHolds(d *daemon) ([]time.Duration, error) {
	data, err := os.ReadFile(filepath.Join(d.Dir, "daemon.log"))
	if err != nil {
		return nil, err
	}
	var held []time.Duration
	for _, l := range strings.Split(string(data), "\n") {
		_, after, ok := strings.Cut(l, "Bench: plugin sync blocked for ")
		if !ok {
			continue
		}
		v, err := time.ParseDuration(strings.TrimSuffix(after, "\""))
		if err != nil {
			return nil, fmt.Errorf("daemon.log: %q: %w", l, err)
		}
		held = append(held, v)
	}
	if len(held) == 0 {
		return nil, fmt.Errorf("%s/daemon.log: no block durations: not the benchmark build", d.Dir)
	}
	return held, nil
}

// quietLogger discards the NRI stub's log lines of the registrations.
type quietLogger struct{}

func (quietLogger) Debugf(context.Context, string, ...any) {}
func (quietLogger) Infof(context.Context, string, ...any)  {}
func (quietLogger) Warnf(context.Context, string, ...any)  {}
func (quietLogger) Errorf(context.Context, string, ...any) {}
