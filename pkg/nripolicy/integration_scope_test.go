package nripolicy_test

import (
	"context"
	"errors"
	"syscall"
	"time"

	"github.com/containerd/nri/pkg/api"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/nrigate/nrigate/pkg/nripolicy"
	"github.com/nrigate/nrigate/pkg/nripolicy/internal/testrig"
)

const tolerateAnnotation = "tolerate-missing-plugins.nrigate.io"

var _ = Describe("Scope while guard is absent", func() {
	type scopeCase struct {
		name    string
		cfg     func(*nripolicy.Config)
		exempt  *api.PodSandbox
		inScope *api.PodSandbox
	}
	cases := []scopeCase{
		{
			name:    "a pod outside the namespaces",
			cfg:     func(c *nripolicy.Config) { c.Plugins[guardName].Namespaces = []string{"prod-*"} },
			exempt:  testrig.Pod("default", nil, nil),
			inScope: testrig.Pod("prod-a", nil, nil),
		},
		{
			name:    "a pod in an excluded namespace",
			cfg:     func(c *nripolicy.Config) { c.Plugins[guardName].ExcludeNamespaces = []string{"kube-*"} },
			exempt:  testrig.Pod("kube-system", nil, nil),
			inScope: testrig.Pod("default", nil, nil),
		},
		{
			name:    "a static pod",
			cfg:     func(*nripolicy.Config) {},
			exempt:  testrig.Pod("kube-system", nil, map[string]string{nripolicy.StaticPodSourceAnnotation: "file"}),
			inScope: testrig.Pod("kube-system", nil, map[string]string{nripolicy.StaticPodSourceAnnotation: nripolicy.APIPodSource}),
		},
		{
			name: "the plugin's own DaemonSet pod",
			cfg: func(c *nripolicy.Config) {
				c.Plugins[guardName].ExcludePodSelector = "app.kubernetes.io/name=guard"
			},
			exempt:  testrig.Pod("kube-system", map[string]string{"app.kubernetes.io/name": "guard"}, nil),
			inScope: testrig.Pod("kube-system", map[string]string{"app.kubernetes.io/name": "other"}, nil),
		},
		{
			name:    "a pod outside the pod selector",
			cfg:     func(c *nripolicy.Config) { c.Plugins[guardName].PodSelector = "needs-guard in (yes)" },
			exempt:  testrig.Pod("default", map[string]string{"needs-guard": "no"}, nil),
			inScope: testrig.Pod("default", map[string]string{"needs-guard": "yes"}, nil),
		},
		{
			name:    "a tolerated pod",
			cfg:     func(c *nripolicy.Config) { c.TolerateMissingPluginsAnnotation = tolerateAnnotation },
			exempt:  testrig.Pod("default", nil, map[string]string{tolerateAnnotation: "true"}),
			inScope: testrig.Pod("default", nil, map[string]string{tolerateAnnotation: "false"}),
		},
	}
	for _, sc := range cases {
		for _, ev := range gatedEvents {
			It("lets "+sc.name+" through for "+string(ev), func() {
				cfg := matrixConfig(nripolicy.FailPolicyFail)
				sc.cfg(cfg)
				e := newEnv(cfg)
				Expect(e.request(ev, sc.exempt, nil).err).NotTo(HaveOccurred())
				// The same policy still refuses a pod in scope.
				expectRefused(e.request(ev, sc.inScope, nil), ev, nripolicy.ErrPluginNotReady)
			})
		}
	}

	It("does not exempt static pods with exempt_static_pods = false", func() {
		cfg := matrixConfig(nripolicy.FailPolicyFail)
		cfg.ExemptStaticPods = false
		e := newEnv(cfg)
		pod := testrig.Pod("kube-system", nil, map[string]string{nripolicy.StaticPodSourceAnnotation: "file"})
		expectRefused(e.request(createContainer, pod, nil), createContainer, nripolicy.ErrPluginNotReady)
	})
})

var _ = Describe("registration_wait", func() {
	for _, ev := range gatedEvents {
		// The release latency itself is measured by
		// BenchmarkRegistrationWaitRelease, not bounded here.
		It("holds a waiting "+string(ev)+" until guard has synchronized, then releases it", func() {
			cfg := matrixConfig(nripolicy.FailPolicyFail)
			cfg.Plugins[guardName].RegistrationWait = nripolicy.Duration(3 * time.Second)
			e := newEnv(cfg)
			waits := make(chan nripolicy.Event, 1)
			nripolicy.OnWait(e.policy, func(ev nripolicy.Event) { waits <- ev })
			pod := testrig.Pod("default", nil, nil)
			type admitted struct {
				at  time.Time
				err error
			}
			admitC := make(chan admitted, 1)
			started := time.Now()
			go func() {
				defer GinkgoRecover()
				req := nripolicy.Request{Event: ev, Pod: pod}
				if ev == createContainer {
					req.Container = testrig.Container(pod, "ctr")
				}
				_, adm, err := e.policy.Admit(context.Background(), req)
				at := time.Now()
				if err == nil {
					_ = adm.Done(nil)
				}
				admitC <- admitted{at, err}
			}()
			Eventually(waits).WithTimeout(readyTimeout).Should(Receive(Equal(ev)))
			Consistently(admitC).WithTimeout(20 * time.Millisecond).ShouldNot(Receive())
			g := e.startPlugin(guardName, guardIdx)
			var got admitted
			Eventually(admitC).WithTimeout(readyTimeout).Should(Receive(&got))
			Expect(got.err).NotTo(HaveOccurred())
			ready := g.ReadyAt()
			Expect(ready.IsZero()).To(BeFalse())
			Expect(got.at).To(BeTemporally(">=", ready), "released before guard synchronized")
			latency := got.at.Sub(ready)
			GinkgoWriter.Printf("%s: waited %s, released %s after guard's Synchronize\n", ev, got.at.Sub(started), latency)
			AddReportEntry("registration_wait release latency "+string(ev), latency.String())

			// A full request after the wait reaches guard.
			r := e.request(ev, testrig.Pod("default", nil, nil), g)
			Expect(r.err).NotTo(HaveOccurred())
			Expect(r.acted).To(BeTrue())
		})

		It("lets a "+string(ev)+" that waited in through to guard", func() {
			cfg := matrixConfig(nripolicy.FailPolicyFail)
			cfg.Plugins[guardName].RegistrationWait = nripolicy.Duration(3 * time.Second)
			e := newEnv(cfg)
			pod := testrig.Pod("default", nil, nil)
			waits := make(chan nripolicy.Event, 1)
			nripolicy.OnWait(e.policy, func(ev nripolicy.Event) { waits <- ev })
			resC := make(chan result, 1)
			go func() {
				defer GinkgoRecover()
				r := e.request(ev, pod, nil)
				resC <- r
			}()
			Eventually(waits).WithTimeout(readyTimeout).Should(Receive(Equal(ev)))
			g := e.startPlugin(guardName, guardIdx)
			var r result
			Eventually(resC).WithTimeout(readyTimeout).Should(Receive(&r))
			Expect(r.err).NotTo(HaveOccurred())
			if ev == createContainer {
				Expect(r.acted).To(BeTrue(), "the waiting create must reach guard")
			} else {
				Expect(g.ActedOn(string(ev), pod.GetUid())).To(BeTrue(), "the waiting RunPodSandbox must reach guard")
			}
			d, ok := e.decided.last()
			Expect(ok).To(BeTrue())
			Expect(d.Outcome).To(Equal(nripolicy.OutcomeAllowed))
			Expect(d.Waited).To(BeNumerically(">", 0))
		})

		It("refuses a "+string(ev)+" that waited longer than registration_wait, naming the wait", func() {
			cfg := matrixConfig(nripolicy.FailPolicyFail)
			cfg.Plugins[guardName].RegistrationWait = nripolicy.Duration(200 * time.Millisecond)
			e := newEnv(cfg)
			start := time.Now()
			r := e.request(ev, testrig.Pod("default", nil, nil), nil)
			took := time.Since(start)
			expectRefused(r, ev, nripolicy.ErrPluginNotReady)
			Expect(took).To(BeNumerically(">=", 200*time.Millisecond))
			Expect(took).To(BeNumerically("<", 700*time.Millisecond))
			var re *nripolicy.RefusalError
			Expect(errors.As(r.err, &re)).To(BeTrue())
			Expect(re.Waited).To(BeNumerically(">=", 200*time.Millisecond))
			// The message names the wait: the configured 200ms or the time actually waited.
			Expect(r.err.Error()).To(MatchRegexp(`\b2\d\d(\.\d+)?ms\b`))
		})
	}
})

var _ = Describe("Readiness", func() {
	type flip struct {
		ready bool
		at    time.Time
	}
	// watch records every change of NRIPluginsReady, woken by Changed().
	watch := func(p *nripolicy.Policy) (<-chan flip, func()) {
		out := make(chan flip, 16)
		stop := make(chan struct{})
		go func() {
			last, _ := pluginsReady(p)
			for {
				ch := p.Changed()
				if s, _ := pluginsReady(p); s != last {
					last = s
					out <- flip{s, time.Now()}
				}
				select {
				case <-ch:
				case <-stop:
					return
				}
			}
		}()
		return out, func() { close(stop) }
	}

	It("flips NRIPluginsReady false, true, false within 100ms as guard registers and crashes", func() {
		e := newEnv(matrixConfig(nripolicy.FailPolicyFail))
		s, ok := pluginsReady(e.policy)
		Expect(ok).To(BeTrue(), "a policy naming a plugin has an NRIPluginsReady condition")
		Expect(s).To(BeFalse())
		c, _ := condition(e.policy, nripolicy.ConditionNRIPluginsReady)
		Expect(c.Reason).To(Equal(nripolicy.ReasonNRIPluginsNotReady))
		Expect(c.Message).To(And(ContainSubstring(guardName), ContainSubstring("not registered")))

		flips, stop := watch(e.policy)
		defer stop()
		g := e.startPlugin(guardName, guardIdx)
		var f flip
		Eventually(flips).WithTimeout(readyTimeout).Should(Receive(&f))
		Expect(f.ready).To(BeTrue())
		up := f.at.Sub(g.ReadyAt())
		Expect(up).To(BeNumerically("<=", 100*time.Millisecond))

		killed := time.Now()
		Expect(g.Cmd.Process.Signal(syscall.SIGKILL)).To(Succeed())
		Eventually(flips).WithTimeout(2 * time.Second).Should(Receive(&f))
		Expect(f.ready).To(BeFalse())
		down := f.at.Sub(killed)
		GinkgoWriter.Printf("ready %s after Synchronize, not ready %s after SIGKILL\n", up, down)
		AddReportEntry("readiness latency", map[string]string{"up": up.String(), "down": down.String()})
		Expect(down).To(BeNumerically("<=", 100*time.Millisecond))
		c, _ = condition(e.policy, nripolicy.ConditionNRIPluginsReady)
		Expect(c.Message).To(And(ContainSubstring(guardName), ContainSubstring("disconnected")))
		s2, _ := guardState(e.policy, guardName)
		Expect(s2.State).To(Equal(nripolicy.StateDisconnected))
		Expect(s2.Since).To(BeTemporally(">=", killed.Add(-time.Millisecond)))
		Expect(e.readiness.sawState(guardName, nripolicy.StateReady)).To(BeTrue(), "ReadinessHook must see guard ready")
		Eventually(func() bool { return e.readiness.sawState(guardName, nripolicy.StateDisconnected) }).
			WithTimeout(time.Second).Should(BeTrue(), "ReadinessHook must see guard disconnected")
	})

	It("has no condition without configured plugins", func() {
		e := newEnv(nripolicy.DefaultConfig())
		Expect(e.policy.Conditions()).To(BeEmpty())
		r := e.request(createContainer, testrig.Pod("default", nil, nil), nil)
		Expect(r.err).NotTo(HaveOccurred())
	})

	It("holds NetworkReady false while a network plugin is not ready", func() {
		cfg := matrixConfig(nripolicy.FailPolicyFail)
		cfg.Plugins[guardName].Readiness = nripolicy.ReadinessNetwork
		e := newEnv(cfg)
		c, ok := condition(e.policy, nripolicy.ConditionNetworkReady)
		Expect(ok).To(BeTrue())
		Expect(c.Status).To(BeFalse())
		Expect(c.Reason).To(Equal(nripolicy.ReasonNRIPluginNotReady))
		e.guard()
		Eventually(func() bool { _, ok := condition(e.policy, nripolicy.ConditionNetworkReady); return ok }).
			WithTimeout(time.Second).Should(BeFalse())
	})
})
