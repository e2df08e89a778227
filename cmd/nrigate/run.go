package main

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/sirupsen/logrus"
	"github.com/urfave/cli/v2"

	"github.com/nrigate/nrigate/internal/nri"
	"github.com/nrigate/nrigate/internal/version"
	"github.com/nrigate/nrigate/server"
)

// runDaemon is the default action: load the configuration, start the
// daemon's services and serve until SIGTERM or SIGINT.
func runDaemon(ctx *cli.Context) error {
	if ctx.Args().Present() {
		return fmt.Errorf("unknown command %q (see nrigate --help)", ctx.Args().First())
	}
	log := logrus.StandardLogger()
	cfg, err := loadConfig(ctx, log)
	if err != nil {
		return err
	}
	level, _ := logrus.ParseLevel(cfg.Crio.Runtime.LogLevel) // validated by loadConfig
	log.SetLevel(level)

	metricsOpts, stopMetrics, err := startMetrics(&cfg.Crio.Metrics, log)
	if err != nil {
		return err
	}
	defer stopMetrics()
	n, err := nri.New(&cfg.Crio.NRI, append(metricsOpts, nri.WithLogger(log), nri.WithDefaultRuntimeHandler(cfg.Crio.Runtime.DefaultRuntime))...)
	if err != nil {
		return err
	}
	var srv *server.Server
	captureServer := func(s *server.Server) error { srv = s; return nil }
	stopCRI, err := startCRI(cfg, log, server.WithHooks(n), server.WithStatusConditions(n.Conditions),
		server.WithVerboseInfo(n.VerboseInfo), captureServer)
	if err != nil {
		return err
	}
	if err := n.Start(srv); err != nil {
		stopCRI()
		return err
	}
	log.WithFields(logrus.Fields{"version": version.Version, "nri": cfg.Crio.NRI.Enabled}).Info("nrigate started")

	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	for sig := range sigs {
		if sig == syscall.SIGHUP {
			reloadPolicy(ctx, log, n)
			continue
		}
		log.WithField("signal", sig.String()).Info("shutting down")
		break
	}
	stopCRI()
	n.Stop()
	log.Info("nrigate stopped")
	return nil
}

// reloadPolicy re-reads the configuration files and swaps in the new NRI
// policy tables. An invalid configuration is logged (with its file and
// key, as loadConfig reports them) and the old policy stays.
func reloadPolicy(ctx *cli.Context, log logrus.FieldLogger, n *nri.NRI) {
	if !n.Enabled() {
		log.Info("SIGHUP: NRI is disabled, nothing to reload")
		return
	}
	cfg, err := loadConfig(ctx, log)
	if err != nil {
		log.WithError(err).Error("SIGHUP: configuration reload failed, keeping the old NRI policy")
		return
	}
	if err := n.Reload(&cfg.Crio.NRI.Policy); err != nil {
		log.WithError(err).Error("SIGHUP: NRI policy reload failed, keeping the old NRI policy")
		return
	}
	log.WithField("required_plugins", len(cfg.Crio.NRI.Policy.Plugins)).Info("SIGHUP: NRI policy reloaded")
}
