package apply

import (
	"encoding/json"
	"errors"
	"github.com/nodereg/nodereg/internal/vectors"
	"reflect"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/nodereg/nodereg/protocol"
)

// loadVector decodes the MsgConfig captured from a real elemental-operator
// the way the agent does: one YAML document into the network shape.
func loadVector(t testing.TB) *protocol.NetworkConfig {
	t.Helper()
	b := vectors.Read(t, "upstream-msgconfig-network.yaml")
	var nc protocol.NetworkConfig
	if err := yaml.Unmarshal(b, &nc); err != nil {
		t.Fatalf("decoding vector: %v", err)
	}
	return &nc
}

// plainTree decodes JSON text written by hand in a test.
func plainTree(t testing.TB, js string) any {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(js), &v); err != nil {
		t.Fatalf("test JSON: %v", err)
	}
	return v
}

func nmstateConfig(t testing.TB, ips map[string]string, parts map[string]string) *protocol.NetworkConfig {
	nc := &protocol.NetworkConfig{Configurator: "nmstate", IPAddresses: ips, Config: map[string]protocol.RawValue{}}
	for k, js := range parts {
		nc.Config[k] = protocol.RawValue{Value: plainTree(t, js)}
	}
	return nc
}

func TestRenderUpstreamVector(t *testing.T) {
	nc := loadVector(t)
	if nc.Configurator != "nmstate" || nc.IPAddresses["inventory-ip"] != "192.168.122.150" {
		t.Fatalf("vector decoded unexpectedly: %q %v", nc.Configurator, nc.IPAddresses)
	}
	// What the vector's template must become: the same tree with the one
	// placeholder leaf replaced by the address the server sent.
	want := map[string]any{}
	for k, v := range nc.Config {
		js, _ := json.Marshal(v.Value)
		want[k] = plainTree(t, string(js))
	}
	addr := want["interfaces"].([]any)[0].(map[string]any)["ipv4"].(map[string]any)["address"].([]any)[0].(map[string]any)
	if addr["ip"] != "{inventory-ip}" {
		t.Fatalf("vector template changed: ip = %v", addr["ip"])
	}
	addr["ip"] = "192.168.122.150"
	before, _ := json.Marshal(nc.Config)

	r, err := Render(nc)
	if err != nil {
		t.Fatalf("Render: %v", err)
	}
	if r.Configurator != "nmstate" {
		t.Errorf("configurator = %q", r.Configurator)
	}
	if !reflect.DeepEqual(r.State, want) {
		t.Errorf("state differs from the template with the address substituted:\n got %#v\nwant %#v", r.State, want)
	}
	var back map[string]any
	if err := yaml.Unmarshal(r.Digested, &back); err != nil {
		t.Fatalf("digested YAML does not parse: %v\n%s", err, r.Digested)
	}
	gotJS, _ := json.Marshal(back)
	wantJS, _ := json.Marshal(want)
	if string(gotJS) != string(wantJS) {
		t.Errorf("digested YAML means something else:\n got %s\nwant %s", gotJS, wantJS)
	}
	if strings.Contains(string(r.Digested), "{inventory-ip}") {
		t.Errorf("placeholder left in digested YAML:\n%s", r.Digested)
	}
	after, _ := json.Marshal(nc.Config)
	if string(before) != string(after) {
		t.Errorf("Render modified its input")
	}
	if len(r.Keyfiles) != 0 {
		t.Errorf("nmstate keyfiles come from gc, Render produced %d", len(r.Keyfiles))
	}
}

func TestRenderUnresolved(t *testing.T) {
	nc := loadVector(t)
	nc.IPAddresses = map[string]string{"other": "192.168.122.9"}
	_, err := Render(nc)
	var ue *UnresolvedError
	if !errors.As(err, &ue) {
		t.Fatalf("want UnresolvedError, got %v", err)
	}
	if ue.Placeholder != "inventory-ip" || ue.Path != "config.interfaces[0].ipv4.address[0].ip" {
		t.Errorf("got placeholder %q path %q", ue.Placeholder, ue.Path)
	}
	var fe *FieldError
	if errors.As(err, &fe) {
		t.Errorf("unresolved placeholder must not be a FieldError")
	}
}

func TestRenderNone(t *testing.T) {
	for _, c := range []string{"", "none"} {
		r, err := Render(&protocol.NetworkConfig{Configurator: c})
		if err != nil {
			t.Fatalf("Render(%q): %v", c, err)
		}
		if r.Configurator != "none" || r.State != nil || r.Digested != nil || r.Keyfiles != nil {
			t.Errorf("Render(%q) = %+v, want an empty none", c, r)
		}
	}
	if r, err := Render(nil); err != nil || r.Configurator != "none" {
		t.Errorf("Render(nil) = %+v, %v", r, err)
	}
}

func TestRenderIPv6AndPrefix(t *testing.T) {
	nc := nmstateConfig(t, map[string]string{"v6": "2001:db8::10", "v4": "10.0.0.5"}, map[string]string{
		"interfaces": `[{"name":"eth0","type":"ethernet","state":"up","ipv6":{"enabled":true,"address":[{"ip":"{v6}","prefix-length":64}]}}]`,
		"routes":     `{"config":[{"destination":"{v4}/32","next-hop-address":"10.0.0.1","next-hop-interface":"eth0"}]}`,
	})
	r, err := Render(nc)
	if err != nil {
		t.Fatalf("Render: %v", err)
	}
	ip := r.State["interfaces"].([]any)[0].(map[string]any)["ipv6"].(map[string]any)["address"].([]any)[0].(map[string]any)["ip"]
	if ip != "2001:db8::10" {
		t.Errorf("ipv6 ip = %v", ip)
	}
	dst := r.State["routes"].(map[string]any)["config"].([]any)[0].(map[string]any)["destination"]
	if dst != "10.0.0.5/32" {
		t.Errorf("destination = %v", dst)
	}
}

const eth0Template = `[connection]
id=eth0
type=ethernet
interface-name=eth0

[ipv4]
method=manual
address1={ip1}/24,192.168.122.1
dns=192.168.122.1;

[ipv6]
method=disabled
`

func TestRenderNmconnections(t *testing.T) {
	nc := &protocol.NetworkConfig{
		Configurator: "nmconnections",
		IPAddresses:  map[string]string{"ip1": "192.168.122.10"},
		Config:       map[string]protocol.RawValue{"eth0": {Value: eth0Template}},
	}
	r, err := Render(nc)
	if err != nil {
		t.Fatalf("Render: %v", err)
	}
	if len(r.Keyfiles) != 1 || r.Keyfiles[0].Name != "eth0.nmconnection" {
		t.Fatalf("keyfiles = %+v", r.Keyfiles)
	}
	want := strings.Replace(eth0Template, "address1={ip1}/24", "address1=192.168.122.10/24", 1)
	if string(r.Keyfiles[0].Content) != want {
		t.Errorf("keyfile:\n%s\nwant:\n%s", r.Keyfiles[0].Content, want)
	}
	var back map[string]string
	if err := yaml.Unmarshal(r.Digested, &back); err != nil || back["eth0.nmconnection"] != want {
		t.Errorf("digested = %q (%v)", r.Digested, err)
	}
	if got := connectionID(r.Keyfiles[0]); got != "eth0" {
		t.Errorf("connection id = %q", got)
	}
}

func TestRenderNmconnectionsUnresolved(t *testing.T) {
	nc := &protocol.NetworkConfig{
		Configurator: "nmconnections",
		Config:       map[string]protocol.RawValue{"eth0": {Value: eth0Template}},
	}
	_, err := Render(nc)
	var ue *UnresolvedError
	if !errors.As(err, &ue) || ue.Placeholder != "ip1" || ue.Path != "config.eth0" {
		t.Fatalf("want UnresolvedError ip1 at config.eth0, got %v", err)
	}
}

// Hostile or broken configs are refused with an error naming the field.
func TestRenderRefusesHostile(t *testing.T) {
	ips := map[string]string{"ip": "192.168.1.5"}
	iface := func(extra string) map[string]string {
		return map[string]string{"interfaces": `[{"name":"eth0","type":"ethernet",` + extra + `"ipv4":{"enabled":true,"address":[{"ip":"{ip}","prefix-length":24}]}}]`}
	}
	cases := []struct {
		name string
		nc   *protocol.NetworkConfig
		path string
	}{
		{"interface name leaves keyfile dir", nmstateConfig(t, ips, map[string]string{
			"interfaces": `[{"name":"../../etc/x","type":"ethernet"}]`}), "config.interfaces[0].name"},
		{"profile-name leaves keyfile dir", nmstateConfig(t, ips, map[string]string{
			"interfaces": `[{"name":"eth0","profile-name":"a/b","type":"ethernet"}]`}), "config.interfaces[0].profile-name"},
		{"template in description", nmstateConfig(t, ips, iface(`"description":"x {{ .Values }} y",`)), "config.interfaces[0].description"},
		{"address with newline in ipAddresses", nmstateConfig(t, map[string]string{"ip": "192.168.1.5\n  evil: 1"}, iface("")), "ipAddresses.ip"},
		{"literal address with newline", nmstateConfig(t, ips, map[string]string{
			"interfaces": `[{"name":"eth0","ipv4":{"address":[{"ip":"192.168.1.5\n  evil: 1","prefix-length":24}]}}]`}),
			"config.interfaces[0].ipv4.address[0].ip"},
		{"literal address not an IP", nmstateConfig(t, ips, map[string]string{
			"interfaces": `[{"name":"eth0","ipv4":{"address":[{"ip":"not-an-ip","prefix-length":24}]}}]`}),
			"config.interfaces[0].ipv4.address[0].ip"},
		{"placeholder in a key", nmstateConfig(t, ips, map[string]string{
			"interfaces": `[{"name":"eth0","{ip}":"x"}]`}), "config.interfaces[0].{ip}"},
		{"placeholder in a top-level key", nmstateConfig(t, ips, map[string]string{"{ip}": `{}`}), "config.{ip}"},
		{"placeholder inside text", nmstateConfig(t, ips, iface(`"description":"host {ip} here",`)), "config.interfaces[0].description"},
		{"dns server not an IP", nmstateConfig(t, ips, map[string]string{
			"dns-resolver": `{"config":{"server":["1.1.1.1; rm -rf /"]}}`}), "config.dns-resolver.config.server[0]"},
		{"unknown configurator", &protocol.NetworkConfig{Configurator: "netplan"}, "configurator"},
		{"empty config", &protocol.NetworkConfig{Configurator: "nmstate"}, "config"},
		{"bad placeholder name", nmstateConfig(t, map[string]string{"a b": "10.0.0.1"}, iface("")), "ipAddresses.a b"},
		{"nmconnections name leaves keyfile dir", &protocol.NetworkConfig{Configurator: "nmconnections", IPAddresses: ips,
			Config: map[string]protocol.RawValue{"../../etc/x": {Value: "[connection]\nid=x\n"}}}, "config.../../etc/x"},
		{"nmconnections hidden name", &protocol.NetworkConfig{Configurator: "nmconnections",
			Config: map[string]protocol.RawValue{".x": {Value: "[connection]\nid=x\n"}}}, "config..x"},
		{"nmconnections not a keyfile", &protocol.NetworkConfig{Configurator: "nmconnections",
			Config: map[string]protocol.RawValue{"eth0": {Value: "interfaces:\n- name: eth0\n"}}}, "config.eth0"},
		{"nmconnections template", &protocol.NetworkConfig{Configurator: "nmconnections",
			Config: map[string]protocol.RawValue{"eth0": {Value: "[connection]\nid={{ .Values.os }}\n"}}}, "config.eth0"},
		{"nmconnections not text", &protocol.NetworkConfig{Configurator: "nmconnections",
			Config: map[string]protocol.RawValue{"eth0": {Value: map[string]any{"a": "b"}}}}, "config.eth0"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r, err := Render(tc.nc)
			var fe *FieldError
			if !errors.As(err, &fe) {
				t.Fatalf("want FieldError, got %v (rendered %+v)", err, r)
			}
			if fe.Path != tc.path {
				t.Errorf("path = %q, want %q (%v)", fe.Path, tc.path, err)
			}
			if !strings.Contains(err.Error(), tc.path) {
				t.Errorf("message %q does not name %q", err, tc.path)
			}
		})
	}
}

func TestParseKeyfile(t *testing.T) {
	// GLib's rules (internal/keyfile): only '#' starts a comment, so
	// "; x" is a line NetworkManager cannot read.
	good := []string{eth0Template, "# c\n[connection]\ntype=ethernet\n;x=1\n"}
	for _, g := range good {
		if err := ParseKeyfile("k", []byte(g)); err != nil {
			t.Errorf("ParseKeyfile(%q): %v", g, err)
		}
	}
	bad := []string{"", "# c\n[connection]\ntype=ethernet\n; x\n", "[connection\nid=x\n", "id=x\n[connection]\n", "[connection]\njunk\n", "[ipv4]\nmethod=auto\n", "[connection]\nfoo=bar\n"}
	for _, b := range bad {
		var fe *FieldError
		if err := ParseKeyfile("k", []byte(b)); !errors.As(err, &fe) {
			t.Errorf("ParseKeyfile(%q) = %v, want FieldError", b, err)
		}
	}
}

// TestRenderTypesUntypedAsGC: an nmstate interface without type gets the
// type nmstatectl gc gives it (ethernet; transcript 05 of
// tests/stubs/nmstatectl), so the policy, the generators and nmstatectl
// apply see one kind; an absent one is left as it is.
func TestRenderTypesUntypedAsGC(t *testing.T) {
	r, err := Render(nmstateConfig(t, nil, map[string]string{"interfaces": `[{"name":"eth1","state":"up","ipv4":{"enabled":true,"dhcp":true}},{"name":"eth2","state":"absent"},{"name":"bond0","type":"bond","state":"up","link-aggregation":{"mode":"active-backup","port":["eth3"]}}]`}))
	if err != nil {
		t.Fatal(err)
	}
	ifaces := r.State["interfaces"].([]any)
	for i, want := range []any{"ethernet", nil, "bond"} {
		if got := ifaces[i].(map[string]any)["type"]; got != want {
			t.Errorf("interfaces[%d].type = %v, want %v", i, got, want)
		}
	}
	if !strings.Contains(string(r.Digested), "type: ethernet") {
		t.Errorf("the kept state does not carry the type:\n%s", r.Digested)
	}
}
