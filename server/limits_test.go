package server

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/nodereg/nodereg/protocol"
)

// Sessions beyond --max-sessions wait for a slot, then get HTTP 503
// before any payload is read.
func TestSessionCap(t *testing.T) {
	s := newServer(t, testConfig(t, "192.168.122.150-192.168.122.200"), memStore(t), func(o *Options) {
		o.MaxSessions = 1
		o.SessionSlotWait = 300 * time.Millisecond
	})
	url := wsURL(t, s, "demo-token")
	held := dialPlain(t, url, "uuid-a") // authenticated, holds its slot
	h := http.Header{}
	h.Set("Authorization", "Bearer PLAINuuid-b")
	_, resp, err := websocket.DefaultDialer.Dial(url, h)
	if err == nil || resp == nil || resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("second session: %v, %+v", err, resp)
	}
	held.ws.Close()
	// The slot comes back when the session ends; the deadline only
	// bounds a hang.
	deadline := time.Now().Add(30 * time.Second)
	for {
		c, resp, err := websocket.DefaultDialer.Dial(url, h)
		if err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("slot not released: %v %+v", err, resp)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// A connection that sends more than the per-session byte cap is cut off
// while reading, before the payload is decoded; a normal one passes.
func TestSessionBytesCap(t *testing.T) {
	s := newServer(t, testConfig(t, "192.168.122.150-192.168.122.200"), memStore(t), nil)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewUnstartedServer(s)
	ts.Listener = LimitListener(ln, 16, 64<<10)
	ts.Start()
	defer ts.Close()
	url := "ws" + strings.TrimPrefix(ts.URL, "http") + "/elemental/registration/demo-token"

	c := dialPlain(t, url, "uuid-big")
	big := `{"System Information":{"UUID":"uuid-big","Junk":"` + strings.Repeat("x", 200<<10) + `"}}`
	_ = c.ws.WriteMessage(websocket.BinaryMessage, append([]byte{0x02}, big...))
	_ = c.ws.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, b, err := c.ws.ReadMessage(); err == nil {
		t.Fatalf("server answered %q to 200 KiB over a 64 KiB cap", b)
	}

	c = dialPlain(t, url, "uuid-small")
	c.send(0x02, vector(t, "upstream-smbios.json"))
	c.expect(0x01, "")
	c.send(0x04, "")
	if typ, p := c.read(); typ != 0x07 {
		t.Fatalf("normal session: 0x%02x %s", typ, p)
	}
}

// Hardware data over the per-inventory cap fails the registration with a
// MsgError naming the sizes, and nothing is stored.
func TestHardwareCap(t *testing.T) {
	s := newServer(t, testConfig(t, "192.168.122.150-192.168.122.200"), memStore(t), func(o *Options) { o.MaxHardware = 4 << 10 })
	sess := machine("uuid-a")
	sess.SystemData = map[string]any{"Junk": strings.Repeat("x", 8<<10)}
	_, err := handler(s).Get(context.Background(), sess)
	var er *protocol.ErrorReply
	if !errors.As(err, &er) || !strings.Contains(er.Message, "more than the 4096 allowed") {
		t.Fatalf("err = %v", err)
	}
	if hw, _ := s.store.Hardware(sess.Identity.Hash); hw.SystemData != nil {
		t.Fatal("oversized hardware data stored")
	}
	if r := register(t, s, "uuid-b"); r == nil {
		t.Fatal("normal registration failed")
	}
}
