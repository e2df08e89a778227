// Command sdnotify listens on a unix datagram socket the way systemd does
// for a service's NOTIFY_SOCKET, and prints every datagram it receives
// (sd_notify: READY=1, WATCHDOG=1, ...) on a line of its own, prefixed
// with the seconds since it started. The suites run patched CRI-O and containerd
// with NOTIFY_SOCKET (and WATCHDOG_USEC) pointing at it, without systemd.
//
//	sdnotify SOCKET
package main

import (
	"fmt"
	"net"
	"os"
	"strings"
	"time"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: sdnotify SOCKET")
		os.Exit(2)
	}

	path := os.Args[1]
	_ = os.Remove(path)

	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		fmt.Fprintf(os.Stderr, "sdnotify: %v\n", err)
		os.Exit(1)
	}
	defer conn.Close()

	start := time.Now()
	buf := make([]byte, 4096)

	for {
		n, err := conn.Read(buf)
		if err != nil {
			fmt.Fprintf(os.Stderr, "sdnotify: %v\n", err)
			os.Exit(1)
		}

		for _, line := range strings.Split(strings.TrimSpace(string(buf[:n])), "\n") {
			fmt.Printf("%.3f %s\n", time.Since(start).Seconds(), line)
		}
	}
}
