package nripolicy

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	grpcstatus "google.golang.org/grpc/status"
)

var (
	// ErrRefused is wrapped by every refusal of a gated request.
	ErrRefused = errors.New("nri: request refused by the NRI plugin policy")
	// ErrPluginNotReady is wrapped by a refusal before the relay: the plugin
	// is not registered, not synchronized, not subscribed or disconnected.
	ErrPluginNotReady = errors.New("required NRI plugin not ready")
	// ErrPluginNotActed is wrapped by a refusal after the relay: the plugin
	// was skipped, timed out or lost its connection during the request.
	ErrPluginNotActed = errors.New("required NRI plugin did not act on the request")
	// ErrNotAttached is returned by Admit for a request that a plugin is
	// required for when the runtime never called Attach: the policy cannot
	// tell whether upstream relays to a just-synchronized plugin, so it
	// fails closed.
	ErrNotAttached = errors.New("nri: policy not attached to an adaptation (the runtime must call Policy.Attach before Start)")
)

// RefusalError is the error of a refused gated request. It names the
// plugin, the event, the pod and container, what went wrong, how long the
// request waited and what the operator can do about it.
type RefusalError struct {
	// Plugin is the configured plugin key ("guard" or "10-guard").
	Plugin string
	// Event is the refused event.
	Event Event
	// Namespace and Pod name the pod of the request.
	Namespace, Pod string
	// Container names the container; empty for RunPodSandbox.
	Container string
	// Reason says what went wrong ("is not registered", ...).
	Reason string
	// Waited is how long the request waited for the plugin.
	Waited time.Duration
	// Err is ErrPluginNotReady or ErrPluginNotActed.
	Err error
	// RegistrationWait is the plugin's configured registration_wait.
	RegistrationWait time.Duration
	// Cause is the underlying error, if any (a transport error of the
	// plugin call, or the context error when the caller gave up waiting).
	Cause error
}

// Error implements error.
func (e *RefusalError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "nri: plugin %q is required for %s of ", e.Plugin, e.Event)
	if e.Container != "" {
		fmt.Fprintf(&b, "container %q in ", e.Container)
	}
	fmt.Fprintf(&b, "pod %s/%s (fail_policy=fail) but %s; waited %s (registration_wait=%s); ",
		e.Namespace, e.Pod, e.Reason, e.Waited.Round(time.Millisecond), e.RegistrationWait)
	if errors.Is(e.Err, ErrPluginNotActed) {
		b.WriteString("check the plugin's health and the request timeout, or exempt the pod with exclude_pod_selector / exclude_namespaces")
	} else {
		b.WriteString("start or fix the plugin, or exempt the pod with exclude_pod_selector / exclude_namespaces")
	}
	return b.String()
}

// Unwrap makes the error match ErrRefused, its kind (Err) and its Cause.
func (e *RefusalError) Unwrap() []error {
	errs := []error{ErrRefused}
	if e.Err != nil {
		errs = append(errs, e.Err)
	}
	if e.Cause != nil {
		errs = append(errs, e.Cause)
	}
	return errs
}

// GRPCStatus makes a refusal reach CRI clients as FailedPrecondition with
// the refusal text, also when the runtime wraps it (status.FromError
// unwraps): the kubelet shows the text in the pod's events.
func (e *RefusalError) GRPCStatus() *grpcstatus.Status {
	return grpcstatus.New(codes.FailedPrecondition, e.Error())
}
