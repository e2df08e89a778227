package main

import (
	"github.com/sirupsen/logrus"
	"github.com/urfave/cli/v2"

	"github.com/nrigate/nrigate/pkg/config"
)

func configCommand() *cli.Command {
	return &cli.Command{
		Name:  "config",
		Usage: "print the effective configuration as commented TOML (crio.conf format)",
		Description: "Prints every honored key with its documentation and value. The output,\n" +
			"passed back with --config, loads to the same configuration.",
		Flags: append(globalFlags(),
			&cli.BoolFlag{Name: "default", Usage: "print the built-in defaults instead of the loaded files"},
		),
		Action: func(ctx *cli.Context) error {
			cfg := config.DefaultConfig()
			if !ctx.Bool("default") {
				log := logrus.New()
				log.SetOutput(ctx.App.ErrWriter)
				var err error
				if cfg, err = loadConfig(ctx, log); err != nil {
					return err
				}
			}
			return config.WriteTemplate(ctx.App.Writer, cfg)
		},
	}
}
