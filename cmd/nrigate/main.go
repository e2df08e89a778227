// Command nrigate is a CRI runtime daemon shaped like CRI-O that makes NRI
// plugins required where the operator says so.
package main

import (
	"fmt"
	"os"

	"github.com/sirupsen/logrus"
	"github.com/urfave/cli/v2"
	"go.podman.io/storage/pkg/reexec"

	"github.com/nrigate/nrigate/internal/version"
	"github.com/nrigate/nrigate/pkg/config"
)

// Flag names shared by the commands.
const (
	flagConfig    = "config"
	flagConfigDir = "config-dir"
	flagListen    = "listen"
	flagRoot      = "root"
	flagRunRoot   = "runroot"
	flagLogLevel  = "log-level"
)

func newApp() *cli.App {
	return &cli.App{
		Name:    "nrigate",
		Usage:   "CRI runtime with required NRI plugins and per-plugin fail policies",
		Version: version.Version,
		Flags:   globalFlags(),
		Action:  runDaemon,
		Commands: []*cli.Command{
			configCommand(),
			versionCommand(),
			statusCommand(),
		},
		// Errors are printed once, by main, and turned into exit code 1.
		ExitErrHandler: func(*cli.Context, error) {},
	}
}

// globalFlags returns the daemon's flags. The config command takes them
// too, so that both "nrigate -c F config" and "nrigate config -c F" work.
func globalFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: flagConfig, Aliases: []string{"c"}, Value: config.DefaultConfigFile, Usage: "main configuration `FILE` (crio.conf format)"},
		&cli.StringFlag{Name: flagConfigDir, Aliases: []string{"d"}, Value: config.DefaultConfigDir, Usage: "`DIR` of *.conf drop-ins merged over the main file in lexical order"},
		&cli.StringFlag{Name: flagListen, Usage: "CRI unix `SOCKET` (overrides crio.api.listen)"},
		&cli.StringFlag{Name: flagRoot, Usage: "persistent state `DIR` (overrides crio.root)"},
		&cli.StringFlag{Name: flagRunRoot, Usage: "transient state `DIR` (overrides crio.runroot)"},
		&cli.StringFlag{Name: flagLogLevel, Usage: "log `LEVEL` (overrides crio.runtime.log_level)"},
	}
}

// flag returns the value of a flag that may be given before or after the
// command name: the innermost command line that sets it wins, else its default.
func flag(ctx *cli.Context, name string) (string, bool) {
	for _, c := range ctx.Lineage() {
		if c.Command != nil && c.IsSet(name) {
			return c.String(name), true
		}
	}
	return ctx.String(name), false
}

func main() {
	// containers/storage re-executes this binary for its helpers.
	if reexec.Init() {
		return
	}
	if err := newApp().Run(os.Args); err != nil {
		fmt.Fprintf(os.Stderr, "nrigate: %v\n", err)
		os.Exit(1)
	}
}

// loadConfig loads the files named by the global flags, applies the
// command-line overrides and validates the result. Unknown keys are
// logged as warnings with their file and key.
func loadConfig(ctx *cli.Context, log logrus.FieldLogger) (*config.Config, error) {
	file, _ := flag(ctx, flagConfig)
	dir, _ := flag(ctx, flagConfigDir)
	cfg, warnings, err := config.Load(file, dir)
	for _, w := range warnings {
		msg := "unknown configuration key ignored"
		if w.Reason != "" {
			msg = "configuration key has no effect: " + w.Reason
		}
		log.WithFields(logrus.Fields{"file": w.File, "key": w.Key}).Warn(msg)
	}
	if err != nil {
		return nil, err
	}
	overrides := false
	for name, dst := range map[string]*string{
		flagListen:   &cfg.Crio.API.Listen,
		flagRoot:     &cfg.Crio.Root,
		flagRunRoot:  &cfg.Crio.RunRoot,
		flagLogLevel: &cfg.Crio.Runtime.LogLevel,
	} {
		if v, set := flag(ctx, name); set {
			*dst = v
			overrides = true
		}
	}
	if overrides {
		if err := cfg.Validate(); err != nil {
			return nil, fmt.Errorf("command line: %w", err)
		}
	}
	return cfg, nil
}
