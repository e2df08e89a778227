// Package nri is nrigate's NRI integration, shaped like CRI-O's: it owns the
// upstream NRI adaptation, relays pod and container lifecycle events to the
// plugins at the points CRI-O relays them, applies the plugins' adjustments
// to the OCI spec, and puts the nripolicy engine in the path of the gated
// events (RunPodSandbox, CreateContainer, UpdateContainer). It implements
// server.Hooks and provides the CRI Status conditions and verbose info.
package nri

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/containerd/nri/pkg/adaptation"
	"github.com/containerd/nri/pkg/api"
	nrigen "github.com/containerd/nri/pkg/runtime-tools/generate"
	"github.com/sirupsen/logrus"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nrigate/nrigate/internal/oci"
	"github.com/nrigate/nrigate/internal/version"
	"github.com/nrigate/nrigate/pkg/config"
	"github.com/nrigate/nrigate/pkg/nripolicy"
	"github.com/nrigate/nrigate/server"
)

// RuntimeName is the runtime name NRI plugins see.
const RuntimeName = "nrigate"

// VerboseInfoKey is the key of the NRI entry in verbose CRI Status.
const VerboseInfoKey = nripolicy.VerboseInfoKey

// ErrDisabled is returned by operations that need NRI when it is disabled.
var ErrDisabled = errors.New("nri: NRI is disabled")

// Runtime is what the integration needs from the CRI server: its pods and
// containers, to synchronize newly connected plugins.
type Runtime interface {
	Sandboxes() []*server.Sandbox
	Containers() []*server.Container
	ContainerState(ctx context.Context, id string) (runtimeapi.ContainerState, int32, error)
}

// resourceUpdater is implemented by a Runtime that can apply unsolicited
// container updates (runc update) without calling the hooks.
type resourceUpdater interface {
	UpdateResources(ctx context.Context, id string, res *runtimeapi.LinuxContainerResources) error
}

// containerStopper is implemented by a Runtime that can stop containers,
// used for evictions requested by plugins.
type containerStopper interface {
	StopContainer(ctx context.Context, req *runtimeapi.StopContainerRequest) (*runtimeapi.StopContainerResponse, error)
}

// Option configures an NRI integration.
type Option func(*NRI) error

// WithLogger sets the logger; the default is logrus' standard logger.
func WithLogger(l logrus.FieldLogger) Option {
	return func(n *NRI) error {
		if l == nil {
			return errors.New("nri: nil logger")
		}
		n.log = l
		return nil
	}
}

// Metrics receives the upstream plugin metrics and the policy's decisions
// and readiness changes; internal/metrics implements it.
type Metrics interface {
	adaptation.Metrics
	nripolicy.DecisionHook
	nripolicy.ReadinessHook
}

// WithMetrics makes the adaptation and the policy report to m; the default
// is no metrics.
func WithMetrics(m Metrics) Option {
	return func(n *NRI) error {
		if m == nil {
			return errors.New("nri: nil metrics")
		}
		n.metrics = m
		return nil
	}
}

// WithDefaultRuntimeHandler names the runtime's default handler, which
// runtime_handlers scopes match for pods that name no handler.
func WithDefaultRuntimeHandler(name string) Option {
	return func(n *NRI) error {
		n.defaultHandler = name
		return nil
	}
}

// NRI is the NRI integration. With NRI disabled every hook is a no-op and
// Status gets no NRI condition.
type NRI struct {
	cfg    config.NRIConfig
	log    logrus.FieldLogger
	policy *nripolicy.Policy
	adapt  *adaptation.Adaptation
	// metrics is nil without WithMetrics.
	metrics Metrics
	// defaultHandler is the handler of pods that name none.
	defaultHandler string

	mu sync.RWMutex
	rt Runtime
}

var (
	_ server.Hooks          = (*NRI)(nil)
	_ server.PostUpdateHook = (*NRI)(nil)
)

// New creates the integration from [crio.nri]. It does not start the
// adaptation; call Start once the runtime can list its state.
func New(cfg *config.NRIConfig, opts ...Option) (*NRI, error) {
	n := &NRI{cfg: *cfg, log: logrus.StandardLogger()}
	for _, o := range opts {
		if err := o(n); err != nil {
			return nil, err
		}
	}
	if !cfg.Enabled {
		return n, nil
	}
	popts := []nripolicy.Option{
		// The decision hook logs refusals and ignores with fields; the
		// policy's own warnings say the same in prose, so they go to debug.
		nripolicy.WithLogger(quietLogger{n.log.WithField("component", "nripolicy")}),
		nripolicy.WithDecisionHook(decisionLogger{n}),
		nripolicy.WithDefaultRuntimeHandler(n.defaultHandler),
	}
	var runtimeMetrics adaptation.Metrics
	if n.metrics != nil {
		runtimeMetrics = n.metrics
		popts = append(popts, nripolicy.WithReadinessHook(n.metrics))
	}
	pol, err := nripolicy.New(&n.cfg.Policy, popts...)
	if err != nil {
		return nil, fmt.Errorf("nri: policy: %w", err)
	}
	n.policy = pol
	if n.metrics != nil {
		// The hook reports changes only: seed the gauges with the plugins
		// the policy waits for before any of them can connect.
		n.metrics.ReadinessChanged(pol.Snapshot())
	}

	adaptation.SetPluginRegistrationTimeout(cfg.PluginRegistrationTimeout.Std())
	adaptation.SetPluginRequestTimeout(cfg.PluginRequestTimeout.Std())
	aopts := []adaptation.Option{
		adaptation.WithSocketPath(cfg.SocketPath),
		adaptation.WithPluginPath(cfg.PluginPath),
		adaptation.WithPluginConfigPath(cfg.PluginConfigPath),
	}
	if cfg.DefaultValidator.Enable {
		aopts = append(aopts, adaptation.WithDefaultValidator(cfg.DefaultValidator.Upstream()))
	}
	if cfg.DisableConnections {
		aopts = append(aopts, adaptation.WithDisabledExternalConnections())
	}
	// The policy wraps the metrics and ttrpc options; ours must go through it.
	aopts = append(aopts, pol.AdaptationOptions(runtimeMetrics, nil, nil)...)
	a, err := adaptation.New(RuntimeName, version.Version, n.syncPlugins, n.updateContainers, aopts...)
	if err != nil {
		return nil, fmt.Errorf("nri: creating the adaptation: %w", err)
	}
	pol.Attach(a)
	n.adapt = a
	return n, nil
}

// Enabled reports whether NRI is enabled.
func (n *NRI) Enabled() bool { return n.adapt != nil }

// Policy returns the policy engine; nil when NRI is disabled.
func (n *NRI) Policy() *nripolicy.Policy { return n.policy }

// Start starts the adaptation (listening and launching pre-installed
// plugins); rt is used to synchronize plugins with the existing state.
func (n *NRI) Start(rt Runtime) error {
	n.mu.Lock()
	n.rt = rt
	n.mu.Unlock()
	if !n.Enabled() {
		n.log.Info("NRI is disabled")
		return nil
	}
	if err := n.adapt.Start(); err != nil {
		return fmt.Errorf("nri: starting on %s: %w", n.cfg.SocketPath, err)
	}
	n.log.WithFields(logrus.Fields{"socket": n.cfg.SocketPath, "plugin_dir": n.cfg.PluginPath,
		"required_plugins": len(n.cfg.Policy.Plugins)}).Info("NRI started")
	return nil
}

// Stop stops the adaptation and disconnects the plugins.
func (n *NRI) Stop() {
	if n.Enabled() {
		n.adapt.Stop()
	}
}

// Reload replaces the policy tables; on error the old policy stays.
func (n *NRI) Reload(cfg *nripolicy.Config) error {
	if !n.Enabled() {
		return ErrDisabled
	}
	return n.policy.Reload(cfg)
}

func (n *NRI) runtime() Runtime {
	n.mu.RLock()
	defer n.mu.RUnlock()
	return n.rt
}

// Conditions returns the NRI conditions for CRI Status: NRIPluginsReady
// when the policy names a plugin, and NetworkReady=false while a
// readiness="network" plugin is not ready. RuntimeReady is never returned.
func (n *NRI) Conditions() []*runtimeapi.RuntimeCondition {
	if !n.Enabled() {
		return nil
	}
	var out []*runtimeapi.RuntimeCondition
	for _, c := range n.policy.Conditions() {
		if c.Type == runtimeapi.RuntimeReady {
			continue
		}
		out = append(out, &runtimeapi.RuntimeCondition{Type: c.Type, Status: c.Status, Reason: c.Reason, Message: c.Message})
	}
	return out
}

// VerboseInfo returns the verbose Status entries (JSON values): the
// policy's "nri" entry, the same document CRI-O and containerd publish.
func (n *NRI) VerboseInfo() map[string]string {
	info, err := n.policy.VerboseInfo(n.cfg.SocketPath)
	if err != nil {
		n.log.WithError(err).Warn("cannot marshal NRI status")
		return nil
	}
	return info
}

// refusal turns a relay or policy error into the CRI error: a policy
// refusal is FailedPrecondition with the refusal's own text, so that the
// kubelet's event (kubectl describe pod) explains it.
func refusal(err error) error {
	if _, ok := status.FromError(err); ok {
		return err
	}
	if errors.Is(err, nripolicy.ErrRefused) {
		return status.Error(codes.FailedPrecondition, err.Error())
	}
	return status.Error(codes.Unknown, "nri: "+err.Error())
}

// RunPodSandbox relays the pod to the plugins, gated by the policy. The
// policy admits first, before plugin synchronization is blocked (a wait for
// a plugin under that block would deadlock the registration it waits for);
// then synchronization stays blocked from the relay until the server calls
// finish, after it published the pod, so that a plugin registering meanwhile
// is either relayed the pod or synchronized with it. finish(err) after a
// failure undoes the relay for the plugins.
func (n *NRI) RunPodSandbox(ctx context.Context, sb *server.Sandbox) (func(error), error) {
	if !n.Enabled() {
		return nil, nil
	}
	pod := podToAPI(sb)
	ctx, adm, err := n.policy.Admit(ctx, nripolicy.Request{Event: nripolicy.EventRunPodSandbox, Pod: pod})
	if err != nil {
		n.logRefusal(err, pod, "")
		return nil, refusal(err)
	}
	block := n.adapt.BlockPluginSync()
	undo := func() {
		// Plugins that saw the pod must forget it again.
		bg := context.WithoutCancel(ctx)
		n.logErr(n.adapt.StopPodSandbox(bg, &api.StopPodSandboxRequest{Pod: pod}), "undo: StopPodSandbox")
		n.logErr(n.adapt.RemovePodSandbox(bg, &api.RemovePodSandboxRequest{Pod: pod}), "undo: RemovePodSandbox")
	}
	err = adm.Done(n.adapt.RunPodSandbox(ctx, &api.RunPodSandboxRequest{Pod: pod}))
	if err != nil {
		block.Unblock()
		n.logRefusal(err, pod, "")
		undo()
		return nil, refusal(err)
	}
	var once sync.Once
	return func(createErr error) {
		once.Do(func() {
			block.Unblock()
			if createErr != nil {
				undo()
			}
		})
	}, nil
}

// StopPodSandbox relays the pod's stop.
func (n *NRI) StopPodSandbox(ctx context.Context, sb *server.Sandbox) error {
	if !n.Enabled() {
		return nil
	}
	return n.adapt.StopPodSandbox(ctx, &api.StopPodSandboxRequest{Pod: podToAPI(sb)})
}

// RemovePodSandbox relays the pod's removal.
func (n *NRI) RemovePodSandbox(ctx context.Context, sb *server.Sandbox) error {
	if !n.Enabled() {
		return nil
	}
	return n.adapt.RemovePodSandbox(ctx, &api.RemovePodSandboxRequest{Pod: podToAPI(sb)})
}

// CreateContainer relays the container, gated by the policy, and applies
// the plugins' adjustment to the spec. As for RunPodSandbox, the policy
// admits before plugin synchronization is blocked, and the block lasts
// from the relay until the server calls finish, after it published the
// container. A refusal, or a create that fails after the relay
// (finish(err)), is undone for the plugins with StopContainer and
// RemoveContainer, as containerd does.
func (n *NRI) CreateContainer(ctx context.Context, sb *server.Sandbox, c *server.Container, g *oci.Generator) (func(error), error) {
	if !n.Enabled() {
		return nil, nil
	}
	pod := podToAPI(sb)
	ctr := containerToAPI(c, g.Config, api.ContainerState_CONTAINER_UNKNOWN)
	ctx, adm, err := n.policy.Admit(ctx, nripolicy.Request{Event: nripolicy.EventCreateContainer, Pod: pod, Container: ctr})
	if err != nil {
		n.logRefusal(err, pod, ctr.Name)
		return nil, refusal(err)
	}
	block := n.adapt.BlockPluginSync()
	undo := func() {
		bg := context.WithoutCancel(ctx)
		_, serr := n.adapt.StopContainer(bg, &api.StopContainerRequest{Pod: pod, Container: ctr})
		n.logErr(serr, "undo: StopContainer")
		n.logErr(n.adapt.RemoveContainer(bg, &api.RemoveContainerRequest{Pod: pod, Container: ctr}), "undo: RemoveContainer")
	}
	resp, err := n.adapt.CreateContainer(ctx, &api.CreateContainerRequest{Pod: pod, Container: ctr})
	err = adm.Done(err)
	if err == nil && resp != nil {
		if adj := resp.GetAdjust(); adj != nil {
			if aerr := nrigen.SpecGenerator(g).Adjust(adj); aerr != nil {
				err = fmt.Errorf("applying the NRI adjustment: %w", aerr)
			}
		}
	}
	if err != nil {
		block.Unblock()
		n.logRefusal(err, pod, ctr.Name)
		undo()
		return nil, refusal(err)
	}
	var once sync.Once
	return func(createErr error) {
		once.Do(func() {
			block.Unblock()
			if createErr != nil {
				n.log.WithError(createErr).WithFields(logrus.Fields{"pod": pod.GetNamespace() + "/" + pod.GetName(),
					"container": ctr.Name}).Debug("container create failed after the NRI relay; undoing it for the plugins")
				undo()
				return
			}
			// Updates of other containers and evictions come after the
			// block: they take those containers' locks.
			n.applyUpdates(ctx, resp.GetUpdate())
			n.evict(resp.GetEvict())
		})
	}, nil
}

// PostCreateContainer relays the created container.
func (n *NRI) PostCreateContainer(ctx context.Context, sb *server.Sandbox, c *server.Container) {
	if !n.Enabled() {
		return
	}
	n.logErr(n.adapt.PostCreateContainer(ctx, &api.PostCreateContainerRequest{
		Pod: podToAPI(sb), Container: containerToAPI(c, c.Spec, api.ContainerState_CONTAINER_CREATED)}), "PostCreateContainer")
}

// StartContainer relays the container's start.
func (n *NRI) StartContainer(ctx context.Context, sb *server.Sandbox, c *server.Container) error {
	if !n.Enabled() {
		return nil
	}
	if err := n.adapt.StartContainer(ctx, &api.StartContainerRequest{
		Pod: podToAPI(sb), Container: containerToAPI(c, c.Spec, api.ContainerState_CONTAINER_CREATED)}); err != nil {
		return refusal(err)
	}
	return nil
}

// PostStartContainer relays the started container.
func (n *NRI) PostStartContainer(ctx context.Context, sb *server.Sandbox, c *server.Container) {
	if !n.Enabled() {
		return
	}
	n.logErr(n.adapt.PostStartContainer(ctx, &api.PostStartContainerRequest{
		Pod: podToAPI(sb), Container: containerToAPI(c, c.Spec, api.ContainerState_CONTAINER_RUNNING)}), "PostStartContainer")
}

// UpdateContainer relays the requested resources, gated by the policy; the
// plugins' result replaces them.
func (n *NRI) UpdateContainer(ctx context.Context, sb *server.Sandbox, c *server.Container, res *runtimeapi.LinuxContainerResources) error {
	if !n.Enabled() || res == nil {
		return nil
	}
	pod := podToAPI(sb)
	ctr := containerToAPI(c, c.Spec, api.ContainerState_CONTAINER_RUNNING)
	ctx, adm, err := n.policy.Admit(ctx, nripolicy.Request{Event: nripolicy.EventUpdateContainer, Pod: pod, Container: ctr})
	if err != nil {
		n.logRefusal(err, pod, ctr.Name)
		return refusal(err)
	}
	resp, err := n.adapt.UpdateContainer(ctx, &api.UpdateContainerRequest{Pod: pod, Container: ctr, LinuxResources: resourcesToAPI(res)})
	if err = adm.Done(err); err != nil {
		n.logRefusal(err, pod, ctr.Name)
		return refusal(err)
	}
	var others []*api.ContainerUpdate
	for _, u := range resp.GetUpdate() {
		if u.GetContainerId() == c.ID {
			mergeResources(res, u.GetLinux().GetResources())
			continue
		}
		others = append(others, u)
	}
	n.applyUpdates(ctx, others)
	n.evict(resp.GetEvict())
	return nil
}

// PostUpdateContainer relays the updated container.
func (n *NRI) PostUpdateContainer(ctx context.Context, sb *server.Sandbox, c *server.Container) {
	if !n.Enabled() {
		return
	}
	n.logErr(n.adapt.PostUpdateContainer(ctx, &api.PostUpdateContainerRequest{
		Pod: podToAPI(sb), Container: containerToAPI(c, c.Spec, api.ContainerState_CONTAINER_RUNNING)}), "PostUpdateContainer")
}

// StopContainer relays the container's stop; plugins may answer with
// updates of other containers. The server holds the stopped container's
// lock during this hook, and a concurrent stop of another container may
// hold that one's lock while it waits for ours: the updates are applied by
// the returned func, which the server calls after releasing the lock.
func (n *NRI) StopContainer(ctx context.Context, sb *server.Sandbox, c *server.Container) (func(), error) {
	if !n.Enabled() {
		return nil, nil
	}
	resp, err := n.adapt.StopContainer(ctx, &api.StopContainerRequest{
		Pod: podToAPI(sb), Container: containerToAPI(c, c.Spec, api.ContainerState_CONTAINER_STOPPED)})
	if err != nil {
		return nil, err
	}
	// An update of the stopped container itself is moot.
	var others []*api.ContainerUpdate
	for _, u := range resp.GetUpdate() {
		if u.GetContainerId() != c.ID {
			others = append(others, u)
		}
	}
	if len(others) == 0 {
		return nil, nil
	}
	return func() { n.applyUpdates(ctx, others) }, nil
}

// RemoveContainer relays the container's removal.
func (n *NRI) RemoveContainer(ctx context.Context, sb *server.Sandbox, c *server.Container) error {
	if !n.Enabled() {
		return nil
	}
	return n.adapt.RemoveContainer(ctx, &api.RemoveContainerRequest{
		Pod: podToAPI(sb), Container: containerToAPI(c, c.Spec, api.ContainerState_CONTAINER_STOPPED)})
}

// syncPlugins gives a newly connected plugin every pod and container.
func (n *NRI) syncPlugins(ctx context.Context, cb adaptation.SyncCB) error {
	rt := n.runtime()
	var pods []*api.PodSandbox
	var ctrs []*api.Container
	if rt != nil {
		known := map[string]bool{}
		for _, sb := range rt.Sandboxes() {
			pods = append(pods, podToAPI(sb))
			known[sb.ID] = true
		}
		for _, c := range rt.Containers() {
			if !known[c.SandboxID] {
				continue
			}
			st, _, err := rt.ContainerState(ctx, c.ID)
			if err != nil {
				continue // removed meanwhile
			}
			ctrs = append(ctrs, containerToAPI(c, c.Spec, stateToAPI(st)))
		}
	}
	updates, err := cb(ctx, pods, ctrs)
	if err != nil {
		return err
	}
	n.applyUpdates(ctx, updates)
	return nil
}

// updateContainers applies unsolicited updates from a plugin and returns
// the ones that failed. It must not relay anything: the plugin may be
// calling from inside a relay that holds the adaptation's lock.
func (n *NRI) updateContainers(ctx context.Context, updates []*api.ContainerUpdate) ([]*api.ContainerUpdate, error) {
	return n.applyUpdates(ctx, updates), nil
}

func (n *NRI) applyUpdates(ctx context.Context, updates []*api.ContainerUpdate) []*api.ContainerUpdate {
	if len(updates) == 0 {
		return nil
	}
	up, _ := n.runtime().(resourceUpdater)
	var failed []*api.ContainerUpdate
	for _, u := range updates {
		log := n.log.WithField("container", u.GetContainerId())
		if up == nil {
			log.Warn("NRI container update not supported by the runtime")
			failed = append(failed, u)
			continue
		}
		res := &runtimeapi.LinuxContainerResources{}
		mergeResources(res, u.GetLinux().GetResources())
		if err := up.UpdateResources(ctx, u.GetContainerId(), res); err != nil {
			if u.GetIgnoreFailure() {
				log.WithError(err).Debug("NRI container update failed (ignored)")
				continue
			}
			log.WithError(err).Warn("NRI container update failed")
			failed = append(failed, u)
		}
	}
	return failed
}

// evict stops containers a plugin asked to evict. It runs in the
// background: the stop relays to the plugins and must not wait for the
// relay that asked for it.
func (n *NRI) evict(evs []*api.ContainerEviction) {
	if len(evs) == 0 {
		return
	}
	st, _ := n.runtime().(containerStopper)
	for _, e := range evs {
		log := n.log.WithFields(logrus.Fields{"container": e.GetContainerId(), "reason": e.GetReason()})
		if st == nil {
			log.Warn("NRI eviction not supported by the runtime")
			continue
		}
		go func(id string) {
			log.Info("evicting container as requested by an NRI plugin")
			if _, err := st.StopContainer(context.Background(), &runtimeapi.StopContainerRequest{ContainerId: id}); err != nil {
				log.WithError(err).Warn("NRI eviction failed")
			}
		}(e.GetContainerId())
	}
}

func (n *NRI) logErr(err error, what string) {
	if err != nil {
		n.log.WithError(err).Warn("NRI " + what)
	}
}

// logRefusal logs a failed gated request. Policy refusals are logged by
// decisionLogger, once per refusing plugin; this logs the other failures
// (a plugin's own error, an adjustment that cannot be applied).
func (n *NRI) logRefusal(err error, pod *api.PodSandbox, ctr string) {
	if errors.Is(err, nripolicy.ErrRefused) {
		return
	}
	n.log.WithError(err).WithFields(logrus.Fields{"pod": pod.GetNamespace() + "/" + pod.GetName(), "container": ctr}).
		Warn("NRI request failed")
}

// Log messages of policy decisions.
const (
	msgRefused = "NRI refused the request"
	msgIgnored = "NRI plugin missed the request, proceeding (fail_policy=ignore)"
)

// decisionLogger logs every refusal and ignore of the policy with fields,
// and passes every decision on to the metrics. It runs on the request path.
type decisionLogger struct{ n *NRI }

func (h decisionLogger) Decided(d nripolicy.Decision) {
	if h.n.metrics != nil {
		h.n.metrics.Decided(d)
	}
	var msg string
	switch d.Outcome {
	case nripolicy.OutcomeRefused:
		msg = msgRefused
	case nripolicy.OutcomeIgnored:
		msg = msgIgnored
	default:
		return
	}
	h.n.log.WithFields(logrus.Fields{
		"plugin": d.Plugin, "event": string(d.Event), "pod": d.Namespace + "/" + d.Pod,
		"container": d.Container, "reason": d.Reason, "waited": d.Waited.Round(time.Millisecond).String(),
	}).Warn(msg)
}

// quietLogger demotes the policy's warnings to debug: the policy warns
// only about refusals and ignores, which decisionLogger already logs.
type quietLogger struct{ logrus.FieldLogger }

func (l quietLogger) Warnf(format string, args ...any) { l.FieldLogger.Debugf(format, args...) }
