// Package cristatus asks a CRI runtime for its Status over the runtime's
// unix socket and reads what the patched runtimes (CRI-O and containerd with
// nrigate's series) report there about required NRI plugins: the
// NRIPluginsReady condition and the verbose "nri" entry. It is the one CRI
// Status client of this repository's tools (tools/nri-npd-check, the
// node-problem-detector check, and test/k8s/cristatus, the end-to-end
// test's condition watcher).
package cristatus

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

const (
	// ConditionNRIPluginsReady is the runtime condition a patched runtime
	// reports when its policy names at least one required NRI plugin.
	// It is absent when no plugin is required (or the runtime is not
	// patched).
	ConditionNRIPluginsReady = "NRIPluginsReady"
	// InfoKeyNRI is the key of the verbose Status info that holds the
	// required plugins' states, as a JSON object with a "plugins" array.
	InfoKeyNRI = "nri"
	// StateReady is the state of a plugin that is registered,
	// synchronized and subscribed to every event it is required for.
	StateReady = "ready"
	// StateReplaced is the state of an instance that went away while
	// another instance of the same required plugin was ready (a rolling
	// update to another index): not a problem, and shown for a minute.
	StateReplaced = "replaced"
)

// ErrNoSocket is returned (wrapped) by Dial when the endpoint's socket does
// not exist.
var ErrNoSocket = errors.New("runtime socket does not exist")

// Client is a CRI RuntimeService client on a unix socket.
type Client struct {
	// Endpoint is the endpoint as given, unix:///path/to.sock.
	Endpoint string
	// Socket is the socket's path.
	Socket string
	conn   *grpc.ClientConn
	rt     runtimeapi.RuntimeServiceClient
}

// SocketPath returns the socket's path of ENDPOINT, which must be
// unix:///PATH.
func SocketPath(endpoint string) (string, error) {
	path, ok := strings.CutPrefix(endpoint, "unix://")
	if !ok || !strings.HasPrefix(path, "/") {
		return "", fmt.Errorf("runtime endpoint %q: want unix:///path/to/runtime.sock", endpoint)
	}
	return path, nil
}

// DialFirst returns a client for the first of ENDPOINTS whose socket
// exists, as crictl picks a runtime from its default endpoints: a node runs
// one runtime, so that one list (CRI-O's socket, containerd's) serves
// every node. Every endpoint must be unix:///PATH. When no socket exists,
// the error wraps ErrNoSocket and names every path it looked at.
func DialFirst(endpoints []string) (*Client, error) {
	if len(endpoints) == 0 {
		return nil, errors.New("no runtime endpoint given")
	}
	paths := make([]string, len(endpoints))
	for i, ep := range endpoints {
		p, err := SocketPath(ep)
		if err != nil {
			return nil, err
		}
		paths[i] = p
	}
	for i, p := range paths {
		if _, err := os.Stat(p); errors.Is(err, os.ErrNotExist) {
			continue
		}
		return Dial(endpoints[i])
	}
	return nil, fmt.Errorf("%w: %s", ErrNoSocket, strings.Join(paths, ", "))
}

// Dial checks that ENDPOINT is unix:///PATH and that PATH exists, and
// returns a client for it. gRPC connects lazily, on the first call.
func Dial(endpoint string) (*Client, error) {
	path, err := SocketPath(endpoint)
	if err != nil {
		return nil, err
	}
	if _, err := os.Stat(path); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("%w: %s", ErrNoSocket, path)
		}
		return nil, fmt.Errorf("runtime socket %s: %w", path, err)
	}
	conn, err := grpc.NewClient(endpoint, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, fmt.Errorf("runtime endpoint %q: %w", endpoint, err)
	}
	return &Client{Endpoint: endpoint, Socket: path, conn: conn, rt: runtimeapi.NewRuntimeServiceClient(conn)}, nil
}

// Close closes the connection.
func (c *Client) Close() error { return c.conn.Close() }

// Status calls the runtime's Status. A deadline of CTX that passes before
// the answer is reported as context.DeadlineExceeded (wrapped), whatever
// gRPC's wording.
func (c *Client) Status(ctx context.Context, verbose bool) (*runtimeapi.StatusResponse, error) {
	resp, err := c.rt.Status(ctx, &runtimeapi.StatusRequest{Verbose: verbose})
	if err != nil {
		if status.Code(err) == codes.DeadlineExceeded || errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return nil, fmt.Errorf("%w: %v", context.DeadlineExceeded, err)
		}
		return nil, err
	}
	return resp, nil
}

// Condition returns the runtime condition of type TYP, or nil if the
// runtime does not report it.
func Condition(resp *runtimeapi.StatusResponse, typ string) *runtimeapi.RuntimeCondition {
	for _, c := range resp.GetStatus().GetConditions() {
		if c.GetType() == typ {
			return c
		}
	}
	return nil
}

// Plugin is one entry of the verbose "nri" info: an instance of a
// required plugin (NRI's RequiredPluginsStatus lists no other plugin).
// Only the fields the tools use are decoded; unknown fields are ignored.
type Plugin struct {
	// Key is the policy's key for the plugin (its name, or index-name).
	Key string `json:"key"`
	// Name is the plugin's name.
	Name string `json:"name"`
	// Index is the instance's index, empty for a required plugin of which
	// no instance registered.
	Index string `json:"index"`
	// State is "ready", "not registered", "registered", "not subscribed",
	// "disconnected" or "replaced" (StateReplaced).
	State string `json:"state"`
	// LastError is the last transport error seen, if any.
	LastError string `json:"last_error"`
	// ReplacedBy is the instance that replaced a replaced instance.
	ReplacedBy string `json:"replaced_by"`
}

// ID names the entry: the instance as INDEX-NAME where the entry has an
// index (a key that names a plugin by name alone covers every instance of
// it, and each has an entry), else the key, else the name.
func (p Plugin) ID() string {
	if p.Index != "" && p.Name != "" {
		return p.Index + "-" + p.Name
	}
	if p.Key != "" {
		return p.Key
	}
	return p.Name
}

// Ready tells whether the plugin's state is "ready".
func (p Plugin) Ready() bool { return p.State == StateReady }

// Down tells whether the entry is a problem: neither ready nor replaced
// by another instance of the same plugin.
func (p Plugin) Down() bool { return p.State != StateReady && p.State != StateReplaced }

// NRIPlugins decodes the verbose "nri" info of RESP (a Status answer to a
// verbose request). It fails if the entry is missing, is not a JSON object
// with a "plugins" array, or an entry has neither key nor name, or no state.
func NRIPlugins(resp *runtimeapi.StatusResponse) ([]Plugin, error) {
	raw, ok := resp.GetInfo()[InfoKeyNRI]
	if !ok {
		return nil, fmt.Errorf("verbose status has no %q entry", InfoKeyNRI)
	}
	var info struct {
		Plugins *[]Plugin `json:"plugins"`
	}
	if err := json.Unmarshal([]byte(raw), &info); err != nil {
		return nil, fmt.Errorf("verbose status entry %q: %w", InfoKeyNRI, err)
	}
	if info.Plugins == nil {
		return nil, fmt.Errorf("verbose status entry %q has no \"plugins\" array", InfoKeyNRI)
	}
	for i, p := range *info.Plugins {
		if p.ID() == "" {
			return nil, fmt.Errorf("verbose status entry %q: plugin %d has neither key nor name", InfoKeyNRI, i)
		}
		if p.State == "" {
			return nil, fmt.Errorf("verbose status entry %q: plugin %q has no state", InfoKeyNRI, p.ID())
		}
	}
	return *info.Plugins, nil
}
