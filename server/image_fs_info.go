package server

import (
	"context"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// ImageFsInfo reports the space used by images and container layers.
func (s *Server) ImageFsInfo(context.Context, *runtimeapi.ImageFsInfoRequest) (*runtimeapi.ImageFsInfoResponse, error) {
	fi, err := s.store.ImageFsInfo()
	if err != nil {
		return nil, status.Errorf(codes.Internal, "image fs info: %v", err)
	}
	u := &runtimeapi.FilesystemUsage{
		Timestamp:  fi.Timestamp.UnixNano(),
		FsId:       &runtimeapi.FilesystemIdentifier{Mountpoint: fi.Mountpoint},
		UsedBytes:  &runtimeapi.UInt64Value{Value: fi.UsedBytes},
		InodesUsed: &runtimeapi.UInt64Value{Value: fi.InodesUsed},
	}
	return &runtimeapi.ImageFsInfoResponse{ImageFilesystems: []*runtimeapi.FilesystemUsage{u}, ContainerFilesystems: []*runtimeapi.FilesystemUsage{u}}, nil
}
