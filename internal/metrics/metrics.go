// Package metrics is nrigate's Prometheus instrumentation, configured by
// [crio.metrics]: the upstream NRI plugin metrics (adaptation.Metrics),
// the nripolicy decisions and plugin readiness (nripolicy.DecisionHook and
// nripolicy.ReadinessHook), and the /metrics HTTP endpoint serving them.
package metrics

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/containerd/nri/pkg/adaptation"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/nrigate/nrigate/pkg/config"
	"github.com/nrigate/nrigate/pkg/nripolicy"
)

// Namespace prefixes every metric name.
const Namespace = "nrigate"

// Result label values of nrigate_nri_plugin_invocations_total.
const (
	ResultSuccess = "success"
	ResultError   = "error"
)

// Path is where the endpoint serves the metrics.
const Path = "/metrics"

// Metrics holds nrigate's collectors in a registry of its own, so that
// tests and several daemons in one process do not collide. It implements
// adaptation.Metrics, nripolicy.DecisionHook and nripolicy.ReadinessHook;
// it is safe for concurrent use.
type Metrics struct {
	reg *prometheus.Registry

	invocations *prometheus.CounterVec
	latency     *prometheus.HistogramVec
	adjustments *prometheus.CounterVec
	plugins     prometheus.Gauge
	decisions   *prometheus.CounterVec
	wait        *prometheus.HistogramVec
	ready       *prometheus.GaugeVec
}

var (
	_ adaptation.Metrics      = (*Metrics)(nil)
	_ nripolicy.DecisionHook  = (*Metrics)(nil)
	_ nripolicy.ReadinessHook = (*Metrics)(nil)
)

// New creates the collectors and registers them, with the Go runtime and
// process collectors, in a new registry.
func New() *Metrics {
	m := &Metrics{
		reg: prometheus.NewRegistry(),
		invocations: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Subsystem: "nri", Name: "plugin_invocations_total",
			Help: "NRI plugin invocations by plugin, operation and result (success or error).",
		}, []string{"plugin", "operation", "result"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: Namespace, Subsystem: "nri", Name: "plugin_latency_seconds",
			Help: "Latency of NRI plugin invocations.",
			// Plugins answer in microseconds to milliseconds; the request
			// timeout (2 s by default) bounds the top.
			Buckets: prometheus.ExponentialBuckets(0.0001, 4, 10),
		}, []string{"plugin", "operation"}),
		adjustments: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Subsystem: "nri", Name: "plugin_adjustments_total",
			Help: "NRI plugin answers carrying an adjustment, updates or evictions, by plugin and operation.",
		}, []string{"plugin", "operation"}),
		plugins: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: Namespace, Subsystem: "nri", Name: "plugins",
			Help: "Number of NRI plugins currently connected.",
		}),
		decisions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Subsystem: "nri", Name: "policy_decisions_total",
			Help: "NRI policy decisions (refused, ignored, allowed after a wait) by plugin, event and outcome.",
		}, []string{"plugin", "event", "outcome"}),
		wait: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: Namespace, Subsystem: "nri", Name: "policy_wait_seconds",
			Help: "Time requests waited for a required NRI plugin (registration_wait), by plugin and event.",
			// registration_wait is typically 0 to a few seconds.
			Buckets: []float64{0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30},
		}, []string{"plugin", "event"}),
		ready: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: Namespace, Subsystem: "nri", Name: "plugin_ready",
			Help: "1 if the NRI plugin is ready (registered, synchronized, subscribed), 0 otherwise.",
		}, []string{"plugin"}),
	}
	m.reg.MustRegister(m.invocations, m.latency, m.adjustments, m.plugins, m.decisions, m.wait, m.ready,
		prometheus.NewGoCollector(), prometheus.NewProcessCollector(prometheus.ProcessCollectorOpts{}))
	return m
}

// Registry returns the registry holding the collectors.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// Handler returns the HTTP handler serving the registry.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg})
}

// RecordPluginInvocation counts one invocation; err != nil counts as an error.
func (m *Metrics) RecordPluginInvocation(plugin, operation string, err error) {
	result := ResultSuccess
	if err != nil {
		result = ResultError
	}
	m.invocations.WithLabelValues(plugin, operation, result).Inc()
}

// RecordPluginLatency observes one invocation's latency.
func (m *Metrics) RecordPluginLatency(plugin, operation string, latency time.Duration) {
	m.latency.WithLabelValues(plugin, operation).Observe(latency.Seconds())
}

// RecordPluginAdjustments counts an answer that adjusted the container,
// updated or evicted containers; empty answers are not counted.
func (m *Metrics) RecordPluginAdjustments(plugin, operation string, adjust *adaptation.ContainerAdjustment, updates, evicts int) {
	if adjust == nil && updates == 0 && evicts == 0 {
		return
	}
	m.adjustments.WithLabelValues(plugin, operation).Inc()
}

// UpdatePluginCount sets the number of connected plugins.
func (m *Metrics) UpdatePluginCount(count int) { m.plugins.Set(float64(count)) }

// Decided counts a policy decision and observes how long it waited.
func (m *Metrics) Decided(d nripolicy.Decision) {
	m.decisions.WithLabelValues(d.Plugin, string(d.Event), string(d.Outcome)).Inc()
	m.wait.WithLabelValues(d.Plugin, string(d.Event)).Observe(d.Waited.Seconds())
}

// ReadinessChanged sets nrigate_nri_plugin_ready from a snapshot. Plugins
// missing from the snapshot (removed from the policy and disconnected) are
// dropped, so the gauge does not report stale plugins.
func (m *Metrics) ReadinessChanged(states []nripolicy.PluginState) {
	m.ready.Reset()
	for _, s := range states {
		// Several instances of one plugin have an entry each; the gauge
		// is per plugin key.
		v := 0.0
		if s.KeyReady {
			v = 1
		}
		m.ready.WithLabelValues(s.Key).Set(v)
	}
}

// Server is a running metrics endpoint.
type Server struct {
	srv  *http.Server
	addr net.Addr
	done chan struct{}
}

// Serve listens on metrics_host:metrics_port and serves Path in the
// background. Port 0 picks a free port (see Addr).
func (m *Metrics) Serve(cfg *config.MetricsConfig) (*Server, error) {
	addr := net.JoinHostPort(cfg.Host, strconv.Itoa(cfg.Port))
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("metrics: listening on %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle(Path, m.Handler())
	s := &Server{
		srv:  &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second},
		addr: l.Addr(),
		done: make(chan struct{}),
	}
	go func() {
		defer close(s.done)
		_ = s.srv.Serve(l) // returns http.ErrServerClosed after Stop
	}()
	return s, nil
}

// Addr is the address the endpoint listens on.
func (s *Server) Addr() net.Addr { return s.addr }

// Stop closes the listener and waits up to 5 s for scrapes in flight.
func (s *Server) Stop() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := s.srv.Shutdown(ctx)
	<-s.done
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return err
}
