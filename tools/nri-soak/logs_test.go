package main

import (
	"strings"
	"testing"
)

// Lines as patched CRI-O v1.36.3 and containerd v2.4.2 write them (from a
// make test-k8s run).
const crioLog = `time="2026-12-06T16:50:57.000000000Z" level=info msg="Starting CRI-O, version: 1.36.3, git: unknown(clean)"
time="2026-12-06T16:51:39.376149215Z" level=info msg="Ran pod sandbox ef31a4423d9486f00996b0f829190995cba8943450945af61f0d410af7128c81 with infra container: soak/web-1-6ff557b6bf-d2848/POD" id=d1f113e4-429b-4152-8b94-303743885bf7 name=/runtime.v1.RuntimeService/RunPodSandbox
time="2026-12-06T16:51:40.016385688Z" level=info msg="Created container fd24b9128652e27cc7b4b49132d7840e6a41c50116ab22fcca93626576709d0f: soak/web-1-6ff557b6bf-d2848/app" id=035acbd4-1646-4f48-bd3d-7bb27acdd6d0 name=/runtime.v1.RuntimeService/CreateContainer
time="2026-12-06T16:52:29.353419611Z" level=warning msg="RunPodSandbox of pod soak/web-1-6ff557b6bf-wr8hg refused: required NRI plugin \"device-injector\" lost its connection while handling RunPodSandbox; check the plugin's health and the NRI plugin request timeout"
time="2026-12-06T17:02:53.864767948Z" level=info msg="RunPodSandbox of pod soak/web-1-6ff557b6bf-7cgn5 waits for required NRI plugin \"device-injector\", which is not registered"
time="2026-12-06T17:03:03.86669162Z" level=info msg="RunPodSandbox of pod soak/web-1-6ff557b6bf-7cgn5 waited 10.002s for required NRI plugins"
time="2026-12-06T17:03:14.652330895Z" level=warning msg="required NRI plugin \"device-injector\" is not registered; CreateContainer of container \"app\" in pod soak/web-1-6ff557b6bf-7cgn5 proceeds without it (fail_policy \"ignore\")"
time="2026-12-06T17:03:15.000000000Z" level=warning msg="CreateContainer of container \"app\" in pod soak/x refused: the plugin did something"
`

const containerdLog = `time="2026-12-06T16:50:00.000000000Z" level=info msg="starting containerd" revision= version=v2.4.2
time="2026-12-06T16:51:40.485314477Z" level=info msg="RunPodSandbox for name:\"web-2-54c77cdd57-28vg6\"  uid:\"68e41780-7e28-4588-9f11-960ad23780d5\"  namespace:\"soak\" returns sandbox id \"0b586341ce6958a9956e298f6dc3b0e9aac5f3acebf12b58f9874c57ba225215\""
time="2026-12-06T16:51:40.633749369Z" level=info msg="CreateContainer within sandbox \"0b586341ce6958a9956e298f6dc3b0e9aac5f3acebf12b58f9874c57ba225215\" for name:\"app\"  attempt:1 returns container id \"2b0aacf80d71eb1012b25a74fb426ae30a3926ae176789577f5f464832347183\""
time="2026-12-06T16:51:50.454782182Z" level=warning msg="RunPodSandbox of pod soak/web-66588c477b-j4z8v refused: required NRI plugin \"20-ulimit-adjuster\" is disconnected; start or fix the plugin, or exempt the pod from the plugin in the runtime's required NRI plugins"
`

func TestParseRuntimeLogCRIO(t *testing.T) {
	rl, err := parseRuntimeLog(strings.NewReader(crioLog), 1, "crio", 0, 1e12)
	if err != nil {
		t.Fatal(err)
	}
	if len(rl.Starts) != 1 {
		t.Errorf("starts %v", rl.Starts)
	}
	if len(rl.Created) != 2 {
		t.Fatalf("created %+v", rl.Created)
	}
	sb, c := rl.Created[0], rl.Created[1]
	if sb.ID[:12] != "ef31a4423d94" || sb.NS != "soak" || sb.Pod != "web-1-6ff557b6bf-d2848" || sb.Name != "" || !sb.FromLog {
		t.Errorf("sandbox %+v", sb)
	}
	if c.ID[:12] != "fd24b9128652" || c.Pod != "web-1-6ff557b6bf-d2848" || c.Name != "app" {
		t.Errorf("container %+v", c)
	}
	kinds := map[string]int{}
	for _, p := range rl.Policy {
		kinds[p.Kind]++
	}
	if kinds["refused"] != 2 || kinds["ignored"] != 1 || kinds["waited"] != 1 {
		t.Fatalf("policy lines %+v", rl.Policy)
	}
	ref := rl.Policy[0]
	if ref.Request != "RunPodSandbox" || ref.Key != "device-injector" || ref.Pod != "web-1-6ff557b6bf-wr8hg" {
		t.Errorf("refusal %+v", ref)
	}
	ign := rl.Policy[2]
	if ign.Request != "CreateContainer" || ign.Ctr != "app" || ign.Key != "device-injector" || ign.Pod != "web-1-6ff557b6bf-7cgn5" {
		t.Errorf("ignored %+v", ign)
	}
	if w := rl.Policy[1]; w.Waited < 10 || w.Waited > 10.01 {
		t.Errorf("waited %+v", w)
	}
	if un := rl.Policy[3]; un.Key != "" || un.Ctr != "app" {
		t.Errorf("a refusal naming no plugin: %+v", un)
	}
}

func TestParseRuntimeLogContainerd(t *testing.T) {
	// The window starts after the sandbox: its pod is still known.
	rl, err := parseRuntimeLog(strings.NewReader(containerdLog), 2, "containerd", 1796575900.55, 1e12)
	if err != nil {
		t.Fatal(err)
	}
	if len(rl.Created) != 1 {
		t.Fatalf("created %+v", rl.Created)
	}
	c := rl.Created[0]
	if c.ID[:12] != "2b0aacf80d71" || c.Sandbox[:12] != "0b586341ce69" || c.NS != "soak" || c.Pod != "web-2-54c77cdd57-28vg6" || c.Name != "app" {
		t.Errorf("container %+v", c)
	}
	if len(rl.Policy) != 1 || rl.Policy[0].Key != "20-ulimit-adjuster" {
		t.Errorf("policy %+v", rl.Policy)
	}
}

func TestParsePluginLine(t *testing.T) {
	for _, c := range []struct {
		line string
		want pluginLine
	}{
		{`2026-12-06T16:51:40.010000000Z stderr F 2026-12-06T16:51:40.009000000Z acted CreateContainer pod=soak/web-1-x uid=u1 sandbox=sb1 container_id=c1 container=app`,
			pluginLine{Kind: "acted", Event: "CreateContainer", NS: "soak", Pod: "web-1-x", UID: "u1", Sandbox: "sb1", Container: "c1", Name: "app"}},
		{`2026-12-06T16:51:40.010000000Z stderr F 2026-12-06T16:51:40.009000000Z acted RunPodSandbox pod=soak/web-1-x uid=u1 sandbox=sb1 container_id= container=`,
			pluginLine{Kind: "acted", Event: "RunPodSandbox", NS: "soak", Pod: "web-1-x", UID: "u1", Sandbox: "sb1"}},
		{`2026-12-06T16:51:40.010000000Z stderr F 2026-12-06T16:51:40.009000000Z hang RunPodSandbox for 10m0s pod=soak/held-1 uid=u2 sandbox=sb2`,
			pluginLine{Kind: "hang", Event: "RunPodSandbox", NS: "soak", Pod: "held-1", UID: "u2", Sandbox: "sb2"}},
		{`2026-12-06T16:51:40.010000000Z stdout F ready 2026-12-06T16:51:40.009000000Z`, pluginLine{}},
	} {
		got, ok := parsePluginLine(c.line)
		if c.want.Kind == "" {
			if ok {
				t.Errorf("%q parsed as %+v", c.line, got)
			}
			continue
		}
		got.T = 0
		if !ok || got != c.want {
			t.Errorf("%q: %+v, want %+v", c.line, got, c.want)
		}
	}
	if d := daemonSetOf("nri-plugins_device-injector-r8mb4_fa821e41-f094-4921-8aaf-906dd39ad0b1"); d != "device-injector" {
		t.Errorf("daemonSetOf: %s", d)
	}
}

func TestParseStatusLog(t *testing.T) {
	s, err := parseStatusLog(strings.NewReader(`2026-12-06T16:50:58.127478587Z NRIPluginsReady=false reason=NRIPluginsNotReady message=required NRI plugins not ready: "x" is not registered
2026-12-06T16:51:38.679595869Z NRIPluginsReady=true reason= message=
2026-12-06T16:51:40Z unreachable
`))
	if err != nil || len(s) != 3 || s[0].State != "false" || s[1].State != "true" || s[2].State != "unreachable" {
		t.Fatalf("%+v %v", s, err)
	}
}
