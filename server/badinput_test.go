package server

import (
	"context"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// criSnapshot is what a rejected request must leave unchanged: every pod
// and container with its state.
func criSnapshot(t *testing.T, ctx context.Context, rc runtimeapi.RuntimeServiceClient) []string {
	t.Helper()
	pods, err := rc.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
	if err != nil {
		t.Fatalf("ListPodSandbox: %v", err)
	}
	ctrs, err := rc.ListContainers(ctx, &runtimeapi.ListContainersRequest{})
	if err != nil {
		t.Fatalf("ListContainers: %v", err)
	}
	var out []string
	for _, p := range pods.GetItems() {
		out = append(out, "pod "+p.Id+" "+p.GetMetadata().GetName()+" "+p.State.String())
	}
	for _, c := range ctrs.GetContainers() {
		out = append(out, "ctr "+c.Id+" "+c.GetMetadata().GetName()+" "+c.PodSandboxId+" "+c.State.String())
	}
	sort.Strings(out)
	return out
}

// TestBadCRIInput sends requests with missing or absurd fields to the real
// server over its socket: each gets a clear gRPC error naming the problem
// (never Unknown or an Internal "internal error" from a recovered panic)
// and the pods and containers are unchanged afterwards.
func TestBadCRIInput(t *testing.T) {
	dir, archive := runtimeRig(t)
	srv, err := New(rigConfig(dir))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve() }()
	defer func() {
		srv.Stop()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	}()
	conn, err := grpc.NewClient("unix://"+srv.Config().Listen, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallSendMsgSize(16<<20)))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	rc, ic := runtimeapi.NewRuntimeServiceClient(conn), runtimeapi.NewImageServiceClient(conn)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for i := 0; i < 100; i++ {
		if _, err = rc.Version(ctx, &runtimeapi.VersionRequest{}); err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("Version: %v", err)
	}
	if _, err := ic.PullImage(ctx, &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: "oci-archive:" + archive}}); err != nil {
		t.Fatalf("PullImage: %v", err)
	}

	// One good pod with one created container, for duplicates and for the
	// snapshot to have something to lose.
	goodPod := &runtimeapi.PodSandboxConfig{Metadata: &runtimeapi.PodSandboxMetadata{Name: "good", Namespace: "ns", Uid: "good-uid"},
		LogDirectory: filepath.Join(dir, "logs")}
	pod, err := rc.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: goodPod})
	if err != nil {
		t.Fatalf("RunPodSandbox: %v", err)
	}
	defer func() {
		pods, _ := rc.ListPodSandbox(context.Background(), &runtimeapi.ListPodSandboxRequest{})
		for _, p := range pods.GetItems() {
			_, _ = rc.RemovePodSandbox(context.Background(), &runtimeapi.RemovePodSandboxRequest{PodSandboxId: p.Id})
		}
	}()
	image := &runtimeapi.ImageSpec{Image: "localhost/busybox:latest"}
	goodCtr := &runtimeapi.ContainerConfig{Metadata: &runtimeapi.ContainerMetadata{Name: "c1"}, Image: image,
		Command: []string{"sleep", "60"}, LogPath: "c1.log"}
	ctr, err := rc.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{PodSandboxId: pod.PodSandboxId, Config: goodCtr, SandboxConfig: goodPod})
	if err != nil {
		t.Fatalf("CreateContainer: %v", err)
	}
	before := criSnapshot(t, ctx, rc)

	huge := map[string]string{"example.com/huge": strings.Repeat("x", 1<<20)}
	podWith := func(mut func(*runtimeapi.PodSandboxConfig)) *runtimeapi.PodSandboxConfig {
		c := &runtimeapi.PodSandboxConfig{Metadata: &runtimeapi.PodSandboxMetadata{Name: "bad", Namespace: "ns", Uid: "bad-uid"}}
		mut(c)
		return c
	}
	ctrWith := func(mut func(*runtimeapi.ContainerConfig)) *runtimeapi.ContainerConfig {
		c := &runtimeapi.ContainerConfig{Metadata: &runtimeapi.ContainerMetadata{Name: "bad"}, Image: image}
		mut(c)
		return c
	}
	create := func(podID string, cfg *runtimeapi.ContainerConfig) func() error {
		return func() error {
			_, err := rc.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{PodSandboxId: podID, Config: cfg, SandboxConfig: goodPod})
			return err
		}
	}
	run := func(cfg *runtimeapi.PodSandboxConfig, handler string) func() error {
		return func() error {
			_, err := rc.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: cfg, RuntimeHandler: handler})
			return err
		}
	}
	cases := []struct {
		name string
		call func() error
		code codes.Code
		msg  string
	}{
		{"pod: nil config", run(nil, ""), codes.InvalidArgument, "config is required"},
		{"pod: nil metadata", run(&runtimeapi.PodSandboxConfig{}, ""), codes.InvalidArgument, "metadata is required"},
		{"pod: empty metadata", run(&runtimeapi.PodSandboxConfig{Metadata: &runtimeapi.PodSandboxMetadata{}}, ""), codes.InvalidArgument, "must not be empty"},
		{"pod: empty name", run(podWith(func(c *runtimeapi.PodSandboxConfig) { c.Metadata.Name = "" }), ""), codes.InvalidArgument, "metadata.name"},
		{"pod: empty namespace", run(podWith(func(c *runtimeapi.PodSandboxConfig) { c.Metadata.Namespace = "" }), ""), codes.InvalidArgument, "metadata.namespace"},
		{"pod: empty uid", run(podWith(func(c *runtimeapi.PodSandboxConfig) { c.Metadata.Uid = "" }), ""), codes.InvalidArgument, "metadata.uid"},
		{"pod: unknown handler", run(podWith(func(*runtimeapi.PodSandboxConfig) {}), "no-such-handler"), codes.InvalidArgument, `"no-such-handler"`},
		{"pod: duplicate name", run(goodPod, ""), codes.AlreadyExists, "already reserved"},
		{"pod: 1 MiB annotation", run(podWith(func(c *runtimeapi.PodSandboxConfig) { c.Annotations = huge }), ""), codes.InvalidArgument, "annotations"},
		{"pod: 1 MiB label", run(podWith(func(c *runtimeapi.PodSandboxConfig) { c.Labels = huge }), ""), codes.InvalidArgument, "labels"},
		{"pod status: empty id", func() error {
			_, err := rc.PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{})
			return err
		}, codes.InvalidArgument, "pod sandbox ID"},
		{"pod status: unknown id", func() error {
			_, err := rc.PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: "0123unknown"})
			return err
		}, codes.NotFound, `"0123unknown" not found`},

		{"container: nil config", create(pod.PodSandboxId, nil), codes.InvalidArgument, "config is required"},
		{"container: nil metadata", create(pod.PodSandboxId, ctrWith(func(c *runtimeapi.ContainerConfig) { c.Metadata = nil })), codes.InvalidArgument, "metadata.name"},
		{"container: empty name", create(pod.PodSandboxId, ctrWith(func(c *runtimeapi.ContainerConfig) { c.Metadata.Name = "" })), codes.InvalidArgument, "metadata.name"},
		{"container: nil image", create(pod.PodSandboxId, ctrWith(func(c *runtimeapi.ContainerConfig) { c.Image = nil })), codes.InvalidArgument, "image.image"},
		{"container: absolute log path", create(pod.PodSandboxId, ctrWith(func(c *runtimeapi.ContainerConfig) { c.LogPath = "/etc/passwd" })), codes.InvalidArgument, "log_path"},
		{"container: 1 MiB annotation", create(pod.PodSandboxId, ctrWith(func(c *runtimeapi.ContainerConfig) { c.Annotations = huge })), codes.InvalidArgument, "annotations"},
		{"container: 1 MiB label", create(pod.PodSandboxId, ctrWith(func(c *runtimeapi.ContainerConfig) { c.Labels = huge })), codes.InvalidArgument, "labels"},
		{"container: unknown image", create(pod.PodSandboxId, ctrWith(func(c *runtimeapi.ContainerConfig) { c.Image = &runtimeapi.ImageSpec{Image: "localhost/absent:1"} })), codes.NotFound, "pull it first"},
		{"container: empty pod id", create("", ctrWith(func(*runtimeapi.ContainerConfig) {})), codes.InvalidArgument, "pod sandbox ID"},
		{"container: unknown pod id", create("0123unknown", ctrWith(func(*runtimeapi.ContainerConfig) {})), codes.NotFound, `"0123unknown" not found`},
		{"container: duplicate name", create(pod.PodSandboxId, goodCtr), codes.AlreadyExists, "already reserved"},

		{"start: empty id", func() error {
			_, err := rc.StartContainer(ctx, &runtimeapi.StartContainerRequest{})
			return err
		}, codes.InvalidArgument, "container ID"},
		{"start: unknown id", func() error {
			_, err := rc.StartContainer(ctx, &runtimeapi.StartContainerRequest{ContainerId: "0123unknown"})
			return err
		}, codes.NotFound, `"0123unknown" not found`},
		{"status: unknown id", func() error {
			_, err := rc.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: "0123unknown"})
			return err
		}, codes.NotFound, `"0123unknown" not found`},
		{"stop: negative timeout", func() error {
			_, err := rc.StopContainer(ctx, &runtimeapi.StopContainerRequest{ContainerId: ctr.ContainerId, Timeout: -1})
			return err
		}, codes.InvalidArgument, "timeout"},
		{"exec: empty cmd", func() error {
			_, err := rc.ExecSync(ctx, &runtimeapi.ExecSyncRequest{ContainerId: ctr.ContainerId})
			return err
		}, codes.InvalidArgument, "cmd"},
		{"exec: not running", func() error {
			_, err := rc.ExecSync(ctx, &runtimeapi.ExecSyncRequest{ContainerId: ctr.ContainerId, Cmd: []string{"true"}})
			return err
		}, codes.FailedPrecondition, "not running"},
		{"exec: unknown id", func() error {
			_, err := rc.ExecSync(ctx, &runtimeapi.ExecSyncRequest{ContainerId: "0123unknown", Cmd: []string{"true"}})
			return err
		}, codes.NotFound, `"0123unknown" not found`},
		{"update: nil resources", func() error {
			_, err := rc.UpdateContainerResources(ctx, &runtimeapi.UpdateContainerResourcesRequest{ContainerId: ctr.ContainerId})
			return err
		}, codes.InvalidArgument, "resources"},
		{"update: unknown id", func() error {
			_, err := rc.UpdateContainerResources(ctx, &runtimeapi.UpdateContainerResourcesRequest{ContainerId: "0123unknown", Linux: &runtimeapi.LinuxContainerResources{}})
			return err
		}, codes.NotFound, `"0123unknown" not found`},
		{"pull: empty image", func() error {
			_, err := ic.PullImage(ctx, &runtimeapi.PullImageRequest{})
			return err
		}, codes.InvalidArgument, "image reference"},
		{"image status: nil image", func() error {
			_, err := ic.ImageStatus(ctx, &runtimeapi.ImageStatusRequest{})
			return err
		}, codes.InvalidArgument, "image reference"},
		{"remove image: nil image", func() error {
			_, err := ic.RemoveImage(ctx, &runtimeapi.RemoveImageRequest{})
			return err
		}, codes.InvalidArgument, "image reference"},
	}
	for _, tc := range cases {
		err := tc.call()
		if c := status.Code(err); c == codes.Unknown || c == codes.Internal {
			t.Errorf("%s: %v: Unknown or Internal is not a clear error", tc.name, err)
			continue
		}
		wantCode(t, tc.name, err, tc.code, tc.msg)
		if after := criSnapshot(t, ctx, rc); !reflect.DeepEqual(after, before) {
			t.Fatalf("%s changed the pods or containers:\nbefore %q\nafter  %q", tc.name, before, after)
		}
	}

	// Filters on unknown IDs list nothing rather than failing.
	pods, err := rc.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{Filter: &runtimeapi.PodSandboxFilter{Id: "0123unknown"}})
	if err != nil || len(pods.GetItems()) != 0 {
		t.Errorf("ListPodSandbox filtered on an unknown id = %v, %v; want none", pods.GetItems(), err)
	}
	ctrs, err := rc.ListContainers(ctx, &runtimeapi.ListContainersRequest{Filter: &runtimeapi.ContainerFilter{PodSandboxId: "0123unknown"}})
	if err != nil || len(ctrs.GetContainers()) != 0 {
		t.Errorf("ListContainers filtered on an unknown pod = %v, %v; want none", ctrs.GetContainers(), err)
	}
	// The daemon still serves after all of it.
	if _, err := rc.Status(ctx, &runtimeapi.StatusRequest{}); err != nil {
		t.Errorf("Status after the bad requests: %v", err)
	}
}
