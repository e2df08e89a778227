package main

import (
	"github.com/sirupsen/logrus"

	"github.com/nrigate/nrigate/internal/metrics"
	"github.com/nrigate/nrigate/internal/nri"
	"github.com/nrigate/nrigate/pkg/config"
)

// startMetrics serves [crio.metrics] when enable_metrics is set and returns
// the NRI option that feeds it and the function stopping the endpoint.
// Disabled, it returns no option and a no-op stop.
func startMetrics(cfg *config.MetricsConfig, log logrus.FieldLogger) ([]nri.Option, func(), error) {
	if !cfg.Enable {
		return nil, func() {}, nil
	}
	m := metrics.New()
	srv, err := m.Serve(cfg)
	if err != nil {
		return nil, nil, err
	}
	log.WithField("address", "http://"+srv.Addr().String()+metrics.Path).Info("metrics endpoint started")
	stop := func() {
		if err := srv.Stop(); err != nil {
			log.WithError(err).Warn("stopping the metrics endpoint")
		}
	}
	return []nri.Option{nri.WithMetrics(m)}, stop, nil
}
