package oci

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// NetNSDir is where `ip netns` keeps named network namespaces.
const NetNSDir = "/var/run/netns"

// NetNSName is the persistent namespace name of a pod.
func NetNSName(podID string) string {
	id := podID
	if len(id) > 12 {
		id = id[:12]
	}
	return "nrigate-" + id
}

// CreateNetNS creates a persistent named network namespace for a pod with
// iproute2 and brings its loopback up. It returns the namespace's path.
func CreateNetNS(podID string) (string, error) {
	name := NetNSName(podID)
	if out, err := exec.Command("ip", "netns", "add", name).CombinedOutput(); err != nil {
		return "", fmt.Errorf("oci: ip netns add %s: %v: %s", name, err, bytes.TrimSpace(out))
	}
	if out, err := exec.Command("ip", "-n", name, "link", "set", "lo", "up").CombinedOutput(); err != nil {
		_ = DeleteNetNS(podID)
		return "", fmt.Errorf("oci: bring up lo in %s: %v: %s", name, err, bytes.TrimSpace(out))
	}
	return filepath.Join(NetNSDir, name), nil
}

// DeleteNetNS removes the pod's namespace; a missing one is not an error.
func DeleteNetNS(podID string) error {
	name := NetNSName(podID)
	if _, err := os.Stat(filepath.Join(NetNSDir, name)); os.IsNotExist(err) {
		return nil
	}
	out, err := exec.Command("ip", "netns", "delete", name).CombinedOutput()
	if err != nil && !strings.Contains(string(out), "No such file") {
		return fmt.Errorf("oci: ip netns delete %s: %v: %s", name, err, bytes.TrimSpace(out))
	}
	return nil
}
