package server

import (
	"context"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Version returns the runtime name and versions.
func (s *Server) Version(context.Context, *runtimeapi.VersionRequest) (*runtimeapi.VersionResponse, error) {
	v := s.cfg.Version
	if v == "" {
		v = "0.0.0-dev"
	}
	return &runtimeapi.VersionResponse{
		Version: "0.1.0", RuntimeName: RuntimeName, RuntimeVersion: v, RuntimeApiVersion: RuntimeAPIVersion,
	}, nil
}
