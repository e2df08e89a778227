package server

import (
	"context"
	"errors"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nrigate/nrigate/internal/storage"
)

// PullImage pulls a docker reference or a containers transport reference
// (oci-archive:PATH, oci:PATH:TAG) and returns the image ID.
func (s *Server) PullImage(ctx context.Context, req *runtimeapi.PullImageRequest) (*runtimeapi.PullImageResponse, error) {
	ref := req.GetImage().GetImage()
	if ref == "" {
		return nil, status.Error(codes.InvalidArgument, "pull: image reference must not be empty")
	}
	img, err := s.store.PullImage(ctx, ref)
	if err != nil {
		if errors.Is(err, storage.ErrInvalidReference) {
			return nil, status.Errorf(codes.InvalidArgument, "pull: %v", err)
		}
		return nil, status.Errorf(codes.Unknown, "pull: %v", err)
	}
	return &runtimeapi.PullImageResponse{ImageRef: img.ID}, nil
}
