package server

import (
	"context"
	"errors"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nrigate/nrigate/internal/storage"
)

// RemoveImage removes an image; a missing image is not an error.
func (s *Server) RemoveImage(_ context.Context, req *runtimeapi.RemoveImageRequest) (*runtimeapi.RemoveImageResponse, error) {
	ref := req.GetImage().GetImage()
	if ref == "" {
		return nil, status.Error(codes.InvalidArgument, "remove image: image reference must not be empty")
	}
	if err := s.store.RemoveImage(ref); err != nil && !errors.Is(err, storage.ErrImageNotFound) {
		return nil, status.Errorf(codes.FailedPrecondition, "remove image %q: %v", ref, err)
	}
	return &runtimeapi.RemoveImageResponse{}, nil
}
