package main

import (
	"fmt"

	"github.com/sirupsen/logrus"

	"github.com/nrigate/nrigate/internal/version"
	"github.com/nrigate/nrigate/pkg/config"
	"github.com/nrigate/nrigate/server"
)

// criConfig maps the daemon configuration onto what the CRI server needs.
func criConfig(cfg *config.Config) server.Config {
	c := server.Config{
		Listen:        cfg.Crio.API.Listen,
		Root:          cfg.Crio.Root,
		RunRoot:       cfg.Crio.RunRoot,
		StorageDriver: cfg.Crio.StorageDriver,
		RuntimeName:   cfg.Crio.Runtime.DefaultRuntime,
		Version:       version.Version,
	}
	if h := cfg.DefaultHandler(); h != nil {
		c.RuntimePath, c.MonitorPath, c.RuntimeRoot = h.RuntimePath, h.MonitorPath, h.RuntimeRoot
	}
	return c
}

// startCRI starts the CRI server in the background and returns the function
// that stops it. Stopping leaves containers running, as CRI-O does.
func startCRI(cfg *config.Config, log logrus.FieldLogger, opts ...server.Option) (func(), error) {
	opts = append([]server.Option{server.WithLogger(log), server.WithEffectiveConfig(cfg)}, opts...)
	srv, err := server.New(criConfig(cfg), opts...)
	if err != nil {
		return nil, fmt.Errorf("starting the CRI server: %w", err)
	}
	if err := srv.Listen(); err != nil {
		srv.Stop()
		return nil, fmt.Errorf("starting the CRI server: %w", err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.Serve(); err != nil {
			log.WithError(err).Error("CRI server stopped")
		}
	}()
	return func() {
		srv.Stop()
		<-done
	}, nil
}
