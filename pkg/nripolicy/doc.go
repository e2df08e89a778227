// Package nripolicy makes NRI plugins required: it gates the runtime's
// RunPodSandbox, CreateContainer and UpdateContainer relays on the plugins
// an operator names, with a per-plugin fail policy, and reports their
// readiness as runtime-agnostic conditions.
//
// It attaches to the upstream runtime-side library
// (github.com/containerd/nri/pkg/adaptation) only through public options:
//
//	pol, err := nripolicy.New(cfg, nripolicy.WithLogger(log))
//	a, err := adaptation.New(name, version, syncFn, updateFn,
//		append(opts, pol.AdaptationOptions(metrics, clientOpts, serverOpts)...)...)
//	pol.Attach(a)
//	a.Start()
//
// and around each gated relay, before taking any runtime lock or
// BlockPluginSync:
//
//	ctx, adm, err := pol.Admit(ctx, nripolicy.Request{Event: nripolicy.EventCreateContainer, Pod: pod, Container: ctr})
//	if err != nil { return err } // refused before the relay
//	rsp, err := a.CreateContainer(ctx, req)
//	if err = adm.Done(err); err != nil { undo; return err } // refused after the relay
//
// # How it sees plugins
//
// A ttrpc client option, applied by upstream to every plugin connection,
// chains a per-connection client interceptor and waits for the
// connection to close (UserOnCloseWait; never WithOnClose, which would
// replace upstream's own close handler). A server interceptor sees each
// RegisterPlugin request; upstream registers and configures plugins one at
// a time, so the next Configure call names that connection. The
// interceptor parses the ConfigureResponse (subscribed events) and marks
// the connection synchronized when the last Synchronize answer arrives.
// After a synchronization, Admit takes and releases BlockPluginSync once:
// upstream appends the plugin to its relay list while holding the sync
// write lock.
//
// A plugin is ready for an event when a synchronized instance subscribes
// to it. Admit puts the Admission into the returned context; upstream
// passes it through to the ttrpc call, so the interceptor records each
// instance's answer to the gated call on it. Done then refuses the request
// if an instance of a required plugin that subscribes to the event (every
// synchronized instance, when several match the key) has no successful
// answer: it was skipped because its connection had closed, it timed out,
// or it lost its connection. A plugin's own error fails the relay upstream.
//
// For the CRI side, a RefusalError carries its gRPC status
// (FailedPrecondition), VerboseInfo builds the "nri" entry of verbose
// Status and Conditions the status conditions, the same in every runtime.
//
// Readiness changes are published as immutable views swapped atomically;
// Changed returns a channel closed at the next change, so waiters and
// Status are woken within microseconds without polling.
//
// # Limits
//
// One Policy serves one Adaptation (the registration binding relies on
// upstream's one-at-a-time registration within it). Builtin and WASM
// plugins do not talk ttrpc, so the policy never sees them: do not name
// them in the policy. ReadinessHook runs on a goroutine of the policy's
// own; DecisionHook and Logger run on the request path and must not block.
//
// # Performance
//
// Measured with
//
//	go test -run XXX -bench . -benchtime 3s -count 4 ./pkg/nripolicy
//
// on a loaded 2-vCPU Xeon: an admission decision (Admit, answers, Done)
// costs about 0.6–1.5 µs and 2 allocations with 1 configured plugin,
// 1.7–3.4 µs and 5 allocations with 8, 4.7–7.1 µs and 5 allocations with
// 32. A CreateContainer relay through a real adaptation with one ok plugin
// takes 0.97–1.09 times as long with the policy as without it (target
// 1.10). A request no plugin is required for allocates nothing. See
// docs/performance.md, section "pkg/nripolicy", for the tables.
package nripolicy
