package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/nodereg/nodereg/protocol"
	"github.com/nodereg/nodereg/server/store"
)

// dialFrom opens a PLAIN registration session from a loopback address of
// its own (127.0.0.0/8 is all loopback), so the server sees distinct
// clients; resp is the refusal when the upgrade was refused.
func dialFrom(t *testing.T, src, url, id string) (*rawClient, *http.Response, error) {
	t.Helper()
	d := websocket.Dialer{HandshakeTimeout: 5 * time.Second,
		NetDialContext: (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}}).DialContext}
	h := http.Header{}
	h.Set("Authorization", "Bearer PLAIN"+id)
	ws, resp, err := d.Dial(url, h)
	if err != nil {
		return nil, resp, err
	}
	t.Cleanup(func() { ws.Close() })
	return &rawClient{t, ws}, nil, nil
}

// registerFrom runs a whole upstream-style registration from src and
// returns the reply's type and payload.
func registerFrom(t *testing.T, src, url, id string) (byte, string) {
	t.Helper()
	c, resp, err := dialFrom(t, src, url, id)
	if err != nil {
		return 0, fmt.Sprintf("dial: %v (%v)", err, resp)
	}
	defer c.ws.Close()
	c.expect(0x01, "")
	c.send(0x05, "\x0c")
	c.expect(0x05, "\x0c")
	c.send(0x02, fmt.Sprintf(`{"System Information":{"UUID":%q,"Manufacturer":"QEMU"}}`, id))
	c.expect(0x01, "")
	c.send(0x04, "")
	typ, p := c.read()
	return typ, string(p)
}

// One client address floods the server with idle sessions and with new
// machines: it is held to its share, and real machines at other addresses
// (and its own machines already registered) still register.
func TestFloodOneClientRealRegistrationsComplete(t *testing.T) {
	s := newServer(t, testConfig(t, "192.168.122.10-192.168.122.250"), memStore(t), func(o *Options) {
		o.MaxClientSessions, o.NewInventoriesPerMinute = 4, 5
		o.SessionDeadline = 5 * time.Second
	})
	url := wsURL(t, s, "demo-token")

	// Idle sessions from 127.0.0.2: four are taken, the rest refused
	// before anything is read, with a reason naming the client.
	held, refused := 0, 0
	for i := range 20 {
		c, resp, err := dialFrom(t, "127.0.0.2", url, fmt.Sprintf("idle-%d", i))
		switch {
		case err == nil:
			c.expect(0x01, "")
			held++
		case resp != nil && resp.StatusCode == http.StatusTooManyRequests && resp.Header.Get("Retry-After") != "":
			refused++
		default:
			t.Fatalf("idle session %d: %v (%v)", i, err, resp)
		}
	}
	if held != 4 || refused != 16 {
		t.Fatalf("idle sessions: %d held, %d refused; want 4 and 16", held, refused)
	}

	// New machines from 127.0.0.3: five, then RateLimited.
	for i := range 8 {
		typ, p := registerFrom(t, "127.0.0.3", url, fmt.Sprintf("fake-%d", i))
		if i < 5 && typ != 0x07 {
			t.Fatalf("fake machine %d: 0x%02x %s", i, typ, p)
		}
		if i >= 5 && (typ != 0x08 || !strings.Contains(p, "reason: "+ReasonRateLimited) || !strings.Contains(p, "127.0.0.3") || !strings.Contains(p, "retryAfterSeconds:")) {
			t.Fatalf("fake machine %d past the rate: 0x%02x %s", i, typ, p)
		}
	}
	// Its machines already registered are not limited.
	if typ, p := registerFrom(t, "127.0.0.3", url, "fake-0"); typ != 0x07 {
		t.Fatalf("re-registration of a known machine from the flooding client: 0x%02x %s", typ, p)
	}

	// Meanwhile real machines, each at its own address, all register.
	var wg sync.WaitGroup
	errs := make(chan string, 20)
	for i := range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			typ, p := registerFrom(t, fmt.Sprintf("127.0.1.%d", i+1), url, fmt.Sprintf("real-%d", i))
			if typ != 0x07 || !strings.Contains(p, "inventory-ip: 192.168.122.") {
				errs <- fmt.Sprintf("real machine %d: 0x%02x %s", i, typ, p)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
}

// The bound on inventories waiting for an address refuses new machines
// that would wait, names the reason, and stores nothing; machines already
// waiting keep their place, and freed addresses go to the claim waiting
// longest, whoever asks first.
func TestPendingCapAndFirstComeFirstServed(t *testing.T) {
	s := newServer(t, testConfig(t, "192.168.122.150-192.168.122.151"), memStore(t), func(o *Options) {
		o.MaxPendingInventories = 3
	})
	register(t, s, "uuid-a")
	register(t, s, "uuid-b")
	for _, u := range []string{"uuid-c", "uuid-d", "uuid-e"} {
		if r := register(t, s, u); r.Network != nil {
			t.Fatalf("%s got an address from a full pool", u)
		}
	}
	_, err := handler(s).Get(context.Background(), machine("uuid-f"))
	var er *protocol.ErrorReply
	if !errors.As(err, &er) || er.Reason != ReasonTooManyPending || er.RetryAfterSeconds == 0 {
		t.Fatalf("sixth machine: %#v, want %s", err, ReasonTooManyPending)
	}
	s.store.View(func(st *store.State) {
		if st.Inventories[protocol.PlainHash("uuid-f")] != nil || len(st.Inventories) != 5 {
			t.Fatalf("the refused machine was stored (%d inventories)", len(st.Inventories))
		}
	})
	// A machine already waiting re-registers fine.
	register(t, s, "uuid-d")

	// Two addresses free up: c and d (first to wait) get them, though e
	// asks first.
	for _, u := range []string{"m-uuid-a", "m-uuid-b"} {
		rec := httptest.NewRecorder()
		adminServe(s, rec, httptest.NewRequest(http.MethodDelete, "/admin/inventories/"+u, nil))
		if rec.Code != http.StatusOK {
			t.Fatalf("DELETE %s: %d %s", u, rec.Code, rec.Body)
		}
	}
	if _, err := handler(s).NetworkConfig(context.Background(), machine("uuid-e")); !errors.As(err, &er) || er.Reason != protocol.ReasonPoolExhausted {
		t.Fatalf("uuid-e overtook the older claims: %v", err)
	}
	for u, want := range map[string]string{"uuid-c": "192.168.122.150", "uuid-d": "192.168.122.151"} {
		nc, err := handler(s).NetworkConfig(context.Background(), machine(u))
		if err != nil || nc.IPAddresses["inventory-ip"] != want {
			t.Fatalf("%s: %+v, %v; want %s", u, nc, err, want)
		}
	}
	// The pools view names the exhausted pool and its queue.
	rec := httptest.NewRecorder()
	adminServe(s, rec, httptest.NewRequest(http.MethodGet, "/admin/pools", nil))
	if !strings.Contains(rec.Body.String(), `"waiting": 1`) || !strings.Contains(rec.Body.String(), `"reason": "PoolExhausted"`) {
		t.Fatalf("pools view:\n%s", rec.Body)
	}
}

// The clean-up lists, then removes, inventories that never got an address,
// and the address it frees goes to the claim waiting longest.
func TestStaleCleanup(t *testing.T) {
	clk := &clock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	s := newServer(t, testConfig(t, "192.168.122.150-192.168.122.150"), memStore(t), func(o *Options) { o.Now = clk.Now })
	register(t, s, "old-addressed")
	register(t, s, "old-pending")
	clk.Add(2 * time.Hour)
	register(t, s, "new-pending")
	do := func(method, query string) StaleReport {
		t.Helper()
		rec := httptest.NewRecorder()
		adminServe(s, rec, httptest.NewRequest(method, "/admin/stale?"+query, nil))
		var rep StaleReport
		if rec.Code != http.StatusOK || mustUnmarshal(rec.Body.Bytes(), &rep) != nil {
			t.Fatalf("%s /admin/stale?%s: %d %s", method, query, rec.Code, rec.Body)
		}
		return rep
	}
	if rep := do(http.MethodGet, "unaddressed=1h"); rep.Removed || rep.Count != 1 || rep.Stale[0].Name != "m-old-pending" {
		t.Fatalf("listed %+v, want only m-old-pending", rep)
	}
	rec := httptest.NewRecorder()
	adminServe(s, rec, httptest.NewRequest(http.MethodGet, "/admin/stale", nil))
	if rec.Code != http.StatusBadRequest {
		t.Fatalf("no criteria: %d", rec.Code)
	}
	// Not seen for an hour: the two old ones, one holding an address.
	rep := do(http.MethodDelete, "unseen=1h")
	if !rep.Removed || rep.Count != 2 || rep.Addresses != 1 {
		t.Fatalf("removed %+v, want 2 inventories and 1 address", rep)
	}
	nc, err := handler(s).NetworkConfig(context.Background(), machine("new-pending"))
	if err != nil || nc.IPAddresses["inventory-ip"] != "192.168.122.150" {
		t.Fatalf("the freed address did not go to the waiting claim: %+v, %v", nc, err)
	}
}

func mustUnmarshal(b []byte, v any) error { return json.Unmarshal(b, v) }
