package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nodereg/nodereg/internal/vectors"
	"github.com/nodereg/nodereg/protocol"
	"github.com/nodereg/nodereg/server/regconfig"
	"github.com/nodereg/nodereg/server/store"
)

func TestLowestFreeAndSameMachineKeepsAddress(t *testing.T) {
	s := newServer(t, testConfig(t, "192.168.122.150-192.168.122.200"), memStore(t), nil)
	if got := ip(t, register(t, s, "uuid-a")); got != "192.168.122.150" {
		t.Fatalf("first machine got %s", got)
	}
	if got := ip(t, register(t, s, "uuid-b")); got != "192.168.122.151" {
		t.Fatalf("second machine got %s", got)
	}
	for i := 0; i < 3; i++ {
		if got := ip(t, register(t, s, "uuid-a")); got != "192.168.122.150" {
			t.Fatalf("re-registration %d of the first machine got %s", i, got)
		}
	}
	var n int
	s.store.View(func(st *store.State) { n = len(st.Claims) })
	if n != 2 {
		t.Fatalf("%d claims, want one per (machine, name) = 2", n)
	}
}

func TestReplyCarriesTemplateUnchangedAndAnnouncement(t *testing.T) {
	s := newServer(t, testConfig(t, "192.168.122.150-192.168.122.200"), memStore(t), nil)
	r := register(t, s, "uuid-a")
	if !r.ExplicitNetworkConfig {
		t.Error("no explicitNetworkConfig announcement")
	}
	if r.Network.Configurator != "nmstate" {
		t.Errorf("configurator = %q", r.Network.Configurator)
	}
	b, _ := json.Marshal(r.Network.Config)
	if !strings.Contains(string(b), `"ip":"{inventory-ip}"`) {
		t.Errorf("template was altered: %s", b)
	}
	if got := r.Config.Elemental.Registration.URL; got != "http://regserver.test/elemental/registration/demo-token" {
		t.Errorf("registration.url = %q", got)
	}
	if r.Config.Elemental.Install.Device != "/dev/vda" {
		t.Errorf("install block lost: %+v", r.Config.Elemental.Install)
	}
}

func TestInventoryNameLabelsAnnotations(t *testing.T) {
	s := newServer(t, testConfig(t, "192.168.122.150-192.168.122.200"), memStore(t), nil)
	register(t, s, "8E2F4B1A-0c3d")
	var inv store.Inventory
	s.store.View(func(st *store.State) { inv = *st.Inventories[protocol.PlainHash("8E2F4B1A-0c3d")] })
	if inv.Name != "m-8e2f4b1a-0c3d" {
		t.Errorf("name = %q", inv.Name)
	}
	want := map[string]string{
		"manufacturer":              "QEMU",
		"elemental.cattle.io/model": "Standard-PC-Q35-ICH9-2009",
	}
	if fmt.Sprint(inv.Labels) != fmt.Sprint(want) {
		t.Errorf("labels = %v, want %v (the broken template is skipped)", inv.Labels, want)
	}
	for k, v := range map[string]string{
		"owner":                               "lab",
		"elemental.cattle.io/auth":            "sys-uuid",
		"elemental.cattle.io/registration-ip": "127.0.0.1",
		"elemental.cattle.io/resettable":      "true",
	} {
		if inv.Annotations[k] != v {
			t.Errorf("annotation %s = %q, want %q", k, inv.Annotations[k], v)
		}
	}
}

func TestUpdateUnknownInventory(t *testing.T) {
	s := newServer(t, testConfig(t, "192.168.122.150-192.168.122.200"), memStore(t), nil)
	err := handler(s).Update(context.Background(), machine("never-seen"))
	var er *protocol.ErrorReply
	if !errors.As(err, &er) || er.Message != "MachineInventory not found" || er.Reason != protocol.ReasonInventoryNotFound {
		t.Fatalf("err = %#v", err)
	}
	register(t, s, "never-seen")
	if err := handler(s).Update(context.Background(), machine("never-seen")); err != nil {
		t.Fatalf("known inventory: %v", err)
	}
}

func TestRestartNeitherLosesNorReassigns(t *testing.T) {
	path := filepath.Join(t.TempDir(), "regserver.db")
	cfg := testConfig(t, "192.168.122.150-192.168.122.200")
	st, err := store.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	s := newServer(t, cfg, st, nil)
	register(t, s, "uuid-a")
	register(t, s, "uuid-b")
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}

	st2, err := store.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	s2 := newServer(t, cfg, st2, nil)
	if got := ip(t, register(t, s2, "uuid-c")); got != "192.168.122.152" {
		t.Fatalf("third machine after restart got %s, want .152", got)
	}
	if got := ip(t, register(t, s2, "uuid-a")); got != "192.168.122.150" {
		t.Fatalf("first machine after restart got %s, want .150", got)
	}
}

func TestDeleteReleasesClaims(t *testing.T) {
	s := newServer(t, testConfig(t, "192.168.122.150-192.168.122.200"), memStore(t), nil)
	register(t, s, "uuid-a")
	register(t, s, "uuid-b")

	rec := httptest.NewRecorder()
	adminServe(s, rec, httptest.NewRequest(http.MethodDelete, "/admin/inventories/m-uuid-a", nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("DELETE = %d %s", rec.Code, rec.Body)
	}
	var del struct {
		Deleted  string   `json:"deleted"`
		Released []string `json:"released"`
		Warning  string   `json:"warning"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &del); err != nil {
		t.Fatal(err)
	}
	if del.Deleted != "m-uuid-a" || len(del.Released) != 1 || del.Released[0] != "192.168.122.150" ||
		!strings.Contains(del.Warning, "192.168.122.150") || !strings.Contains(del.Warning, "may still be configured") {
		t.Fatalf("DELETE reply = %+v", del)
	}
	// Lowest free again: the released address goes to the next claim.
	if got := ip(t, register(t, s, "uuid-c")); got != "192.168.122.150" {
		t.Fatalf("after release got %s, want .150", got)
	}
	// Deleting by hash works as well; unknown keys are 404.
	rec = httptest.NewRecorder()
	adminServe(s, rec, httptest.NewRequest(http.MethodDelete, "/admin/inventories/"+protocol.PlainHash("uuid-b"), nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("DELETE by hash = %d", rec.Code)
	}
	rec = httptest.NewRecorder()
	adminServe(s, rec, httptest.NewRequest(http.MethodDelete, "/admin/inventories/nope", nil))
	if rec.Code != http.StatusNotFound {
		t.Fatalf("DELETE unknown = %d", rec.Code)
	}
	if err := handler(s).Update(context.Background(), machine("uuid-a")); err == nil {
		t.Fatal("deleted inventory still accepted MsgUpdate")
	}
}

func TestPoolExhausted(t *testing.T) {
	s := newServer(t, testConfig(t, "192.168.122.150-192.168.122.151"), memStore(t), nil)
	register(t, s, "uuid-a")
	register(t, s, "uuid-b")
	r := register(t, s, "uuid-c")
	if r.Network != nil {
		t.Fatalf("third machine got a network config: %+v", r.Network.IPAddresses)
	}
	_, err := handler(s).NetworkConfig(context.Background(), machine("uuid-c"))
	var er *protocol.ErrorReply
	if !errors.As(err, &er) || er.Reason != protocol.ReasonPoolExhausted || !strings.Contains(er.Message, `"pool-a"`) {
		t.Fatalf("err = %#v, want PoolExhausted naming pool-a", err)
	}
	// Freeing an address lets the pending claim through (claims are
	// retried, as the provider requeues them).
	rec := httptest.NewRecorder()
	adminServe(s, rec, httptest.NewRequest(http.MethodDelete, "/admin/inventories/m-uuid-b", nil))
	nc, err := handler(s).NetworkConfig(context.Background(), machine("uuid-c"))
	if err != nil || nc.IPAddresses["inventory-ip"] != "192.168.122.151" {
		t.Fatalf("after release: %+v, %v", nc, err)
	}
}

func TestAllocationDelay(t *testing.T) {
	clk := &clock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	s := newServer(t, testConfig(t, "192.168.122.150-192.168.122.200"), memStore(t), func(o *Options) {
		o.AllocationDelay = 3 * time.Second
		o.Now = clk.Now
	})
	if r := register(t, s, "uuid-a"); r.Network != nil {
		t.Fatal("address handed out before the delay")
	}
	_, err := handler(s).NetworkConfig(context.Background(), machine("uuid-a"))
	var er *protocol.ErrorReply
	if !errors.As(err, &er) || er.Reason != protocol.ReasonWaitingForIPAddress || er.RetryAfterSeconds != 3 ||
		!strings.Contains(er.Message, "m-uuid-a-inventory-ip") {
		t.Fatalf("err = %#v, want WaitingForIPAddress naming the claim, retry 3", err)
	}
	clk.Add(2500 * time.Millisecond)
	_, err = handler(s).NetworkConfig(context.Background(), machine("uuid-a"))
	if !errors.As(err, &er) || er.RetryAfterSeconds != 1 {
		t.Fatalf("after 2.5s: %#v", err)
	}
	clk.Add(500 * time.Millisecond)
	nc, err := handler(s).NetworkConfig(context.Background(), machine("uuid-a"))
	if err != nil || nc.IPAddresses["inventory-ip"] != "192.168.122.150" {
		t.Fatalf("after the delay: %+v, %v", nc, err)
	}
}

// For a client that cannot ask explicitly, MsgGet itself waits and embeds
// the address, so unmodified upstream clients get it in MsgConfig; our
// agent gets the early reply.
func TestGetWaitsForDelayedAddress(t *testing.T) {
	s := newServer(t, testConfig(t, "192.168.122.150-192.168.122.200"), memStore(t), func(o *Options) {
		o.AllocationDelay = 300 * time.Millisecond
		o.NetworkWait = 5 * time.Second
	})
	start := time.Now()
	r, err := upstreamHandler(s).Get(context.Background(), machine("uuid-a"))
	if err != nil || ip(t, r) != "192.168.122.150" || r.ExplicitNetworkConfig {
		t.Fatalf("upstream client: %+v, %v", r, err)
	}
	if waited := time.Since(start); waited < 300*time.Millisecond {
		t.Fatalf("replied after %s, before the allocation delay", waited)
	}
	r = register(t, s, "uuid-c")
	if r.Network != nil || !r.ExplicitNetworkConfig {
		t.Fatalf("our agent: network %+v, announcement %v; want the early reply", r.Network, r.ExplicitNetworkConfig)
	}
	// A client below version 12 is answered at once (no wait upstream).
	sess := machine("uuid-b")
	sess.Version = 11
	r, err = upstreamHandler(s).Get(context.Background(), sess)
	if err != nil || r.Network != nil {
		t.Fatalf("v11 client: network %+v, err %v", r.Network, err)
	}
}

// When the addresses are still pending at the end of the wait, an upstream
// client gets an error, never a config without its network section.
func TestGetFailsUpstreamClientWhileAddressesPending(t *testing.T) {
	s := newServer(t, testConfig(t, "192.168.122.150-192.168.122.151"), memStore(t), func(o *Options) {
		o.AllocationDelay = time.Hour
		o.NetworkWait = 5 * time.Second
	})
	ctx, cancel := context.WithTimeout(context.Background(), 400*time.Millisecond)
	defer cancel()
	start := time.Now()
	r, err := upstreamHandler(s).Get(ctx, machine("uuid-a"))
	var er *protocol.ErrorReply
	if !errors.As(err, &er) || er.Reason != protocol.ReasonWaitingForIPAddress || !strings.Contains(er.Message, "m-uuid-a-inventory-ip") {
		t.Fatalf("reply %+v, err %v; want WaitingForIPAddress naming the claim", r, err)
	}
	if waited := time.Since(start); waited < 300*time.Millisecond || waited > 2*time.Second {
		t.Fatalf("failed after %s; want at the session deadline (400ms)", waited)
	}
	// The inventory exists, so the client's retry finds its claim.
	if err := handler(s).Update(context.Background(), machine("uuid-a")); err != nil {
		t.Fatalf("inventory not kept: %v", err)
	}
}

func TestConcurrentClaimsDistinct(t *testing.T) {
	path := filepath.Join(t.TempDir(), "regserver.db")
	st, err := store.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	cfg := testConfig(t, "192.168.122.0/24")
	s := newServer(t, cfg, st, nil)
	const n = 200
	got := make([]string, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			r, err := handler(s).Get(context.Background(), machine(fmt.Sprintf("uuid-%03d", i)))
			if err == nil && r.Network != nil {
				got[i] = r.Network.IPAddresses["inventory-ip"]
			}
			errs[i] = err
		}(i)
	}
	wg.Wait()
	seen := map[string]int{}
	for i, a := range got {
		if errs[i] != nil || a == "" {
			t.Fatalf("machine %d: address %q, err %v", i, a, errs[i])
		}
		if j, dup := seen[a]; dup {
			t.Fatalf("machines %d and %d both got %s", j, i, a)
		}
		seen[a] = i
		if a == "192.168.122.0" || a == "192.168.122.1" || a == "192.168.122.255" {
			t.Fatalf("reserved address %s allocated", a)
		}
	}
	// Lowest free: exactly .2 … .201 are taken.
	for k := 2; k < 2+n; k++ {
		if _, ok := seen[fmt.Sprintf("192.168.122.%d", k)]; !ok {
			t.Fatalf("192.168.122.%d unused, allocation skipped an address", k)
		}
	}
	// What was handed out is what is on disk.
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	st2, err := store.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	st2.View(func(state *store.State) {
		for _, c := range state.Claims {
			i, ok := seen[c.Address]
			if !ok || c.Inventory != protocol.PlainHash(fmt.Sprintf("uuid-%03d", i)) {
				t.Fatalf("claim on disk %s/%s does not match what was handed out", c.Name, c.Address)
			}
		}
	})
}

func TestRouting(t *testing.T) {
	s := newServer(t, testConfig(t, "192.168.122.150-192.168.122.200"), memStore(t), func(o *Options) { o.CACert = "PEM" })
	cases := []struct {
		path string
		code int
		body string
	}{
		{"/elemental/registration/demo-token", 200, "        url: http://example.com/elemental/registration/demo-token\n"},
		{"/elemental/registration/demo-token", 200, "        auth: sys-uuid\n"},
		{"/elemental/registration/demo-token", 200, "        ca-cert: PEM\n"},
		{"/elemental/registration/wrong", 404, "failed to find machine registration with this registration token"},
		{"/elemental/other/x", 400, "api: other"},
		{"/x", 404, ""},
	}
	for _, c := range cases {
		rec := httptest.NewRecorder()
		s.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, c.path, nil))
		if rec.Code != c.code || !strings.Contains(rec.Body.String(), c.body) {
			t.Errorf("GET %s = %d %q, want %d containing %q", c.path, rec.Code, rec.Body, c.code, c.body)
		}
	}
	// docs/reliability.md, "Secrets": a client may log the 404 body, so it must not hold the token.
	rec := httptest.NewRecorder()
	s.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/elemental/registration/guessed-7f3a9c", nil))
	if rec.Code != http.StatusNotFound || strings.Contains(rec.Body.String(), "7f3a9c") {
		t.Errorf("wrong token: %d %q echoes the token", rec.Code, rec.Body)
	}
	rec = httptest.NewRecorder()
	s.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/elemental/registration/demo-token", nil))
	if strings.Contains(rec.Body.String(), "install") || strings.Contains(rec.Body.String(), "cloud-config") {
		t.Errorf("plain GET leaks more than the registration block:\n%s", rec.Body)
	}
}

// exampleConfig is the config regserver ships with.
var exampleConfig = filepath.Join(vectors.ModuleRoot(), "cmd", "regserver", "example.yaml")

func TestExampleConfigServes(t *testing.T) {
	cfg, err := regconfig.Load(exampleConfig)
	if err != nil {
		t.Fatal(err)
	}
	s := newServer(t, cfg, memStore(t), nil)
	if got := ip(t, register(t, s, "uuid-a")); got != "192.168.122.150" {
		t.Fatalf("got %s", got)
	}
}

func BenchmarkRegister(b *testing.B) {
	cfg, err := regconfig.Parse([]byte(`
registrations:
- name: demo
  token: demo-token
  network:
    configurator: nmstate
    ipAddresses: {ip: p}
    config: {interfaces: [{name: eth0}]}
pools:
- {name: p, addresses: [10.0.0.0/8], prefix: 8}
`))
	if err != nil {
		b.Fatal(err)
	}
	s := newServer(b, cfg, fileStore(b), nil)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := handler(s).Get(context.Background(), machine(fmt.Sprint("m", i))); err != nil {
			b.Fatal(err)
		}
	}
}
