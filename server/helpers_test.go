package server

import (
	"context"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/nodereg/nodereg/protocol"
	"github.com/nodereg/nodereg/server/regconfig"
	"github.com/nodereg/nodereg/server/store"
)

func regconfigParseNetwork(doc string) (*store.NetworkTemplate, error) {
	var n store.NetworkTemplate
	err := yaml.Unmarshal([]byte(doc), &n)
	return &n, err
}

// testConfig is cmd/regserver/example.yaml's shape: pool .150-.200 (or a smaller one),
// nmstate template with {inventory-ip}.
func testConfig(t *testing.T, addresses string) *regconfig.Config {
	t.Helper()
	doc := `
registrations:
- name: demo
  token: demo-token
  machineName: m-${System Information/UUID}
  machineInventoryLabels:
    manufacturer: ${System Information/Manufacturer}
    broken: ${System Information/NoSuchKey}
  machineInventoryAnnotations: {owner: lab}
  config:
    elemental:
      registration: {auth: sys-uuid}
      install: {device: /dev/vda}
      reset: {enabled: true}
    cloud-config:
      users: [{name: root, passwd: root}]
  network:
    configurator: nmstate
    ipAddresses: {inventory-ip: pool-a}
    config:
      interfaces:
      - name: enp1s0
        ipv4: {enabled: true, dhcp: false, address: [{ip: "{inventory-ip}", prefix-length: 24}]}
pools:
- name: pool-a
  addresses: [` + addresses + `]
  prefix: 24
  gateway: 192.168.122.1
`
	c, err := regconfig.Parse([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func newServer(t testing.TB, cfg *regconfig.Config, st *store.Store, mod func(*Options)) *Server {
	t.Helper()
	// Tests register many machines from one (absent) client address: the
	// rate limit has tests of its own.
	o := Options{Config: cfg, Store: st, NetworkWait: -1, NewInventoriesPerMinute: -1}
	if mod != nil {
		mod(&o)
	}
	s, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// wsURL serves s on loopback for the rest of the test and returns the
// websocket URL of the registration token.
func wsURL(t testing.TB, s *Server, token string) string {
	t.Helper()
	ts := httptest.NewServer(s)
	t.Cleanup(ts.Close)
	return "ws" + strings.TrimPrefix(ts.URL, "http") + "/elemental/registration/" + token
}

func memStore(t testing.TB) *store.Store {
	st, err := store.Open("")
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// fileStore is a database in a temporary directory, closed at the end.
func fileStore(t testing.TB) *store.Store {
	st, err := store.Open(filepath.Join(t.TempDir(), "regserver.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// machine is the session of a PLAIN machine whose SMBIOS UUID is uuid.
func machine(uuid string) *protocol.ServerSession {
	return &protocol.ServerSession{
		Identity: protocol.Identity{Kind: "plain", Hash: protocol.PlainHash(uuid)},
		Version:  protocol.Version,
		SMBIOS: map[string]any{"System Information": map[string]any{
			"UUID": uuid, "Manufacturer": "QEMU", "Product Name": "Standard PC (Q35 + ICH9, 2009)"}},
		Annotations: map[string]string{"auth": "sys-uuid", "registration-ip": "127.0.0.1"},
		Labels:      map[string]string{"model": "${System Information/Product Name}"},
	}
}

// handler is the session of nodereg's agent, which announced that it asks
// explicitly (protocol.HeaderNetworkConfig).
func handler(s *Server) *session {
	h := upstreamHandler(s)
	h.explicit = true
	return h
}

// upstreamHandler is the session of an unmodified elemental-register.
func upstreamHandler(s *Server) *session {
	reg, _ := s.cfg.ByToken("demo-token")
	return &session{srv: s, reg: reg, url: "http://regserver.test/elemental/registration/demo-token"}
}

func register(t testing.TB, s *Server, uuid string) *protocol.ConfigReply {
	t.Helper()
	r, err := handler(s).Get(context.Background(), machine(uuid))
	if err != nil {
		t.Fatalf("Get(%s): %v", uuid, err)
	}
	return r
}

func ip(t testing.TB, r *protocol.ConfigReply) string {
	t.Helper()
	if r.Network == nil {
		t.Fatalf("reply without network config")
	}
	return r.Network.IPAddresses["inventory-ip"]
}
