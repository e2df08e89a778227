package server

import (
	"context"
	"encoding/json"
	"runtime"
	"strconv"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Status reports RuntimeReady and NetworkReady (both true: pods without CNI
// get a loopback-only namespace) plus any conditions of the installed
// provider, and, when verbose, the effective config as JSON.
func (s *Server) Status(_ context.Context, req *runtimeapi.StatusRequest) (*runtimeapi.StatusResponse, error) {
	conds := []*runtimeapi.RuntimeCondition{
		{Type: runtimeapi.RuntimeReady, Status: true},
		{Type: runtimeapi.NetworkReady, Status: true},
	}
	if s.conditions != nil {
		for _, c := range s.conditions() {
			if c == nil {
				continue
			}
			replaced := false
			for i, d := range conds {
				if d.Type == c.Type {
					conds[i], replaced = c, true
				}
			}
			if !replaced {
				conds = append(conds, c)
			}
		}
	}
	resp := &runtimeapi.StatusResponse{Status: &runtimeapi.RuntimeStatus{Conditions: conds}}
	if req.GetVerbose() {
		info := map[string]string{}
		if b, err := json.Marshal(s.effective); err == nil {
			info["config"] = string(b)
		}
		// goroutines lets load tests watch the daemon for leaks cheaply.
		info["goroutines"] = strconv.Itoa(runtime.NumGoroutine())
		if s.verboseInfo != nil {
			for k, v := range s.verboseInfo() {
				info[k] = v
			}
		}
		resp.Info = info
	}
	return resp, nil
}
