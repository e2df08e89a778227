package server

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nrigate/nrigate/internal/oci"
	"github.com/nrigate/nrigate/internal/storage"
)

func validateContainerConfig(cfg *runtimeapi.ContainerConfig) error {
	if cfg == nil {
		return status.Error(codes.InvalidArgument, "container config is required")
	}
	if cfg.GetMetadata().GetName() == "" {
		return status.Error(codes.InvalidArgument, "container config: metadata.name must not be empty")
	}
	if cfg.GetImage().GetImage() == "" {
		return status.Error(codes.InvalidArgument, "container config: image.image must not be empty")
	}
	if filepath.IsAbs(cfg.GetLogPath()) {
		return status.Errorf(codes.InvalidArgument, "container config: log_path %q must be relative to the pod's log_directory", cfg.LogPath)
	}
	return validateMapSizes("container config", cfg.Labels, cfg.Annotations)
}

// CreateContainer creates a container in a ready pod: root filesystem from
// the image, OCI spec from the CRI config (adjusted by the hooks), then
// `runc create` under conmon. A failure leaves nothing behind.
func (s *Server) CreateContainer(ctx context.Context, req *runtimeapi.CreateContainerRequest) (resp *runtimeapi.CreateContainerResponse, retErr error) {
	cfg := req.GetConfig()
	if err := validateContainerConfig(cfg); err != nil {
		return nil, err
	}
	sb, err := s.lookupSandbox(req.GetPodSandboxId())
	if err != nil {
		return nil, err
	}
	if sb.state() != runtimeapi.PodSandboxState_SANDBOX_READY {
		return nil, status.Errorf(codes.FailedPrecondition, "pod sandbox %s is not ready", sb.ID)
	}
	pmd := sb.Config.Metadata
	md := cfg.Metadata
	id := newID()
	name := fmt.Sprintf("k8s_%s_%s_%s_%s_%d", md.Name, pmd.Name, pmd.Namespace, pmd.Uid, md.Attempt)
	if err := s.reserveName(name, id); err != nil {
		return nil, err
	}
	log := s.log.WithFields(map[string]any{"pod": pmd.Namespace + "/" + pmd.Name, "container": md.Name, "id": id})
	storageCreated, runtimeCreated := false, false
	// finish is the hook's end of the create: called last, after the
	// cleanup, so that the plugins hear of the undo only once nothing of
	// the container is left, and plugin sync stays blocked until then.
	var finish func(error)
	defer func() {
		if retErr == nil {
			return
		}
		if finish != nil {
			defer finish(retErr)
		}
		if runtimeCreated {
			if err := s.runtime.Delete(context.Background(), id); err != nil {
				log.WithError(err).Warn("cleanup: runtime delete")
			}
		}
		if storageCreated {
			if err := s.store.DeleteContainer(id); err != nil {
				log.WithError(err).Warn("cleanup: storage delete")
			}
		}
		s.removeRecord(recordContainer, id)
		s.releaseName(name)
	}()

	img, err := s.store.ImageStatus(ctx, cfg.Image.Image)
	if err != nil {
		if errors.Is(err, storage.ErrImageNotFound) {
			return nil, status.Errorf(codes.NotFound, "image %q not found: pull it first", cfg.Image.Image)
		}
		return nil, status.Errorf(codes.Internal, "image %q: %v", cfg.Image.Image, err)
	}
	// Marked creating before anything exists, so that a daemon killed from
	// here on leaves a record of what to clean up at its next start.
	if err := s.writeRecordErr(recordContainer, id, ctrRecord{
		ID: id, SandboxID: sb.ID, Name: name, CreatedAt: time.Now(), Config: cfg, Creating: true,
	}); err != nil {
		return nil, status.Errorf(codes.Internal, "container %q: %v", md.Name, err)
	}
	if err := s.store.CreateContainer(id, name, img.ID); err != nil {
		return nil, status.Errorf(codes.Internal, "create root filesystem: %v", err)
	}
	storageCreated = true
	rootfs, err := s.store.Mount(id)
	if err != nil {
		return nil, status.Errorf(codes.Internal, "mount root filesystem: %v", err)
	}
	g, err := oci.GenerateSpec(oci.SpecInput{
		ID: id, SandboxID: sb.ID, Container: cfg, Sandbox: sb.Config, Image: img.Config,
		RootFS: rootfs, NetNSPath: sb.NetNSPath,
	})
	if err != nil {
		if errors.Is(err, oci.ErrInvalidConfig) {
			return nil, status.Errorf(codes.InvalidArgument, "container %q: %v", md.Name, err)
		}
		return nil, status.Errorf(codes.Internal, "container %q: %v", md.Name, err)
	}
	var logPath string
	if cfg.LogPath != "" && sb.Config.LogDirectory != "" {
		logPath = filepath.Join(sb.Config.LogDirectory, cfg.LogPath)
	}
	c := &Container{
		ID: id, SandboxID: sb.ID, Name: name, Config: cfg, ImageID: img.ID, ImageName: cfg.Image.Image,
		LogPath: logPath, CreatedAt: time.Now(),
	}
	finish, err = s.hooks.CreateContainer(ctx, sb, c, g)
	if err != nil {
		return nil, toStatus(codes.FailedPrecondition, err, "container %q refused", md.Name)
	}
	c.Spec = g.Config
	pid, err := s.runtime.Create(ctx, oci.CreateOptions{ID: id, Name: name, Spec: g.Config, LogPath: logPath})
	if err != nil {
		return nil, status.Errorf(codes.Internal, "container %q: %v", md.Name, err)
	}
	runtimeCreated = true
	c.Pid = pid
	// The pod may have been stopped while we were creating.
	if sb.state() != runtimeapi.PodSandboxState_SANDBOX_READY {
		return nil, status.Errorf(codes.FailedPrecondition, "pod sandbox %s stopped during container creation", sb.ID)
	}
	// The complete record replaces the creating one: the commit point.
	if err := s.writeRecordErr(recordContainer, id, c.record()); err != nil {
		return nil, status.Errorf(codes.Internal, "container %q: %v", md.Name, err)
	}
	s.mu.Lock()
	s.containers[id] = c
	s.mu.Unlock()
	if finish != nil {
		finish(nil)
	}
	s.hooks.PostCreateContainer(ctx, sb, c)
	log.Info("container created")
	return &runtimeapi.CreateContainerResponse{ContainerId: id}, nil
}
