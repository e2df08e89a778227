package nripolicy

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/containerd/nri/pkg/api"
)

// BenchmarkAdmission measures one admission decision, Admit and Done, with
// n configured plugins that are all ready and subscribed. The connections
// are driven through the tracker directly, and each plugin's answer is
// recorded the way its connection's interceptor records it, so the figure
// is the policy's own cost per gated request without the relay. n=0 is a
// request no plugin is required for.
func BenchmarkAdmission(b *testing.B) {
	for _, n := range []int{0, 1, 8, 32} {
		b.Run(fmt.Sprintf("plugins=%d", n), func(b *testing.B) {
			cfg := DefaultConfig()
			cfg.Plugins = map[string]*PluginConfig{}
			for i := 0; i < n; i++ {
				pc := DefaultPluginConfig()
				pc.ExcludeNamespaces = []string{"kube-system"}
				pc.ExcludePodSelector = "app.kubernetes.io/name=plugin"
				cfg.Plugins[fmt.Sprintf("plugin%02d", i)] = pc
			}
			p := mustNew(b, cfg)
			var conns []*conn
			for i := 0; i < n; i++ {
				conns = append(conns, fakeConn(p, fmt.Sprintf("plugin%02d", i), fmt.Sprintf("%02d", i), true, api.Event_CREATE_CONTAINER))
			}
			pd := pod("default", "p", map[string]string{"app": "web"})
			c := ctr("c")
			ctx := context.Background()
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				_, adm, err := p.Admit(ctx, Request{Event: EventCreateContainer, Pod: pd, Container: c})
				if err != nil {
					b.Fatal(err)
				}
				for _, cn := range conns {
					adm.record(cn, nil, okResp)
				}
				if err := adm.Done(nil); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkCreateContainerRelay measures a CreateContainer relay through a
// real upstream adaptation with one in-process ok plugin over a unix
// socket, with the policy (Admit, relay, Done) and without it. The two
// rigs run interleaved in rounds in the same benchmark so that load on the
// machine affects both alike, alternating which goes first; it reports both ns/op and their ratio.
func BenchmarkCreateContainerRelay(b *testing.B) {
	plain := newRig(b, nil)
	plain.plugin(b, "guard", "10")
	p := mustNew(b, cfgOf("guard", nil))
	gated := newRig(b, p)
	gated.plugin(b, "guard", "10")
	pd, c := pod("default", "p", nil), ctr("c")
	ctx := context.Background()
	run := func(r *rig, n int) time.Duration {
		start := time.Now()
		for i := 0; i < n; i++ {
			rsp, err := r.create(ctx, pd, c)
			if err != nil || !acted(rsp) {
				b.Fatalf("create: %v (acted=%v)", err, acted(rsp))
			}
		}
		return time.Since(start)
	}
	run(plain, 50)
	run(gated, 50)
	b.ReportAllocs()
	b.ResetTimer()
	const round = 10
	var tPlain, tGated time.Duration
	var done int
	for done < b.N {
		n := min(round, b.N-done)
		if (done/round)%2 == 0 { // alternate the order: neither rig always runs warm
			tPlain += run(plain, n)
			tGated += run(gated, n)
		} else {
			tGated += run(gated, n)
			tPlain += run(plain, n)
		}
		done += n
	}
	b.StopTimer()
	nsPlain := float64(tPlain.Nanoseconds()) / float64(b.N)
	nsGated := float64(tGated.Nanoseconds()) / float64(b.N)
	b.ReportMetric(nsPlain, "ns-without/op")
	b.ReportMetric(nsGated, "ns-with/op")
	b.ReportMetric(nsGated/nsPlain, "ratio")
}

// BenchmarkRegistrationWaitRelease measures how long a request waiting in
// Admit (registration_wait) takes to be released once its plugin has
// synchronized: ns/op is the release latency, without any plugin I/O.
func BenchmarkRegistrationWaitRelease(b *testing.B) {
	p := mustNew(b, cfgOf("guard", func(pc *PluginConfig) { pc.RegistrationWait = Duration(10 * time.Second) }))
	waits := waiting(p)
	req := Request{Event: EventCreateContainer, Pod: pod("d", "p", nil), Container: ctr("c")}
	var total time.Duration
	for i := 0; i < b.N; i++ {
		c := fakeConn(p, "guard", "10", false, api.Event_CREATE_CONTAINER)
		done := make(chan time.Time, 1)
		go func() {
			if _, _, err := p.Admit(context.Background(), req); err != nil {
				b.Error(err)
			}
			done <- time.Now()
		}()
		<-waits
		synced := time.Now()
		syncConn(p, c)
		total += (<-done).Sub(synced)
		p.trk.closed(c)
	}
	b.ReportMetric(float64(total.Nanoseconds())/float64(b.N), "release-ns/op")
}
