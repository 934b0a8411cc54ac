package protocol

import (
	"bytes"
	"encoding/hex"
	"github.com/nodereg/nodereg/internal/vectors"
	"reflect"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// Vectors in this file are those of docs/protocol.md §10 (tests/vectors, read
// through internal/vectors).

func TestMessageTypeBytes(t *testing.T) {
	want := map[MsgType]byte{
		MsgUndefined: 0x00, MsgReady: 0x01, MsgSmbios: 0x02, MsgLabels: 0x03, MsgGet: 0x04,
		MsgVersion: 0x05, MsgSystemData: 0x06, MsgConfig: 0x07, MsgError: 0x08,
		MsgAnnotations: 0x09, MsgUpdate: 0x0A, MsgSystemDataV2: 0x0B, MsgNetworkConfig: 0x0C,
	}
	for m, b := range want {
		if byte(m) != b {
			t.Errorf("%s = 0x%02x, want 0x%02x", m, byte(m), b)
		}
	}
	if Version != 12 {
		t.Errorf("protocol version %d, want 12", Version)
	}
}

func TestFrameVectors(t *testing.T) {
	cases := []struct {
		name string
		got  []byte
		hex  string
	}{
		{"MsgReady", EncodeFrame(MsgReady, nil), "01"},
		{"client MsgVersion", EncodeFrame(MsgVersion, []byte{Version}), "050c"},
		{"MsgGet", EncodeFrame(MsgGet, nil), "04"},
		{"MsgUpdate", EncodeFrame(MsgUpdate, nil), "0a"},
	}
	for _, c := range cases {
		if h := hex.EncodeToString(c.got); h != c.hex {
			t.Errorf("%s: % x, want %s", c.name, c.got, c.hex)
		}
	}
}

func TestErrorVectors(t *testing.T) {
	got := EncodeFrame(MsgError, EncodeError(&ErrorReply{Message: "MachineInventory not found"}))
	if want := "\x08message: MachineInventory not found\n"; string(got) != want {
		t.Errorf("update refused = %q, want %q", got, want)
	}
	got = EncodeFrame(MsgError, EncodeError(&ErrorReply{Message: "getting machine inventory: foo: bar"}))
	if want := "\x08message: 'getting machine inventory: foo: bar'\n"; string(got) != want {
		t.Errorf("error with colon = %q, want %q", got, want)
	}
	e := DecodeError([]byte("message: 'getting machine inventory: foo: bar'\n"))
	if e.Message != "getting machine inventory: foo: bar" {
		t.Errorf("decoded %q", e.Message)
	}
}

func TestJSONPayloadVectors(t *testing.T) {
	ann := map[string]string{"auth": "tpm", "os.id": "sl-micro", "os.name": "SL Micro", "reg-version": "v1.9.2", "registration-ip": "192.168.122.50"}
	p, err := EncodeJSON(ann)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"auth":"tpm","os.id":"sl-micro","os.name":"SL Micro","reg-version":"v1.9.2","registration-ip":"192.168.122.50"}` + "\n"
	if got := EncodeFrame(MsgAnnotations, p); string(got) != "\x09"+want {
		t.Errorf("annotations frame %q", got)
	}
	p, _ = EncodeJSON(map[string]string{"role": "worker", "rack": "r12"})
	if got := EncodeFrame(MsgLabels, p); string(got) != "\x03"+`{"rack":"r12","role":"worker"}`+"\n" {
		t.Errorf("labels frame %q", got)
	}
}

func TestPlainHashVectors(t *testing.T) {
	cases := map[string]string{
		"52:54:00:12:34:56":                    "6aa1a7a23e5008c9994241cd99b58f6a02657994c3cba5d3333a9f34619e2d63",
		"8e2f4b1a-0c3d-4e5f-9a6b-7c8d9e0f1a2b": "f06fa58c5c3ed617a7d720efb3be3b882fed5f08447bfed9dcfa2ecb227a961b",
	}
	for id, want := range cases {
		tok, err := Plain{AuthKind: "mac", ID: id}.Token(t.Context())
		if err != nil || tok != "Bearer PLAIN"+id {
			t.Errorf("token %q, %v", tok, err)
		}
		s := PlainServer{}
		if !s.Accepts(tok) {
			t.Errorf("server does not accept %q", tok)
		}
		got, err := s.Authenticate(t.Context(), tok, nil)
		if err != nil || got.Hash != want || got.Kind != "plain" {
			t.Errorf("%s: %+v %v, want hash %s", id, got, err, want)
		}
	}
	if _, err := (PlainServer{}).Authenticate(t.Context(), "Bearer PLAIN", nil); err == nil {
		t.Error("empty PLAIN identifier accepted")
	}
	if (PlainServer{}).Accepts("Bearer plain52:54") {
		t.Error("prefix match must be case-sensitive")
	}
}

func TestRawEncodingVectors(t *testing.T) {
	var v struct {
		A RawValue `yaml:"a"`
		B RawValue `yaml:"b"`
		C RawValue `yaml:"c"`
	}
	in := "a: {raw: [91, 93], object: null}\nb:\n    raw:\n        - 123\n        - 125\n    object: null\nc: {plain: yaml}\n"
	if err := yaml.Unmarshal([]byte(in), &v); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(v.A.Value, []any{}) {
		t.Errorf("raw [91,93] = %#v, want []", v.A.Value)
	}
	if !reflect.DeepEqual(v.B.Value, map[string]any{}) {
		t.Errorf("raw [123,125] = %#v, want {}", v.B.Value)
	}
	if !reflect.DeepEqual(v.C.Value, map[string]any{"plain": "yaml"}) {
		t.Errorf("plain YAML = %#v", v.C.Value)
	}
	// Encoding writes upstream's form.
	out, err := yaml.Marshal(map[string]RawValue{"x": {Value: []any{}}})
	if err != nil {
		t.Fatal(err)
	}
	if want := "x:\n    raw:\n        - 91\n        - 93\n    object: null\n"; string(out) != want {
		t.Errorf("encoded %q, want %q", out, want)
	}
}

func TestRawEncodingRejectsBadBytes(t *testing.T) {
	var v map[string]RawValue
	for _, in := range []string{"a: {raw: [300], object: null}", "a: {raw: [x], object: null}", "a: {raw: [123], object: null}"} {
		if err := yaml.Unmarshal([]byte(in), &v); err == nil {
			t.Errorf("%q decoded without error", in)
		}
	}
}

func TestDecodeUpstreamConfigReply(t *testing.T) {
	b := vectors.Read(t, "upstream-msgconfig-network.yaml")
	cfg := Config{Elemental: Elemental{Registration: Registration{NoToolkit: true, Labels: map[string]string{"rack": "r1"}}}}
	r, err := DecodeConfigReply(b, &cfg)
	if err != nil {
		t.Fatal(err)
	}
	reg := cfg.Elemental.Registration
	if reg.URL != "http://127.0.0.1:18080/elemental/registration/peer-token" || !reg.EmulateTPM || reg.EmulatedTPMSeed != -1 || reg.Auth != "tpm" {
		t.Errorf("registration = %+v", reg)
	}
	if !reg.NoToolkit || reg.Labels["rack"] != "r1" {
		t.Errorf("local-only keys lost: %+v", reg)
	}
	if cfg.Elemental.Install.Device != "/dev/vda" || !cfg.Elemental.Install.Reboot {
		t.Errorf("install = %+v", cfg.Elemental.Install)
	}
	if sa := cfg.Elemental.SystemAgent; sa.Token != "peer-sa-token" || sa.SecretNamespace != "fleet-default" || !sa.StrictTLSMode {
		t.Errorf("system-agent = %+v", sa)
	}
	wantUsers := []any{map[string]any{"name": "root", "passwd": "root"}}
	if !reflect.DeepEqual(cfg.CloudConfig["users"].Value, wantUsers) {
		t.Errorf("cloud-config users = %#v", cfg.CloudConfig["users"].Value)
	}
	if r.ExplicitNetworkConfig {
		t.Error("upstream reply has no announcement")
	}
	nc := r.Network
	if nc == nil || nc.Configurator != "nmstate" || nc.IPAddresses["inventory-ip"] != "192.168.122.150" {
		t.Fatalf("network = %+v", nc)
	}
	// The template of the foundation issue, as the server holds it.
	ifaces, ok := nc.Config["interfaces"].Value.([]any)
	if !ok || len(ifaces) != 1 {
		t.Fatalf("interfaces = %#v", nc.Config["interfaces"].Value)
	}
	eth := ifaces[0].(map[string]any)
	if eth["name"] != "enp1s0" || eth["type"] != "ethernet" || eth["state"] != "up" {
		t.Errorf("interface = %#v", eth)
	}
	addr := eth["ipv4"].(map[string]any)["address"].([]any)[0].(map[string]any)
	if addr["ip"] != "{inventory-ip}" || addr["prefix-length"] != float64(24) {
		t.Errorf("address = %#v", addr)
	}
	dns := nc.Config["dns-resolver"].Value.(map[string]any)["config"].(map[string]any)
	if !reflect.DeepEqual(dns["server"], []any{"192.168.122.1"}) {
		t.Errorf("dns = %#v", dns)
	}
	routes := nc.Config["routes"].Value.(map[string]any)["config"].([]any)[0].(map[string]any)
	if routes["destination"] != "0.0.0.0/0" || routes["next-hop-address"] != "192.168.122.1" || routes["metric"] != float64(150) {
		t.Errorf("route = %#v", routes)
	}
}

func TestAppendedNetworkKeys(t *testing.T) {
	base := "elemental:\n    registration:\n        url: http://x/elemental/registration/t\n"
	var cfg Config
	if _, err := DecodeConfigReply([]byte(base+"configurator: none\n"), &cfg); err != nil {
		t.Errorf("appending configurator: none must stay valid: %v", err)
	}
	if _, err := DecodeConfigReply([]byte(base+"{}\n"), &cfg); err == nil || !strings.Contains(err.Error(), "could not find expected ':'") {
		t.Errorf("appending {} must break the document as upstream says, got %v", err)
	}
}

func TestEncodeConfigReplyRoundTrip(t *testing.T) {
	reply := &ConfigReply{
		Config: Config{Elemental: Elemental{Registration: Registration{URL: "https://h/elemental/registration/t", Auth: "tpm"}}},
		Network: &NetworkConfig{
			Configurator: ConfiguratorNmstate,
			IPAddresses:  map[string]string{"ip": "10.0.0.5"},
			Config:       map[string]RawValue{"interfaces": {Value: []any{map[string]any{"name": "eth0"}}}},
		},
		ExplicitNetworkConfig: true,
	}
	for _, v := range []byte{11, 12} {
		b, err := EncodeConfigReply(reply, v)
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Contains(b, []byte("---")) {
			t.Errorf("v%d: reply must be one document:\n%s", v, b)
		}
		var cfg Config
		r, err := DecodeConfigReply(b, &cfg)
		if err != nil {
			t.Fatalf("v%d: %v\n%s", v, err, b)
		}
		if cfg.Elemental.Registration.URL != reply.Config.Elemental.Registration.URL {
			t.Errorf("v%d: url lost", v)
		}
		if v < 12 {
			if r.Network != nil || r.ExplicitNetworkConfig {
				t.Errorf("v%d: network or announcement sent below version 12", v)
			}
			continue
		}
		if r.Network == nil || r.Network.IPAddresses["ip"] != "10.0.0.5" || !r.ExplicitNetworkConfig {
			t.Errorf("v12: network %+v explicit %v", r.Network, r.ExplicitNetworkConfig)
		}
		if !bytes.Contains(b, []byte("raw:")) {
			t.Error("network config must use the raw encoding for upstream clients")
		}
	}
}

func TestDecodeFrame(t *testing.T) {
	if _, _, err := DecodeFrame(nil); err == nil {
		t.Error("empty message accepted")
	}
	if _, _, err := DecodeFrame([]byte{0x0D}); err == nil {
		t.Error("unknown type accepted")
	}
	mt, p, err := DecodeFrame([]byte{0x05, 0x0C})
	if err != nil || mt != MsgVersion || !bytes.Equal(p, []byte{0x0C}) {
		t.Errorf("got %v %x %v", mt, p, err)
	}
}
