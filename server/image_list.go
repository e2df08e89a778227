package server

import (
	"context"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nrigate/nrigate/internal/storage"
)

func criImage(img *storage.Image) *runtimeapi.Image {
	out := &runtimeapi.Image{Id: img.ID, Size: img.Size, Spec: &runtimeapi.ImageSpec{Image: img.ID}}
	for _, n := range img.Names {
		out.RepoTags = append(out.RepoTags, n)
		if i := strings.LastIndex(n, ":"); i > 0 && !strings.Contains(n[i:], "/") {
			for _, d := range img.Digests {
				out.RepoDigests = append(out.RepoDigests, n[:i]+"@"+d)
			}
		}
	}
	if img.Config != nil {
		if u := img.Config.Config.User; u != "" {
			out.Username = u
		}
	}
	return out
}

// ListImages lists stored images, optionally those matching a reference.
func (s *Server) ListImages(ctx context.Context, req *runtimeapi.ListImagesRequest) (*runtimeapi.ListImagesResponse, error) {
	if ref := req.GetFilter().GetImage().GetImage(); ref != "" {
		img, err := s.store.ImageStatus(ctx, ref)
		if err != nil {
			return &runtimeapi.ListImagesResponse{}, nil
		}
		return &runtimeapi.ListImagesResponse{Images: []*runtimeapi.Image{criImage(img)}}, nil
	}
	imgs, err := s.store.ListImages(ctx)
	if err != nil {
		return nil, status.Errorf(codes.Internal, "list images: %v", err)
	}
	out := make([]*runtimeapi.Image, 0, len(imgs))
	for _, img := range imgs {
		out = append(out, criImage(img))
	}
	return &runtimeapi.ListImagesResponse{Images: out}, nil
}
