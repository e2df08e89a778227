package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v2"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nrigate/nrigate/internal/nri"
	"github.com/nrigate/nrigate/pkg/nripolicy"
	"github.com/nrigate/nrigate/server"
)

const flagRuntimeEndpoint = "runtime-endpoint"

// statusCommand is the client side: it asks the running daemon, through
// verbose CRI Status, for its state.
func statusCommand() *cli.Command {
	return &cli.Command{
		Name:  "status",
		Usage: "show the state of the running daemon",
		Subcommands: []*cli.Command{{
			Name:  "nri",
			Usage: "table of the configured and connected NRI plugins, read from the running daemon",
			Flags: []cli.Flag{
				&cli.StringFlag{Name: flagRuntimeEndpoint, Aliases: []string{"r"},
					Usage: "CRI `SOCKET` of the daemon (default: --listen, else " + server.DefaultListen + ")"},
				&cli.DurationFlag{Name: "timeout", Value: 5 * time.Second, Usage: "request timeout"},
			},
			Action: statusNRI,
		}},
	}
}

func statusNRI(ctx *cli.Context) error {
	ep := ctx.String(flagRuntimeEndpoint)
	if ep == "" {
		ep, _ = flag(ctx, flagListen)
	}
	if ep == "" {
		ep = server.DefaultListen
	}
	ep = strings.TrimPrefix(ep, "unix://")
	conn, err := grpc.NewClient("unix://"+ep, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return fmt.Errorf("connecting to %s: %w", ep, err)
	}
	defer conn.Close()
	rctx, cancel := context.WithTimeout(context.Background(), ctx.Duration("timeout"))
	defer cancel()
	resp, err := runtimeapi.NewRuntimeServiceClient(conn).Status(rctx, &runtimeapi.StatusRequest{Verbose: true})
	if err != nil {
		return fmt.Errorf("CRI Status from %s: %w", ep, err)
	}
	raw, ok := resp.GetInfo()[nri.VerboseInfoKey]
	if !ok {
		return fmt.Errorf("the daemon at %s reports no %q status (not nrigate?)", ep, nri.VerboseInfoKey)
	}
	var info nripolicy.Info
	if err := json.Unmarshal([]byte(raw), &info); err != nil {
		return fmt.Errorf("decoding the NRI status: %w", err)
	}
	return printNRIStatus(ctx.App.Writer, &info, resp.GetStatus().GetConditions())
}

func printNRIStatus(w io.Writer, info *nripolicy.Info, conds []*runtimeapi.RuntimeCondition) error {
	if !info.Enabled {
		_, err := fmt.Fprintln(w, "NRI is disabled")
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "PLUGIN\tINDEX\tSTATE\tCONFIGURED\tEVENTS\tFAIL POLICY\tSINCE\tLAST ERROR")
	for _, p := range info.Plugins {
		since := "-"
		if !p.Since.IsZero() {
			since = p.Since.UTC().Format(time.RFC3339)
		}
		idx, events, fp, lastErr := dash(p.Index), dash(strings.Join(p.Events, ",")), dash(p.FailPolicy), dash(p.LastError)
		name := p.Key
		if name == "" {
			name = p.Name
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%t\t%s\t%s\t%s\t%s\n", name, idx, p.State, p.Configured, events, fp, since, lastErr)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, c := range conds {
		if c.Type == runtimeapi.RuntimeReady {
			continue
		}
		line := fmt.Sprintf("%s=%t", c.Type, c.Status)
		if c.Reason != "" {
			line += " (" + c.Reason + ": " + c.Message + ")"
		}
		fmt.Fprintln(w, line)
	}
	return nil
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
