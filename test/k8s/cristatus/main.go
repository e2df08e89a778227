// Command cristatus watches a CRI runtime's Status conditions for the
// Kubernetes end-to-end test (test/k8s): it calls Status every -interval
// and prints one line per change of the watched condition,
//
//	2026-01-02T15:04:05.123456789Z NetworkReady=false reason=NRIPluginNotReady message=...
//
// so that the test can tell, to a few milliseconds, when the runtime
// reported NetworkReady=true after the required plugin registered (the
// runtime's part of the node's way to Ready). crictl info costs a process
// start per call (~50 ms here), too coarse for that.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/nrigate/nrigate/internal/cristatus"
)

func main() {
	endpoint := flag.String("endpoint", "", "CRI endpoint, unix:///path/to.sock")
	cond := flag.String("condition", "NetworkReady", "condition type to watch")
	interval := flag.Duration("interval", 2*time.Millisecond, "time between Status calls")
	flag.Parse()
	if *endpoint == "" {
		fmt.Fprintln(os.Stderr, "cristatus: -endpoint is required")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	client, err := cristatus.Dial(*endpoint)
	if err != nil {
		fmt.Fprintln(os.Stderr, "cristatus:", err)
		os.Exit(1)
	}
	defer client.Close()
	last := ""
	for ctx.Err() == nil {
		state := "unreachable"
		cctx, cancel := context.WithTimeout(ctx, time.Second)
		resp, err := client.Status(cctx, false)
		cancel()
		if err == nil {
			state = *cond + "=absent"
			if c := cristatus.Condition(resp, *cond); c != nil {
				state = fmt.Sprintf("%s=%t reason=%s message=%s", c.GetType(), c.GetStatus(), c.GetReason(),
					strings.ReplaceAll(c.GetMessage(), "\n", " "))
			}
		}
		if state != last {
			fmt.Printf("%s %s\n", time.Now().UTC().Format(time.RFC3339Nano), state)
			last = state
		}
		select {
		case <-ctx.Done():
		case <-time.After(*interval):
		}
	}
}
