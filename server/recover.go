package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	rspec "github.com/opencontainers/runtime-spec/specs-go"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nrigate/nrigate/internal/oci"
)

// Record kinds, the prefix of each record file's name under recordDir.
const (
	recordPod       = "pod"
	recordContainer = "ctr"
)

// podRecord is the on-disk record of a pod. Creating marks a pod whose
// RunPodSandbox has not finished: found at start-up, its namespace is
// removed and it is not recovered.
type podRecord struct {
	ID             string                         `json:"id"`
	Name           string                         `json:"name"`
	RuntimeHandler string                         `json:"runtime_handler"`
	NetNSPath      string                         `json:"netns_path,omitempty"`
	CreatedAt      time.Time                      `json:"created_at"`
	State          string                         `json:"state"`
	Metadata       *runtimeapi.PodSandboxMetadata `json:"metadata"`
	Config         *runtimeapi.PodSandboxConfig   `json:"config"`
	Creating       bool                           `json:"creating,omitempty"`
}

// ctrRecord is the on-disk record of a container. Creating marks a
// container whose CreateContainer has not finished: found at start-up, its
// runtime and storage state are removed and it is not recovered.
type ctrRecord struct {
	ID         string                      `json:"id"`
	SandboxID  string                      `json:"sandbox_id"`
	Name       string                      `json:"name"`
	ImageID    string                      `json:"image_id"`
	ImageName  string                      `json:"image_name"`
	LogPath    string                      `json:"log_path,omitempty"`
	CreatedAt  time.Time                   `json:"created_at"`
	StartedAt  time.Time                   `json:"started_at"`
	Pid        int                         `json:"pid"`
	ExitCode   *int32                      `json:"exit_code,omitempty"`
	FinishedAt *time.Time                  `json:"finished_at,omitempty"`
	StopHooked bool                        `json:"stop_hooked,omitempty"`
	Config     *runtimeapi.ContainerConfig `json:"config"`
	Spec       *rspec.Spec                 `json:"spec,omitempty"`
	Creating   bool                        `json:"creating,omitempty"`
}

// RecoveryStats says what a start-up recovery found.
type RecoveryStats struct {
	// Pods and Containers were recovered from their records.
	Pods, Containers int
	// CleanedPods and CleanedContainers were half-created and removed.
	CleanedPods, CleanedContainers int
}

// recoverState rebuilds the pods, containers and reserved names from the
// records a previous daemon left under the runroot, before the exit monitor
// starts, so that its first scan sees the recovered containers and reports
// those that exited while no daemon ran. Nothing is recreated: a container's
// state is always asked of the runtime and conmon's exit file. Records of
// creates that never finished are cleaned up with what they created.
func (s *Server) recoverState(ctx context.Context) (RecoveryStats, error) {
	var stats RecoveryStats
	ents, err := os.ReadDir(s.recordDir())
	if err != nil {
		return stats, fmt.Errorf("server: recovery: %w", err)
	}
	var pods []podRecord
	var ctrs []ctrRecord
	for _, e := range ents {
		name := e.Name()
		p := filepath.Join(s.recordDir(), name)
		if !strings.HasSuffix(name, ".json") {
			// A temporary file of a write the previous daemon never renamed.
			_ = os.Remove(p)
			continue
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return stats, fmt.Errorf("server: recovery: %w", err)
		}
		log := s.log.WithField("record", name)
		switch {
		case strings.HasPrefix(name, recordPod+"-"):
			var r podRecord
			if err := json.Unmarshal(b, &r); err != nil || r.ID == "" {
				log.WithError(err).Warn("recovery: unreadable pod record, ignored")
				continue
			}
			pods = append(pods, r)
		case strings.HasPrefix(name, recordContainer+"-"):
			var r ctrRecord
			if err := json.Unmarshal(b, &r); err != nil || r.ID == "" {
				log.WithError(err).Warn("recovery: unreadable container record, ignored")
				continue
			}
			ctrs = append(ctrs, r)
		}
	}
	for _, r := range ctrs {
		if r.Creating {
			if s.cleanupContainer(ctx, r.ID) {
				stats.CleanedContainers++
			}
			continue
		}
		c := r.container()
		if st, err := s.runtime.State(ctx, c.ID); err != nil {
			s.log.WithError(err).WithField("id", c.ID).Warn("recovery: container state")
		} else if st.Status == oci.StatusStopped {
			c.setExited(st.ExitCode, st.Finished)
		} else if st.Status == oci.StatusUnknown {
			s.log.WithField("id", c.ID).Warn("recovery: the runtime no longer knows the container and no exit file exists")
		}
		s.containers[c.ID] = c
		s.names[c.Name] = c.ID
		stats.Containers++
	}
	for _, r := range pods {
		if r.Creating {
			if s.cleanupPod(r) {
				stats.CleanedPods++
			}
			continue
		}
		sb := r.sandbox()
		s.sandboxes[sb.ID] = sb
		s.names[sb.Name] = sb.ID
		stats.Pods++
	}
	for _, c := range s.containers {
		if _, ok := s.sandboxes[c.SandboxID]; !ok {
			s.log.WithFields(map[string]any{"id": c.ID, "pod": c.SandboxID}).Warn("recovery: container of an unknown pod")
		}
	}
	return stats, nil
}

// cleanupContainer removes what a half-finished create may have made: the
// runtime's container and bundle, the root filesystem, the record. The
// record stays when a step fails, so that the next start tries again.
func (s *Server) cleanupContainer(ctx context.Context, id string) bool {
	log := s.log.WithField("id", id)
	if err := s.runtime.Delete(ctx, id); err != nil {
		log.WithError(err).Warn("recovery: cannot delete a half-created container from the runtime")
		return false
	}
	if err := s.store.DeleteContainer(id); err != nil {
		log.WithError(err).Warn("recovery: cannot delete a half-created container's root filesystem")
		return false
	}
	s.removeRecord(recordContainer, id)
	log.Info("recovery: removed a half-created container")
	return true
}

// cleanupPod removes a half-created pod's network namespace and record.
func (s *Server) cleanupPod(r podRecord) bool {
	log := s.log.WithField("pod", r.ID)
	if err := oci.DeleteNetNS(r.ID); err != nil {
		log.WithError(err).Warn("recovery: cannot delete a half-created pod's network namespace")
		return false
	}
	s.removeRecord(recordPod, r.ID)
	log.Info("recovery: removed a half-created pod")
	return true
}

func (r podRecord) sandbox() *Sandbox {
	cfg := r.Config
	if cfg == nil {
		cfg = &runtimeapi.PodSandboxConfig{Metadata: r.Metadata}
	}
	state := runtimeapi.PodSandboxState_SANDBOX_NOTREADY
	if v, ok := runtimeapi.PodSandboxState_value[r.State]; ok {
		state = runtimeapi.PodSandboxState(v)
	}
	return &Sandbox{
		ID: r.ID, Name: r.Name, Config: cfg, RuntimeHandler: r.RuntimeHandler, NetNSPath: r.NetNSPath,
		CreatedAt: r.CreatedAt, State: state,
	}
}

func (r ctrRecord) container() *Container {
	cfg := r.Config
	if cfg == nil {
		cfg = &runtimeapi.ContainerConfig{}
	}
	c := &Container{
		ID: r.ID, SandboxID: r.SandboxID, Name: r.Name, Config: cfg, ImageID: r.ImageID, ImageName: r.ImageName,
		LogPath: r.LogPath, Spec: r.Spec, CreatedAt: r.CreatedAt, StartedAt: r.StartedAt, Pid: r.Pid,
		stopHooked: r.StopHooked,
	}
	if r.ExitCode != nil && r.FinishedAt != nil {
		c.exitCode, c.finishedAt = *r.ExitCode, *r.FinishedAt
	}
	return c
}

// errRecord is returned by writeRecordErr.
var errRecord = errors.New("cannot write state record")

// writeRecordErr writes a record atomically (a temporary file renamed over
// the record), so a daemon killed mid-write leaves the old record or the new
// one, never half of one.
func (s *Server) writeRecordErr(kind, id string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("%w: %v", errRecord, err)
	}
	p := filepath.Join(s.recordDir(), kind+"-"+id+".json")
	tmp := p + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return fmt.Errorf("%w: %v", errRecord, err)
	}
	if err := os.Rename(tmp, p); err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("%w: %v", errRecord, err)
	}
	return nil
}
