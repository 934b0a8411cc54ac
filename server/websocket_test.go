package server

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/nodereg/nodereg/internal/vectors"
	"github.com/nodereg/nodereg/protocol"
	"github.com/nodereg/nodereg/server/store"
	"github.com/nodereg/nodereg/server/tpmauth"
)

// rawClient speaks the wire by hand, so the test checks bytes rather than
// our own client code.
type rawClient struct {
	t  *testing.T
	ws *websocket.Conn
}

// dialPlain connects as an unmodified elemental-register does.
func dialPlain(t *testing.T, url, id string) *rawClient {
	t.Helper()
	return dialPlainWith(t, url, id, http.Header{})
}

// dialAgent connects as nodereg's agent: it announces the explicit ask.
func dialAgent(t *testing.T, url, id string) *rawClient {
	t.Helper()
	h := http.Header{}
	h.Set(protocol.HeaderNetworkConfig, protocol.NetworkConfigExplicit)
	return dialPlainWith(t, url, id, h)
}

func dialPlainWith(t *testing.T, url, id string, h http.Header) *rawClient {
	t.Helper()
	h.Set("Authorization", "Bearer PLAIN"+id)
	ws, resp, err := websocket.DefaultDialer.Dial(url, h)
	if err != nil {
		t.Fatalf("dial: %v (%v)", err, resp)
	}
	t.Cleanup(func() { ws.Close() })
	c := &rawClient{t, ws}
	c.expect(0x01, "") // authenticated
	c.send(0x05, "\x0c")
	c.expect(0x05, "\x0c")
	return c
}

func (c *rawClient) send(typ byte, payload string) {
	c.t.Helper()
	if err := c.ws.WriteMessage(websocket.BinaryMessage, append([]byte{typ}, payload...)); err != nil {
		c.t.Fatalf("send 0x%02x: %v", typ, err)
	}
}

func (c *rawClient) read() (byte, []byte) {
	c.t.Helper()
	mt, b, err := c.ws.ReadMessage()
	if err != nil {
		c.t.Fatalf("read: %v", err)
	}
	if mt != websocket.BinaryMessage || len(b) == 0 {
		c.t.Fatalf("read: message type %d, %d bytes", mt, len(b))
	}
	return b[0], b[1:]
}

// sendHardware sends upstream's captured SMBIOS, system data and
// annotations, each acknowledged, as a first registration does.
func (c *rawClient) sendHardware() {
	c.t.Helper()
	c.send(0x02, vector(c.t, "upstream-smbios.json"))
	c.expect(0x01, "")
	c.send(0x0B, vector(c.t, "upstream-systemdatav2.json"))
	c.expect(0x01, "")
	c.send(0x09, vector(c.t, "upstream-annotations.json"))
	c.expect(0x01, "")
}

func (c *rawClient) expect(typ byte, payload string) {
	c.t.Helper()
	got, p := c.read()
	if got != typ || string(p) != payload {
		c.t.Fatalf("got 0x%02x %q, want 0x%02x %q", got, p, typ, payload)
	}
}

// vector is one of upstream's wire captures (tests/vectors), as sent.
func vector(t *testing.T, name string) string {
	return strings.TrimSpace(string(vectors.Read(t, name))) + "\n"
}

func TestWebsocketPlainRegistration(t *testing.T) {
	s := newServer(t, testConfig(t, "192.168.122.150-192.168.122.200"), memStore(t), nil)
	url := wsURL(t, s, "demo-token")

	// First registration, payloads as captured from upstream.
	c := dialPlain(t, url, "4c4c4544-0042-3010-8058-b4c04f4e4e32")
	c.sendHardware()
	c.send(0x04, "")
	typ, p := c.read()
	if typ != 0x07 {
		t.Fatalf("reply type 0x%02x: %s", typ, p)
	}
	// Upstream's byte-list encoding of schemaless values, network appended
	// to the same document.
	for _, want := range []string{"cloud-config:\n    users:\n        raw:\n            - 91\n", "\nconfigurator: nmstate\nipAddresses:\n    inventory-ip: 192.168.122.150\nconfig:\n"} {
		if !strings.Contains(string(p), want) {
			t.Errorf("MsgConfig lacks %q:\n%s", want, p)
		}
	}
	if strings.Contains(string(p), "explicitNetworkConfig") {
		t.Errorf("upstream client got the announcement:\n%s", p)
	}
	if strings.Contains(string(p), "\n---") {
		t.Error("MsgConfig holds a second YAML document")
	}
	var cfg protocol.Config
	reply, err := protocol.DecodeConfigReply(p, &cfg)
	if err != nil {
		t.Fatal(err)
	}
	if reply.Network == nil || reply.Network.IPAddresses["inventory-ip"] != "192.168.122.150" {
		t.Fatalf("decoded reply: %+v", reply)
	}
	if cfg.Elemental.Registration.URL != "http"+strings.TrimPrefix(url, "ws") {
		t.Errorf("registration.url = %q", cfg.Elemental.Registration.URL)
	}
	var inv store.Inventory
	s.store.View(func(st *store.State) {
		inv = *st.Inventories[protocol.PlainHash("4c4c4544-0042-3010-8058-b4c04f4e4e32")]
	})
	if inv.Name != "m-4c4c4544-0042-3010-8058-b4c04f4e4e32" || inv.Annotations["elemental.cattle.io/auth"] != "emulated-tpm" {
		t.Errorf("inventory %q, annotations %v", inv.Name, inv.Annotations)
	}

	// Our agent's registration carries the announcement.
	c = dialAgent(t, url, "4c4c4544-0042-3010-8058-b4c04f4e4e32")
	c.send(0x04, "")
	if typ, p = c.read(); typ != 0x07 || !strings.HasSuffix(string(p), "\nexplicitNetworkConfig: true\n") {
		t.Fatalf("agent's MsgConfig 0x%02x without the announcement:\n%s", typ, p)
	}

	// Second connection: the explicit ask (docs/regserver.md, Network config replies).
	c = dialAgent(t, url, "4c4c4544-0042-3010-8058-b4c04f4e4e32")
	c.send(0x0C, "")
	typ, p = c.read()
	if typ != 0x0C || !strings.Contains(string(p), `"ipAddresses":{"inventory-ip":"192.168.122.150"}`) ||
		!strings.Contains(string(p), `"ip":"{inventory-ip}"`) {
		t.Fatalf("MsgNetworkConfig reply 0x%02x %s", typ, p)
	}

	// An update from a machine the server does not know.
	c = dialPlain(t, url, "stranger")
	c.send(0x0A, "")
	c.expect(0x08, "message: MachineInventory not found\nreason: InventoryNotFound\n")
}

func TestWebsocketUnknownTokenIsHTTP404(t *testing.T) {
	s := newServer(t, testConfig(t, "192.168.122.150-192.168.122.200"), memStore(t), nil)
	h := http.Header{}
	h.Set("Authorization", "Bearer PLAINx")
	_, resp, err := websocket.DefaultDialer.Dial(wsURL(t, s, "nope"), h)
	if err == nil || resp == nil || resp.StatusCode != http.StatusNotFound {
		t.Fatalf("err %v, resp %v", err, resp)
	}
}

// The reply's cloud-config and network sections must equal, byte for byte,
// what elemental-operator sent for the same template (vectors/).
func TestMsgConfigMatchesUpstreamVector(t *testing.T) {
	golden := vector(t, "upstream-msgconfig-network.yaml")
	cfg := testConfig(t, "192.168.122.150-192.168.122.200")
	reg, _ := cfg.ByToken("demo-token")
	// The template of the captured registration.
	tmpl, err := regconfigParseNetwork(`
configurator: nmstate
ipAddresses: {inventory-ip: pool-a}
config:
  interfaces:
  - {name: enp1s0, type: ethernet, state: up, ipv4: {enabled: true, dhcp: false, address: [{ip: "{inventory-ip}", prefix-length: 24}]}, ipv6: {enabled: false}}
  routes:
    config:
    - {destination: 0.0.0.0/0, next-hop-interface: enp1s0, next-hop-address: 192.168.122.1, metric: 150, table-id: 254}
  dns-resolver:
    config: {server: [192.168.122.1], search: []}
`)
	if err != nil {
		t.Fatal(err)
	}
	reg.Network = tmpl
	reg.MachineName = ""
	s := newServer(t, cfg, memStore(t), nil)
	c := dialPlain(t, wsURL(t, s, "demo-token"), "golden")
	c.send(0x04, "")
	typ, p := c.read()
	if typ != 0x07 {
		t.Fatalf("reply 0x%02x %s", typ, p)
	}
	got := string(p)
	got = got[strings.Index(got, "cloud-config:"):]
	want := golden[strings.Index(golden, "cloud-config:"):]
	if got != want {
		t.Fatalf("cloud-config+network differ from upstream\n--- got\n%s\n--- want\n%s", got, want)
	}
}

// The captured upstream client sequence (docs/protocol.md, the registration conversation) against a server
// whose allocation delay outlasts the session: MsgError, never a MsgConfig
// without the network section; with a delay inside the session, the
// MsgConfig carries the address.
func TestWebsocketUpstreamClientWithAllocationDelay(t *testing.T) {
	// The session inside which the delay ends is long, so that a loaded
	// machine cannot spend it before the 0.7 s have passed; the one the
	// delay outlasts is short, as the test waits it out.
	for _, c := range []struct {
		name           string
		delay, session time.Duration
	}{{"delay inside the session", 700 * time.Millisecond, time.Minute}, {"delay beyond the session", time.Hour, 2 * time.Second}} {
		t.Run(c.name, func(t *testing.T) {
			// Parallel: each case waits on a server of its own.
			t.Parallel()
			s := newServer(t, testConfig(t, "192.168.122.150-192.168.122.200"), memStore(t), func(o *Options) {
				o.AllocationDelay = c.delay
				o.NetworkWait = 0 // the default: up to the session deadline
				o.SessionDeadline = c.session
			})
			url := wsURL(t, s, "demo-token")
			cl := dialPlain(t, url, "4c4c4544-0042-3010-8058-b4c04f4e4e32")
			cl.sendHardware()
			start := time.Now()
			cl.send(0x04, "")
			typ, p := cl.read()
			waited := time.Since(start)
			if c.delay < time.Hour {
				if typ != 0x07 || !strings.Contains(string(p), "\nipAddresses:\n    inventory-ip: 192.168.122.150\n") || strings.Contains(string(p), "explicitNetworkConfig") {
					t.Fatalf("reply 0x%02x after %s:\n%s", typ, waited, p)
				}
				return
			}
			if typ != 0x08 || !strings.Contains(string(p), "reason: WaitingForIPAddress") || !strings.Contains(string(p), "NetworkConfig not ready") {
				t.Fatalf("reply 0x%02x after %s, want MsgError WaitingForIPAddress:\n%s", typ, waited, p)
			}
			if waited < time.Second || waited > 3*time.Second {
				t.Fatalf("MsgError after %s, want close to the 2 s session deadline", waited)
			}
		})
	}
}

// nodereg's agent with the same delay: the early reply at once, with the
// announcement and without a network section.
func TestWebsocketAgentWithAllocationDelay(t *testing.T) {
	s := newServer(t, testConfig(t, "192.168.122.150-192.168.122.200"), memStore(t), func(o *Options) {
		o.AllocationDelay = time.Hour
		o.NetworkWait = 0
	})
	cl := dialAgent(t, wsURL(t, s, "demo-token"), "agent-1")
	cl.send(0x02, vector(t, "upstream-smbios.json"))
	cl.expect(0x01, "")
	cl.send(0x04, "")
	typ, p := cl.read()
	if typ != 0x07 || strings.Contains(string(p), "ipAddresses") || !strings.HasSuffix(string(p), "\nexplicitNetworkConfig: true\n") {
		t.Fatalf("reply 0x%02x:\n%s", typ, p)
	}
}

// A registration's auth decides the authentication it accepts: a PLAIN
// client cannot register as a machine of an auth: tpm registration, nor a
// TPM token reach a PLAIN one. Either way the connection closes without a
// message, as upstream closes on failed authentication.
func TestRegistrationAuthDecidesAuthentication(t *testing.T) {
	cfg := testConfig(t, "192.168.122.150-192.168.122.200")
	cfg.Registrations[0].Config.Elemental.Registration.Auth = "tpm"
	s := newServer(t, cfg, memStore(t), func(o *Options) {
		o.Auth = []protocol.ServerAuthenticator{tpmauth.New(tpmauth.Options{}), protocol.PlainServer{}}
	})
	url := wsURL(t, s, "demo-token")
	refused := func(header string) {
		t.Helper()
		h := http.Header{}
		h.Set("Authorization", header)
		ws, _, err := websocket.DefaultDialer.Dial(url, h)
		if err != nil {
			t.Fatal(err)
		}
		defer ws.Close()
		_ = ws.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, b, err := ws.ReadMessage(); err == nil {
			t.Fatalf("%.20s: got message %q, want the connection closed", header, b)
		}
	}
	refused("Bearer PLAINuuid-a")
	var n int
	s.store.View(func(st *store.State) { n = len(st.Inventories) })
	if n != 0 {
		t.Fatalf("%d inventories after a refused PLAIN client", n)
	}

	cfg.Registrations[0].Config.Elemental.Registration.Auth = "mac"
	refused("Bearer TPMe30=")
	// The same PLAIN client is welcome at a mac registration.
	c := dialPlain(t, url, "uuid-a")
	c.send(0x02, vector(t, "upstream-smbios.json"))
	c.expect(0x01, "")
	c.send(0x04, "")
	if typ, p := c.read(); typ != 0x07 {
		t.Fatalf("PLAIN at auth: mac: 0x%02x %s", typ, p)
	}
}
