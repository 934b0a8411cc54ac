package protocol

import (
	"errors"
	"strings"
	"testing"

	"github.com/gorilla/websocket"
)

// seedPRReply is what the server of commit 342bba26 wrote after 0x0C
// (docs/protocol.md §7.3): compact JSON of spec.network, no configurator, config
// as plain JSON.
const seedPRReply = `{"ipAddresses":{"ip1":"192.168.122.10"},"config":{"interfaces":[{"name":"eth0","type":"ethernet","state":"up","ipv4":{"enabled":true,"address":[{"ip":"{ip1}","prefix-length":24}]}}]}}`

// TestExplicitSeedPRReply: the seed PR's explicit answer is nmstate.
func TestExplicitSeedPRReply(t *testing.T) {
	url := scripted(t, func(ws *websocket.Conn) {
		for {
			_, b, err := ws.ReadMessage()
			if err != nil {
				return
			}
			switch MsgType(b[0]) {
			case MsgVersion:
				ws.WriteMessage(websocket.BinaryMessage, []byte{0x05, 12})
			case MsgNetworkConfig:
				ws.WriteMessage(websocket.BinaryMessage, append([]byte{0x0C}, seedPRReply...))
				return
			}
		}
	})
	cc, err := Dial(t.Context(), DialOptions{URL: url}, Plain{AuthKind: "mac", ID: "aa"})
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	nc, err := cc.ExplicitNetworkConfig(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if !nc.IsReal() || nc.Configurator != ConfiguratorNmstate || nc.IPAddresses["ip1"] != "192.168.122.10" {
		t.Fatalf("got %+v", nc)
	}
	ifaces, ok := nc.Config["interfaces"].Value.([]any)
	if !ok || len(ifaces) != 1 || ifaces[0].(map[string]any)["name"] != "eth0" {
		t.Errorf("config = %#v", nc.Config)
	}
	if w := nc.Unused(); w != "" {
		t.Errorf("applied config reported unused: %s", w)
	}
}

// TestExplicitReplyKeepsItsConfigurator: a named configurator stays, and
// an answer without config stays "no network config".
func TestExplicitReplyKeepsItsConfigurator(t *testing.T) {
	for in, want := range map[string]string{
		`{"configurator":"nmc","config":{"eth0":{}}}`: ConfiguratorNmc,
		`{"configurator":"none"}`:                     ConfiguratorNone,
		`{"ipAddresses":{"ip1":"10.0.0.1"}}`:          "",
	} {
		nc, err := DecodeNetworkConfigJSON([]byte(in))
		if err != nil || nc.Configurator != want {
			t.Errorf("%s: %+v %v, want configurator %q", in, nc, err, want)
		}
	}
}

func TestExplicitReplyBudget(t *testing.T) {
	p := `{"config":{"interfaces":[` + strings.Repeat("0,", MaxReplyNodes) + `0]}}`
	if _, err := DecodeNetworkConfigJSON([]byte(p)); !errors.Is(err, ErrReplyTooLarge) {
		t.Errorf("%d bytes: %v", len(p), err)
	}
}

// TestUnusedNetworkConfig: a MsgConfig whose network section has a config
// but configurator none or none at all is reported, not dropped in silence.
func TestUnusedNetworkConfig(t *testing.T) {
	base := "elemental:\n    registration:\n        url: https://x/elemental/registration/t\n"
	for _, tail := range []string{
		"configurator: none\nconfig:\n    interfaces:\n        raw: [91, 93]\n        object: null\n",
		"config:\n    interfaces: []\n",
		"configurator: \"\"\nipAddresses: {ip1: 10.0.0.1}\nconfig: {eth0: {raw: [123, 125], object: null}}\n",
	} {
		var cfg Config
		r, err := DecodeConfigReply([]byte(base+tail), &cfg)
		if err != nil {
			t.Fatal(err)
		}
		w := r.Network.Unused()
		if w == "" || !strings.Contains(w, "not applied") {
			t.Errorf("%q: warning %q", tail, w)
		}
		t.Log(w)
	}
	for _, tail := range []string{"", "configurator: none\n", "configurator: nmstate\nconfig: {interfaces: []}\n"} {
		var cfg Config
		r, err := DecodeConfigReply([]byte(base+tail), &cfg)
		if err != nil {
			t.Fatal(err)
		}
		if w := r.Network.Unused(); w != "" {
			t.Errorf("%q: unexpected warning %q", tail, w)
		}
	}
}
