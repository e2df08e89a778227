package nripolicy_test

import (
	"context"
	"testing"
	"time"

	"github.com/containerd/nri/pkg/adaptation"
	validator "github.com/containerd/nri/plugins/default-validator/builtin"
	"github.com/containerd/ttrpc"

	"github.com/nrigate/nrigate/pkg/nripolicy/internal/testrig"
)

// These tests measure the escapes DESIGN.md ("The problem") attributes to
// plain upstream with the default validator requiring plugin "guard". They
// are the reason pkg/nripolicy exists; if upstream closes an escape, the
// test fails and DESIGN.md must be updated.

func newValidatorRig(t *testing.T) *upstreamRig {
	return newUpstreamRig(t, nil, adaptation.WithDefaultValidator(&validator.DefaultValidatorConfig{
		Enable:          true,
		RequiredPlugins: []string{"guard"},
	}))
}

func TestUpstreamValidatorRefusesAbsentPlugin(t *testing.T) {
	r := newValidatorRig(t)
	if _, err := r.create(context.Background(), testrig.Pod("default", nil, nil)); err == nil {
		t.Fatal("the default validator must refuse a container while the required plugin is absent")
	}
	r.faulty("guard", "10", "--events", "CreateContainer")
	rsp, err := r.create(context.Background(), testrig.Pod("default", nil, nil))
	if err != nil || !testrig.Acted(rsp, "guard") {
		t.Fatalf("guard present: err %v", err)
	}
}

// escapeOnce runs one create against a guard started with args and reports
// whether the first container escaped (created without guard's adjustment).
func escapeOnce(t *testing.T, args ...string) bool {
	r := newValidatorRig(t)
	r.faulty("guard", "10", args...)
	rsp, err := r.create(context.Background(), testrig.Pod("default", nil, nil))
	return err == nil && !testrig.Acted(rsp, "guard")
}

func TestUpstreamValidatorEscapeCrashDuringCreate(t *testing.T) {
	if !escapeOnce(t, "--events", "CreateContainer", "--mode", "crash-during") {
		t.Fatal("DESIGN.md: a crash during CreateContainer lets the first container through; upstream no longer does")
	}
}

func TestUpstreamValidatorEscapeCrashBeforeAnswering(t *testing.T) {
	if !escapeOnce(t, "--events", "CreateContainer", "--mode", "crash-before") {
		t.Fatal("a plugin that exits when the request arrives lets the container through; upstream no longer does")
	}
}

func TestUpstreamValidatorEscapeHang(t *testing.T) {
	if !escapeOnce(t, "--events", "CreateContainer", "--mode", "hang", "--hang", "2s") {
		t.Fatal("DESIGN.md: a hang during CreateContainer lets the first container through; upstream no longer does")
	}
}

func TestUpstreamValidatorEscapeUnsubscribed(t *testing.T) {
	r := newValidatorRig(t)
	r.faulty("guard", "10", "--events", "RunPodSandbox")
	for i := 0; i < 3; i++ {
		rsp, err := r.create(context.Background(), testrig.Pod("default", nil, nil))
		if err != nil || testrig.Acted(rsp, "guard") {
			t.Fatalf("DESIGN.md: a registered plugin not subscribed to CreateContainer satisfies the check; got err %v", err)
		}
	}
}

// Two instances of the required plugin, one hung past the request
// timeout: the other's answer satisfies the validator, so the container
// is created although 10-guard never acted on it.
func TestUpstreamValidatorEscapeOneOfTwoInstancesHung(t *testing.T) {
	r := newValidatorRig(t)
	hung := r.faulty("guard", "10", "--events", "CreateContainer", "--mode", "hang", "--hang", "2s")
	r.faulty("guard", "20", "--events", "CreateContainer")
	pod := testrig.Pod("default", nil, nil)
	rsp, err := r.create(context.Background(), pod)
	if err != nil || !testrig.Acted(rsp, "guard") {
		t.Fatalf("upstream now refuses a container one of two instances hung on (err %v): update docs/design.md", err)
	}
	if hung.ActedOn("CreateContainer", pod.GetUid()) {
		t.Fatal("the hung instance acted after all")
	}
}

func TestUpstreamValidatorNeverChecksRunPodSandbox(t *testing.T) {
	r := newValidatorRig(t)
	if err := r.a.RunPodSandbox(context.Background(), &adaptation.RunPodSandboxRequest{Pod: testrig.Pod("default", nil, nil)}); err != nil {
		t.Fatalf("DESIGN.md: RunPodSandbox is never checked by the default validator; got %v", err)
	}
}

// With the plugin-declared FailurePolicy fail_request, upstream itself
// refuses on a crash: the comparison the policy module improves on (it
// does not depend on the plugin declaring it).
func TestUpstreamPluginDeclaredFailRequestRefusesCrash(t *testing.T) {
	r := newUpstreamRig(t, nil)
	r.faulty("guard", "10", "--events", "CreateContainer", "--mode", "crash-during", "--failure-policy", "fail-request")
	if _, err := r.create(context.Background(), testrig.Pod("default", nil, nil)); err == nil {
		t.Fatal("a plugin declaring fail_request must fail the request it crashed on")
	}
}

// A plugin killed just before the request: measure how often the first
// container escapes the default validator. Whether the adaptation noticed
// the close before the request is a race; DESIGN.md says "usually
// escapes". The test pins that at least one of the rounds escapes (9-10 of
// 10 on an idle machine, 2 of 10 under load): if upstream closed the race,
// this fails and docs/design.md must change.
func TestUpstreamValidatorCrashJustBefore(t *testing.T) {
	const rounds = 20
	spy := &connSpy{closed: map[*ttrpc.Client]time.Time{}}
	r := newUpstreamRig(t, nil, adaptation.WithDefaultValidator(&validator.DefaultValidatorConfig{
		Enable:          true,
		RequiredPlugins: []string{"guard"},
	}), adaptation.WithTTRPCOptions([]ttrpc.ClientOpts{spy.clientOpt}, nil))
	escapes, refused := 0, 0
	for i := 0; i < rounds; i++ {
		f := r.faulty("guard", "10", "--events", "CreateContainer")
		_ = f.Cmd.Process.Kill() // do not wait for the reaping: race the request
		rsp, err := r.create(context.Background(), testrig.Pod("default", nil, nil))
		switch {
		case err != nil:
			refused++
		case !testrig.Acted(rsp, "guard"):
			escapes++
		}
		<-f.Exited()
		// The adaptation drops the dead plugin once its close handler ran.
		if !testrig.Eventually(2*time.Second, func() bool { return spy.closedCount() == i+1 }) {
			t.Fatalf("round %d: the killed plugin's connection did not close", i)
		}
	}
	t.Logf("crash just before CreateContainer: %d/%d escaped, %d refused", escapes, rounds, refused)
	if escapes+refused != rounds {
		t.Fatalf("a killed plugin acted on a request (%d escapes, %d refused of %d)", escapes, refused, rounds)
	}
	if escapes == 0 {
		t.Fatalf("no escape in %d rounds: upstream's default validator now refuses a plugin killed just before the request; update DESIGN.md and docs/design.md", rounds)
	}
}
