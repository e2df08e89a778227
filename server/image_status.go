package server

import (
	"context"
	"encoding/json"
	"errors"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nrigate/nrigate/internal/storage"
)

// ImageStatus returns the image, or no image (and no error) if it is not
// stored, as the CRI asks.
func (s *Server) ImageStatus(ctx context.Context, req *runtimeapi.ImageStatusRequest) (*runtimeapi.ImageStatusResponse, error) {
	ref := req.GetImage().GetImage()
	if ref == "" {
		return nil, status.Error(codes.InvalidArgument, "image status: image reference must not be empty")
	}
	img, err := s.store.ImageStatus(ctx, ref)
	if err != nil {
		if errors.Is(err, storage.ErrImageNotFound) {
			return &runtimeapi.ImageStatusResponse{}, nil
		}
		return nil, status.Errorf(codes.Internal, "image status: %v", err)
	}
	resp := &runtimeapi.ImageStatusResponse{Image: criImage(img)}
	if req.GetVerbose() {
		b, _ := json.Marshal(map[string]any{"imageSpec": img.Config})
		resp.Info = map[string]string{"info": string(b)}
	}
	return resp, nil
}
