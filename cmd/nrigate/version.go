package main

import (
	"fmt"
	"runtime"

	"github.com/urfave/cli/v2"

	"github.com/nrigate/nrigate/internal/version"
)

func versionCommand() *cli.Command {
	return &cli.Command{
		Name:  "version",
		Usage: "print the nrigate version",
		Action: func(ctx *cli.Context) error {
			fmt.Fprintf(ctx.App.Writer, "nrigate version %s\ngo version %s %s/%s\n",
				version.Version, runtime.Version(), runtime.GOOS, runtime.GOARCH)
			return nil
		},
	}
}
