package server

import (
	"context"
	"fmt"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nrigate/nrigate/internal/oci"
)

func validatePodConfig(cfg *runtimeapi.PodSandboxConfig) error {
	if cfg == nil {
		return status.Error(codes.InvalidArgument, "pod sandbox config is required")
	}
	md := cfg.GetMetadata()
	if md == nil {
		return status.Error(codes.InvalidArgument, "pod sandbox config: metadata is required")
	}
	for field, v := range map[string]string{"name": md.Name, "namespace": md.Namespace, "uid": md.Uid} {
		if v == "" {
			return status.Errorf(codes.InvalidArgument, "pod sandbox config: metadata.%s must not be empty", field)
		}
	}
	return validateMapSizes("pod sandbox config", cfg.Labels, cfg.Annotations)
}

// MaxMapBytes bounds the total size (keys plus values) of a pod's or a
// container's labels, and separately of its annotations: Kubernetes'
// own limit for annotations, so a kubelet never sends more, while an
// absurd request cannot make every list, status and NRI call carry it.
const MaxMapBytes = 256 << 10

func validateMapSizes(what string, labels, annotations map[string]string) error {
	for i, m := range []map[string]string{labels, annotations} {
		n := 0
		for k, v := range m {
			n += len(k) + len(v)
		}
		if n > MaxMapBytes {
			return status.Errorf(codes.InvalidArgument, "%s: %s total %d bytes, more than the %d allowed",
				what, [...]string{"labels", "annotations"}[i], n, MaxMapBytes)
		}
	}
	return nil
}

func (s *Server) checkHandler(h string) error {
	if h != "" && h != s.cfg.RuntimeName {
		return status.Errorf(codes.InvalidArgument, "runtime handler %q is not configured (known: %q)", h, s.cfg.RuntimeName)
	}
	return nil
}

// RunPodSandbox creates a pod: its network namespace (unless host network)
// and its record. Pods have no infra container.
func (s *Server) RunPodSandbox(ctx context.Context, req *runtimeapi.RunPodSandboxRequest) (resp *runtimeapi.RunPodSandboxResponse, retErr error) {
	cfg := req.GetConfig()
	if err := validatePodConfig(cfg); err != nil {
		return nil, err
	}
	if err := s.checkHandler(req.GetRuntimeHandler()); err != nil {
		return nil, err
	}
	if err := oci.ValidateCgroupParent(cfg.GetLinux().GetCgroupParent()); err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "pod sandbox config: %v", err)
	}
	md := cfg.Metadata
	id := newID()
	name := fmt.Sprintf("k8s_%s_%s_%s_%d", md.Name, md.Namespace, md.Uid, md.Attempt)
	if err := s.reserveName(name, id); err != nil {
		return nil, err
	}
	sb := &Sandbox{ID: id, Name: name, Config: cfg, RuntimeHandler: req.GetRuntimeHandler(), CreatedAt: time.Now(), State: runtimeapi.PodSandboxState_SANDBOX_READY}
	var finish func(error)
	defer func() {
		if retErr != nil {
			if finish != nil {
				defer finish(retErr)
			}
			if sb.NetNSPath != "" {
				_ = oci.DeleteNetNS(id)
			}
			s.removeRecord("pod", id)
			s.releaseName(name)
		}
	}()
	// Marked creating before the namespace exists and until the hooks (which
	// may wait for a plugin) said yes, so that a daemon killed meanwhile
	// leaves a record of the namespace to clean up at its next start.
	pending := sb.record()
	pending.Creating = true
	if err := s.writeRecordErr(recordPod, id, pending); err != nil {
		return nil, status.Errorf(codes.Internal, "pod %s/%s: %v", md.Namespace, md.Name, err)
	}
	if !sb.HostNetwork() {
		p, err := oci.CreateNetNS(id)
		if err != nil {
			return nil, status.Errorf(codes.Internal, "pod %s/%s: %v", md.Namespace, md.Name, err)
		}
		sb.NetNSPath = p
	}
	finish, err := s.hooks.RunPodSandbox(ctx, sb)
	if err != nil {
		return nil, toStatus(codes.FailedPrecondition, err, "pod %s/%s refused", md.Namespace, md.Name)
	}
	// The complete record replaces the creating one: the commit point.
	if err := s.writeRecordErr(recordPod, id, sb.record()); err != nil {
		return nil, status.Errorf(codes.Internal, "pod %s/%s: %v", md.Namespace, md.Name, err)
	}
	s.mu.Lock()
	s.sandboxes[id] = sb
	s.mu.Unlock()
	if finish != nil {
		finish(nil)
	}
	s.log.WithFields(map[string]any{"pod": md.Namespace + "/" + md.Name, "id": id}).Info("pod sandbox ready")
	return &runtimeapi.RunPodSandboxResponse{PodSandboxId: id}, nil
}
