package e2e

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nrigate/nrigate/internal/critest"
)

// guardPolicy makes plugin guard required for every pod, fail-closed.
const guardPolicy = `[crio.nri.policy.plugins.guard]
fail_policy = "fail"
registration_wait = "10s"
`

// startFaulty runs bin/nri-faulty as 10-guard with extra args and waits
// until it printed "ready" (it has synchronized with the daemon).
func startFaulty(d *daemon, args ...string) *exec.Cmd {
	cmd := exec.Command(filepath.Join(repoRoot, "bin/nri-faulty"), append([]string{"--name", "guard", "--idx", "10",
		"--socket", d.nriSock, "--log-file", filepath.Join(d.dir, "faulty.log")}, args...)...)
	out, err := cmd.StdoutPipe()
	Expect(err).NotTo(HaveOccurred())
	Expect(cmd.Start()).To(Succeed())
	DeferCleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	ready := make(chan struct{})
	go func() {
		s := bufio.NewScanner(out)
		for s.Scan() {
			if strings.HasPrefix(s.Text(), "ready ") {
				close(ready)
				break
			}
		}
		for s.Scan() {
		}
	}()
	Eventually(ready, 10*time.Second).Should(BeClosed(), "nri-faulty never printed ready")
	return cmd
}

// newPod runs a pod and returns its error, for client goroutines (runPod
// asserts on it).
func (d *daemon) newPod(name string) (string, *runtimeapi.PodSandboxConfig, error) {
	cfg := critest.PodConfig(name, filepath.Join(d.dir, "logs"))
	r, err := d.rt.RunPodSandbox(context.Background(), &runtimeapi.RunPodSandboxRequest{Config: cfg})
	if err != nil {
		return "", nil, err
	}
	return r.PodSandboxId, cfg, nil
}

// mountsUnder lists the mount points below dir in this mount namespace.
func mountsUnder(dir string) []string {
	ms, err := critest.MountsUnder(dir)
	ExpectWithOffset(1, err).NotTo(HaveOccurred())
	return ms
}

// processesMentioning lists "pid cmdline" of the processes whose command
// line contains s (conmon is started with the runroot's paths).
func processesMentioning(s string) []string {
	ents, err := os.ReadDir("/proc")
	Expect(err).NotTo(HaveOccurred())
	var ps []string
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || !bytes.Contains(b, []byte(s)) {
			continue
		}
		ps = append(ps, e.Name()+" "+string(bytes.ReplaceAll(b, []byte{0}, []byte{' '})))
	}
	return ps
}

// storageContainers lists the containers/storage containers of the daemon
// (from every driver's <driver>-containers/containers.json under root).
func storageContainers(root string) []string {
	files, _ := filepath.Glob(filepath.Join(root, "*-containers", "containers.json"))
	var out []string
	for _, f := range files {
		b, err := os.ReadFile(f)
		Expect(err).NotTo(HaveOccurred())
		if t := strings.TrimSpace(string(b)); t != "" && t != "[]" && t != "null" {
			out = append(out, f+": "+t)
		}
	}
	return out
}

// filesUnder lists the regular files, sockets and dirs below dir,
// relative to it, whose first path element is a 64-hex-digit ID (the
// per-container and per-pod directories) at any depth of at most 3.
func idEntriesUnder(dir string) []string {
	var out []string
	_ = filepath.Walk(dir, func(p string, info os.FileInfo, err error) error {
		if err != nil || p == dir {
			return nil
		}
		rel, _ := filepath.Rel(dir, p)
		if strings.Count(rel, "/") > 3 {
			return filepath.SkipDir
		}
		base := filepath.Base(p)
		if isID(base) {
			out = append(out, rel)
			if info.IsDir() {
				return filepath.SkipDir
			}
		}
		return nil
	})
	return out
}

func isID(s string) bool {
	s = strings.TrimSuffix(strings.TrimPrefix(strings.TrimPrefix(s, "pod-"), "ctr-"), ".json")
	if len(s) != 64 {
		return false
	}
	for _, c := range s {
		if !strings.ContainsRune("0123456789abcdef", c) {
			return false
		}
	}
	return true
}

// procFigures are the daemon's resource figures.
type procFigures struct {
	goroutines, threads, fds int
	rssKiB                   int
}

func (f procFigures) String() string {
	return fmt.Sprintf("goroutines=%d threads=%d fds=%d rss=%.1fMiB", f.goroutines, f.threads, f.fds, float64(f.rssKiB)/1024)
}

// figures reads goroutines from verbose Status and threads, fds and RSS
// from /proc/<pid>.
func (d *daemon) figures() procFigures {
	var f procFigures
	r, err := d.rt.Status(context.Background(), &runtimeapi.StatusRequest{Verbose: true})
	Expect(err).NotTo(HaveOccurred())
	f.goroutines, err = strconv.Atoi(r.Info["goroutines"])
	Expect(err).NotTo(HaveOccurred(), "verbose Status has no goroutines entry")
	pid := d.cmd.Process.Pid
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	Expect(err).NotTo(HaveOccurred())
	f.fds = len(fds)
	st, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	Expect(err).NotTo(HaveOccurred())
	for _, l := range strings.Split(string(st), "\n") {
		k, v, _ := strings.Cut(l, ":")
		n, _ := strconv.Atoi(strings.Fields(v + " 0")[0])
		switch k {
		case "Threads":
			f.threads = n
		case "VmRSS":
			f.rssKiB = n
		}
	}
	return f
}

var _ = Describe("load", func() {
	It("creates 50 pods x 2 containers concurrently with a required plugin, all injected, and removes them without leftovers", func() {
		requireInTree()
		d := startDaemon(guardPolicy)
		startFaulty(d)
		const pods, perPod, workers = 50, 2, 8
		type result struct {
			pod  string
			ctrs []string
			err  error
		}
		jobs := make(chan int)
		results := make(chan result, pods)
		var wg sync.WaitGroup
		start := time.Now()
		for range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range jobs {
					podID, cfg, err := d.newPod(fmt.Sprintf("load-%d", i))
					res := result{pod: podID, err: err}
					for j := 0; err == nil && j < perPod; j++ {
						var r *runtimeapi.CreateContainerResponse
						r, err = d.rt.CreateContainer(context.Background(), &runtimeapi.CreateContainerRequest{
							PodSandboxId: podID, SandboxConfig: cfg, Config: critest.ContainerConfig(fmt.Sprintf("c%d", j)),
						})
						if err == nil {
							res.ctrs = append(res.ctrs, r.ContainerId)
							_, err = d.rt.StartContainer(context.Background(), &runtimeapi.StartContainerRequest{ContainerId: r.ContainerId})
						}
					}
					res.err = err
					results <- res
				}
			}()
		}
		for i := range pods {
			jobs <- i
		}
		close(jobs)
		wg.Wait()
		close(results)
		GinkgoWriter.Printf("created and started %d pods x %d containers from %d clients in %v\n", pods, perPod, workers, time.Since(start))
		var podIDs, ctrIDs []string
		for r := range results {
			Expect(r.err).NotTo(HaveOccurred())
			podIDs = append(podIDs, r.pod)
			ctrIDs = append(ctrIDs, r.ctrs...)
		}
		Expect(podIDs).To(HaveLen(pods))
		Expect(ctrIDs).To(HaveLen(pods * perPod))
		for _, id := range ctrIDs {
			Expect(acted(d, id)).To(BeTrue(), "container %s lacks the plugin's injection", id)
		}
		l, err := d.rt.ListContainers(context.Background(), &runtimeapi.ListContainersRequest{
			Filter: &runtimeapi.ContainerFilter{State: &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING}},
		})
		Expect(err).NotTo(HaveOccurred())
		Expect(l.Containers).To(HaveLen(pods * perPod))
		Expect(processesMentioning(filepath.Join(d.dir, "run"))).NotTo(BeEmpty(), "the conmon check would not see conmon")
		Expect(mountsUnder(d.dir)).NotTo(BeEmpty(), "the mount check would not see the root filesystems")
		Expect(storageContainers(filepath.Join(d.dir, "root"))).NotTo(BeEmpty(), "the storage check would not see the containers")

		// Teardown from the same 8 clients: stop and remove every pod.
		start = time.Now()
		podCh := make(chan string)
		errs := make(chan error, pods)
		for range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for id := range podCh {
					_, err := d.rt.StopPodSandbox(context.Background(), &runtimeapi.StopPodSandboxRequest{PodSandboxId: id})
					if err == nil {
						_, err = d.rt.RemovePodSandbox(context.Background(), &runtimeapi.RemovePodSandboxRequest{PodSandboxId: id})
					}
					errs <- err
				}
			}()
		}
		for _, id := range podIDs {
			podCh <- id
		}
		close(podCh)
		wg.Wait()
		close(errs)
		for err := range errs {
			Expect(err).NotTo(HaveOccurred())
		}
		GinkgoWriter.Printf("stopped and removed %d pods in %v\n", pods, time.Since(start))

		l, err = d.rt.ListContainers(context.Background(), &runtimeapi.ListContainersRequest{})
		Expect(err).NotTo(HaveOccurred())
		Expect(l.Containers).To(BeEmpty())
		p, err := d.rt.ListPodSandbox(context.Background(), &runtimeapi.ListPodSandboxRequest{})
		Expect(err).NotTo(HaveOccurred())
		Expect(p.Items).To(BeEmpty())
		// conmon exits shortly after its container; give it a moment.
		Eventually(func() []string { return processesMentioning(filepath.Join(d.dir, "run")) }, 5*time.Second).Should(BeEmpty(), "conmon processes left")
		// The storage driver's own home mount may stay; no container
		// root filesystem (or shm) may.
		Expect(mountsUnder(d.dir)).To(HaveEach(Not(ContainSubstring("/merged"))), "container mounts left")
		Expect(mountsUnder(d.dir)).To(HaveEach(Not(ContainSubstring("/shm"))), "shm mounts left")
		Expect(storageContainers(filepath.Join(d.dir, "root"))).To(BeEmpty(), "storage containers left")
		Expect(idEntriesUnder(filepath.Join(d.dir, "run"))).To(BeEmpty(), "per-container files left under runroot")
		Expect(idEntriesUnder(filepath.Join(d.dir, "runc"))).To(BeEmpty(), "runc state left")
	})
})

// leakCycles is how many create/start/stop/remove cycles the leak test
// runs: the 1000 of issue 6 (about 2.5 min on 2 cores, well inside the CI
// budget); NRIGATE_E2E_CYCLES overrides it for quicker local runs.
func leakCycles() int {
	if n, err := strconv.Atoi(os.Getenv("NRIGATE_E2E_CYCLES")); err == nil && n > 0 {
		return n
	}
	return defaultLeakCycles
}

const defaultLeakCycles = 1000

// cycle creates, starts, stops and removes one container in pod.
func (d *daemon) cycle(podID string, cfg *runtimeapi.PodSandboxConfig, name string) {
	ctx := context.Background()
	r, err := d.rt.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{PodSandboxId: podID, SandboxConfig: cfg, Config: critest.ContainerConfig(name)})
	Expect(err).NotTo(HaveOccurred())
	_, err = d.rt.StartContainer(ctx, &runtimeapi.StartContainerRequest{ContainerId: r.ContainerId})
	Expect(err).NotTo(HaveOccurred())
	_, err = d.rt.StopContainer(ctx, &runtimeapi.StopContainerRequest{ContainerId: r.ContainerId, Timeout: 0})
	Expect(err).NotTo(HaveOccurred())
	_, err = d.rt.RemoveContainer(ctx, &runtimeapi.RemoveContainerRequest{ContainerId: r.ContainerId})
	Expect(err).NotTo(HaveOccurred())
}

var _ = Describe("leaks", func() {
	It("returns goroutines, fds and RSS to their baseline after many create/start/stop/remove cycles", func() {
		requireInTree()
		d := startDaemon(guardPolicy)
		startFaulty(d)
		podID, cfg := d.runPod("leak")
		// Warm up: the first cycles fill caches, pools and the gRPC and
		// ttrpc connections' buffers; the baseline is taken after them.
		for i := range 20 {
			d.cycle(podID, cfg, fmt.Sprintf("warm%d", i))
		}
		base := d.figures()
		n := leakCycles()
		start := time.Now()
		for i := range n {
			d.cycle(podID, cfg, fmt.Sprintf("c%d", i))
		}
		el := time.Since(start)
		// Bounds: a leak of one goroutine or fd per cycle would exceed
		// +10 after ten cycles; transient goroutines (gRPC server
		// streams, exit watchers finishing) get a few seconds to end.
		// RSS of a Go program grows with heap fragmentation and the
		// runtime's lazy return of memory, so +64 MiB is the bound that
		// catches a per-cycle leak of >66 KiB at 1000 cycles without
		// flaking on GC timing.
		var after procFigures
		Eventually(func() bool {
			after = d.figures()
			return after.goroutines <= base.goroutines+10 && after.fds <= base.fds+10
		}, 10*time.Second, 200*time.Millisecond).Should(BeTrue(), func() string {
			return fmt.Sprintf("baseline %v, after %v", base, after)
		})
		msg := fmt.Sprintf("%d cycles in %v (%.1f ms/cycle): baseline %v, after %v", n, el.Round(time.Millisecond),
			float64(el.Milliseconds())/float64(n), base, after)
		GinkgoWriter.Println(msg)
		AddReportEntry("leak figures", msg)
		Expect(after.rssKiB).To(BeNumerically("<=", base.rssKiB+64*1024), msg)
		l, err := d.rt.ListContainers(context.Background(), &runtimeapi.ListContainersRequest{})
		Expect(err).NotTo(HaveOccurred())
		Expect(l.Containers).To(BeEmpty())
	})
})

// within runs f and fails unless it returns within d.
func within(d time.Duration, what string, f func() error) {
	start := time.Now()
	err := f()
	el := time.Since(start)
	ExpectWithOffset(1, err).NotTo(HaveOccurred(), what)
	ExpectWithOffset(1, el).To(BeNumerically("<", d), "%s took %v", what, el)
}

var _ = Describe("a plugin hung on every request", func() {
	// Teardown is not gated, but its relays share the upstream
	// adaptation's one mutex (NRI v0.12.5) with the hung CreateContainer
	// relays, so it can wait for one request timeout (2 s here): after that
	// upstream drops the plugin and the queued relays pass quickly. The
	// test bounds it by one request timeout plus a margin; that it is not
	// answered at once is the upstream limit DESIGN.md names.

	It("does not wedge Status or ListContainers, and teardown of other containers completes", func() {
		requireInTree()
		d := startDaemon(guardPolicy)
		control := filepath.Join(d.dir, "faulty.control")
		Expect(os.WriteFile(control, []byte("ok"), 0o644)).To(Succeed())
		startFaulty(d, "--control", control)
		// Containers made while the plugin answers, to tear down while
		// it hangs.
		type victim struct{ pod, ctr string }
		var victims []victim
		for i := range 4 {
			podID, cfg := d.runPod(fmt.Sprintf("victim-%d", i))
			r, err := d.rt.CreateContainer(context.Background(), &runtimeapi.CreateContainerRequest{PodSandboxId: podID, SandboxConfig: cfg, Config: critest.ContainerConfig("v")})
			Expect(err).NotTo(HaveOccurred())
			_, err = d.rt.StartContainer(context.Background(), &runtimeapi.StartContainerRequest{ContainerId: r.ContainerId})
			Expect(err).NotTo(HaveOccurred())
			victims = append(victims, victim{podID, r.ContainerId})
		}
		hungPod, hungCfg := d.runPod("hung")
		// Hang longer than the 2 s request timeout of startDaemon.
		Expect(os.WriteFile(control, []byte("hang 10s"), 0o644)).To(Succeed())

		stop := make(chan struct{})
		var wg sync.WaitGroup
		var mu sync.Mutex
		var attempts, failed int
		for w := range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; ; i++ {
					select {
					case <-stop:
						return
					default:
					}
					_, err := d.rt.CreateContainer(context.Background(), &runtimeapi.CreateContainerRequest{
						PodSandboxId: hungPod, SandboxConfig: hungCfg, Config: critest.ContainerConfig(fmt.Sprintf("h%d-%d", w, i))})
					mu.Lock()
					attempts++
					if err != nil {
						failed++
					}
					mu.Unlock()
				}
			}()
		}
		defer func() { close(stop); wg.Wait() }()
		// Let the creations reach the plugin and wait on it.
		time.Sleep(300 * time.Millisecond)
		ctx := context.Background()
		const bound = 500 * time.Millisecond
		// One 2 s request timeout of startDaemon, plus scheduling margin.
		const teardownBound = 3500 * time.Millisecond
		var teardown []string
		for i, v := range victims {
			within(bound, "Status", func() error {
				_, err := d.rt.Status(ctx, &runtimeapi.StatusRequest{Verbose: true})
				return err
			})
			within(bound, "ListContainers", func() error {
				_, err := d.rt.ListContainers(ctx, &runtimeapi.ListContainersRequest{})
				return err
			})
			t0 := time.Now()
			var err error
			if i%2 == 0 {
				_, err = d.rt.StopContainer(ctx, &runtimeapi.StopContainerRequest{ContainerId: v.ctr, Timeout: 0})
				if err == nil {
					_, err = d.rt.RemoveContainer(ctx, &runtimeapi.RemoveContainerRequest{ContainerId: v.ctr})
				}
				teardown = append(teardown, fmt.Sprintf("stop+remove container %v", time.Since(t0).Round(time.Millisecond)))
			} else {
				_, err = d.rt.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: v.pod})
				teardown = append(teardown, fmt.Sprintf("stop pod %v", time.Since(t0).Round(time.Millisecond)))
			}
			Expect(err).NotTo(HaveOccurred())
			Expect(time.Since(t0)).To(BeNumerically("<", teardownBound), "teardown %d while the plugin hangs", i)
		}
		GinkgoWriter.Printf("teardown while hung: %s\n", strings.Join(teardown, ", "))
		AddReportEntry("teardown while hung", strings.Join(teardown, ", "))
		mu.Lock()
		GinkgoWriter.Printf("creations while hung: %d returned, %d failed\n", attempts, failed)
		mu.Unlock()
		// The hung creations time out and are refused (fail-closed).
		Eventually(func() int { mu.Lock(); defer mu.Unlock(); return failed }, 10*time.Second).Should(BeNumerically(">", 0))
		mu.Lock()
		Expect(failed).To(Equal(attempts), "a creation succeeded while the required plugin hung")
		mu.Unlock()
	})
})
