package nripolicy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/containerd/nri/pkg/api"
	"google.golang.org/grpc/codes"
	grpcstatus "google.golang.org/grpc/status"
)

// What runtimes build on: the NRI-disabled check, the gRPC code of a
// refusal and the verbose Status entry.

func TestCheckNRIEnabled(t *testing.T) {
	cfg := cfgOf("guard", nil)
	if err := cfg.CheckNRIEnabled(true, "enable_nri = false"); err != nil {
		t.Fatalf("NRI enabled: %v", err)
	}
	if err := DefaultConfig().CheckNRIEnabled(false, "enable_nri = false"); err != nil {
		t.Fatalf("no plugins, NRI disabled: %v", err)
	}
	err := cfg.CheckNRIEnabled(false, "enable_nri = false")
	var fe *FieldError
	if !errors.As(err, &fe) || !errors.Is(err, ErrPolicyWithoutNRI) || !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("error %v (%T) must be a FieldError wrapping ErrPolicyWithoutNRI and ErrInvalidConfig", err, err)
	}
	if fe.Key != "plugins" || fe.Value != `["guard"]` || !strings.Contains(fe.Allowed, "enable_nri = false") {
		t.Fatalf("error names %q = %s (%s)", fe.Key, fe.Value, fe.Allowed)
	}
}

func TestRefusalIsFailedPreconditionWhenWrapped(t *testing.T) {
	p := mustNew(t, cfgOf("guard", nil))
	_, _, err := p.Admit(context.Background(), Request{Event: EventCreateContainer, Pod: pod("ns", "p", nil), Container: ctr("c")})
	if err == nil {
		t.Fatal("want a refusal")
	}
	wrapped := fmt.Errorf("creating container c: %w", err)
	st, ok := grpcstatus.FromError(wrapped)
	if !ok || st.Code() != codes.FailedPrecondition || !strings.Contains(st.Message(), `plugin "guard" is required for CreateContainer`) {
		t.Fatalf("status of the wrapped refusal = %v %v, want FailedPrecondition with the refusal text", ok, st)
	}
}

func TestVerboseInfo(t *testing.T) {
	var off *Policy
	if off.Conditions() != nil {
		t.Fatal("NRI disabled: no conditions")
	}
	got, err := off.VerboseInfo("/run/nri.sock")
	if err != nil || got[VerboseInfoKey] != `{"enabled":false,"plugins":[]}` {
		t.Fatalf("NRI disabled: %v %v", got, err)
	}
	p := mustNew(t, cfgOf("guard", nil))
	fakeConn(p, "guard", "10", true, api.Event_CREATE_CONTAINER)
	fakeConn(p, "other", "20", true, api.Event_CREATE_CONTAINER)
	got, err = p.VerboseInfo("/run/nri.sock")
	if err != nil {
		t.Fatal(err)
	}
	var info Info
	if err := json.Unmarshal([]byte(got[VerboseInfoKey]), &info); err != nil {
		t.Fatal(err)
	}
	if !info.Enabled || info.Socket != "/run/nri.sock" || info.Policy == nil || info.Policy.Plugins["guard"].FailPolicy != FailPolicyFail ||
		len(info.Plugins) != 2 || info.Plugins[0].Key != "20-other" || info.Plugins[0].Configured ||
		info.Plugins[1].Key != "guard" || info.Plugins[1].State != string(StateReady) || info.Plugins[1].Index != "10" {
		t.Fatalf("info = %s", got[VerboseInfoKey])
	}
}
