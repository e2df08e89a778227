package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/containerd/nri/pkg/adaptation"
	"github.com/sirupsen/logrus"
	"github.com/urfave/cli/v2"

	"github.com/nrigate/nrigate/internal/version"
	"github.com/nrigate/nrigate/pkg/config"
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

	stop, err := startNRI(cfg, log)
	if err != nil {
		return err
	}
	stopCRI, err := startCRI(cfg, log)
	if err != nil {
		stop()
		return err
	}
	log.WithFields(logrus.Fields{"version": version.Version, "nri": cfg.Crio.NRI.Enabled}).Info("nrigate started")

	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	sig := <-sigs
	log.WithField("signal", sig.String()).Info("shutting down")
	stopCRI()
	stop()
	log.Info("nrigate stopped")
	return nil
}

// startNRI starts the upstream NRI adaptation from [crio.nri] when NRI is
// enabled, and returns the function that stops it. Until the CRI server
// exists the runtime has no pods or containers to synchronize or update.
func startNRI(cfg *config.Config, log logrus.FieldLogger) (func(), error) {
	n := &cfg.Crio.NRI
	if !n.Enabled {
		log.Info("NRI is disabled")
		return func() {}, nil
	}
	adaptation.SetPluginRegistrationTimeout(n.PluginRegistrationTimeout.Std())
	adaptation.SetPluginRequestTimeout(n.PluginRequestTimeout.Std())
	opts := []adaptation.Option{
		adaptation.WithSocketPath(n.SocketPath),
		adaptation.WithPluginPath(n.PluginPath),
		adaptation.WithPluginConfigPath(n.PluginConfigPath),
		adaptation.WithDefaultValidator(n.DefaultValidator.Upstream()),
	}
	if n.DisableConnections {
		opts = append(opts, adaptation.WithDisabledExternalConnections())
	}
	syncFn := func(ctx context.Context, cb adaptation.SyncCB) error {
		_, err := cb(ctx, nil, nil)
		return err
	}
	updateFn := func(context.Context, []*adaptation.ContainerUpdate) ([]*adaptation.ContainerUpdate, error) {
		return nil, nil
	}
	a, err := adaptation.New("nrigate", version.Version, syncFn, updateFn, opts...)
	if err != nil {
		return nil, fmt.Errorf("creating NRI adaptation: %w", err)
	}
	if err := a.Start(); err != nil {
		return nil, fmt.Errorf("starting NRI on %s: %w", n.SocketPath, err)
	}
	log.WithFields(logrus.Fields{"socket": n.SocketPath, "plugin_dir": n.PluginPath}).Info("NRI started")
	return a.Stop, nil
}
