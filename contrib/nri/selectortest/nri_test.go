// Package selectortest checks NRI's required plugins from outside NRI's
// module, against Kubernetes (k8s.io/apimachinery), which NRI's go.mod must
// not require:
//
//   - selector_test.go: the label selector of match_labels and
//     match_expressions, a plugin's own and an exemption's, accepts exactly
//     the selectors metav1.LabelSelectorAsSelector accepts and selects the
//     same pods;
//   - scope_test.go: the whole decision whether a plugin is required for a
//     request (events, namespaces, exclude_namespaces, the selector,
//     runtime_handlers with the default handler, static pods, exemptions)
//     follows the documented rule, written here independently of NRI's
//     code, and every configuration NRI rejects is rejected with an error
//     that wraps ErrInvalidRequiredPlugins and names the invalid key.
//
// NRI's matcher is unexported: the tests reach it as a runtime does. An
// adaptation made by nri.New with WithRequiredPlugins, never started,
// requires a plugin that never registers, with registration_wait "0s":
// WaitForRequiredPlugins then refuses a request at once, with an error
// wrapping ErrRequiredPluginUnavailable, exactly when the plugin is
// required for it, and returns nil when it is not.
package selectortest

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"

	nri "github.com/containerd/nri/pkg/adaptation"
	"github.com/containerd/nri/pkg/log"
)

type quiet struct{}

func (quiet) Debugf(context.Context, string, ...any) {}
func (quiet) Infof(context.Context, string, ...any)  {}
func (quiet) Warnf(context.Context, string, ...any)  {}
func (quiet) Errorf(context.Context, string, ...any) {}

func TestMain(m *testing.M) {
	log.Set(quiet{})
	os.Exit(m.Run())
}

func syncFn(context.Context, nri.SyncCB) error { return nil }

func updateFn(context.Context, []*nri.ContainerUpdate) ([]*nri.ContainerUpdate, error) {
	return nil, nil
}

// adaptation returns a runtime's adaptation, not started, that requires
// plugins, or the error of the configuration. It checks that the three
// ways a runtime hands NRI a configuration agree on it: Validate, New
// with WithRequiredPlugins and UpdateRequiredPlugins, and that a rejection
// wraps ErrInvalidRequiredPlugins; the error returned is Validate's.
func adaptation(t *testing.T, plugins nri.RequiredPlugins, defaultHandler string) (*nri.Adaptation, error) {
	t.Helper()
	verr := plugins.Validate()
	a, nerr := nri.New("selectortest", "v0", syncFn, updateFn,
		nri.WithRequiredPlugins(plugins), nri.WithDefaultRuntimeHandler(defaultHandler))
	reload, err := nri.New("selectortest", "v0", syncFn, updateFn)
	if err != nil {
		t.Fatalf("New without required plugins: %v", err)
	}
	uerr := reload.UpdateRequiredPlugins(plugins, defaultHandler)
	if (verr == nil) != (nerr == nil) || (verr == nil) != (uerr == nil) {
		t.Fatalf("Validate, New and UpdateRequiredPlugins disagree on %s: %v / %v / %v", describePlugins(plugins), verr, nerr, uerr)
	}
	if verr == nil {
		return a, nil
	}
	for _, err := range []error{verr, nerr, uerr} {
		if !errors.Is(err, nri.ErrInvalidRequiredPlugins) {
			t.Fatalf("the error %q of %s does not wrap ErrInvalidRequiredPlugins", err, describePlugins(plugins))
		}
		if !strings.Contains(err.Error(), verr.Error()) {
			t.Fatalf("the error %q of %s does not say what Validate says: %q", err, describePlugins(plugins), verr)
		}
	}
	return nil, verr
}

// refuses returns true if the adaptation refuses the request for the pod
// (ctr is nil for RunPodSandbox), false if it lets it through.
func refuses(t *testing.T, a *nri.Adaptation, request nri.Event, pod *nri.PodSandbox, ctr *nri.Container) bool {
	t.Helper()
	err := a.WaitForRequiredPlugins(context.Background(), request, pod, ctr)
	if err == nil {
		return false
	}
	if !errors.Is(err, nri.ErrRequiredPluginUnavailable) {
		t.Fatalf("WaitForRequiredPlugins(%s) returned an error that is no refusal: %v", request.PrettyName(), err)
	}
	return true
}
