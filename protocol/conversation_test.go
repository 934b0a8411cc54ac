package protocol

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// recordingHandler is a cooperative SessionHandler that records sessions.
type recordingHandler struct {
	mu       sync.Mutex
	sessions []*ServerSession
	known    map[string]bool
	network  *NetworkConfig
	netErr   error
}

func (h *recordingHandler) Update(_ context.Context, s *ServerSession) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.known[s.Identity.Hash] {
		return &ErrorReply{Message: "MachineInventory not found"}
	}
	return nil
}

func (h *recordingHandler) Get(_ context.Context, s *ServerSession) (*ConfigReply, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.sessions = append(h.sessions, s)
	if h.known == nil {
		h.known = map[string]bool{}
	}
	h.known[s.Identity.Hash] = true
	return &ConfigReply{
		Config:                Config{Elemental: Elemental{Registration: Registration{URL: "http://server/elemental/registration/t", Auth: "mac"}}},
		Network:               h.network,
		ExplicitNetworkConfig: true,
	}, nil
}

func (h *recordingHandler) NetworkConfig(context.Context, *ServerSession) (*NetworkConfig, error) {
	if h.netErr != nil {
		return nil, h.netErr
	}
	return h.network, nil
}

func startServer(t *testing.T, h SessionHandler) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = Accept(w, r, ServerOptions{Auth: []ServerAuthenticator{PlainServer{}}}, h)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// send writes one binary message; a failed write fails the test (with
// Errorf: it also runs on server goroutines), so no case passes on an
// error it did not expect.
func send(t *testing.T, ws *websocket.Conn, b []byte) bool {
	if err := ws.WriteMessage(websocket.BinaryMessage, b); err != nil {
		t.Errorf("writing % x: %v", b, err)
		return false
	}
	return true
}

// recv reads one message that must arrive.
func recv(t *testing.T, ws *websocket.Conn) ([]byte, bool) {
	_, b, err := ws.ReadMessage()
	if err != nil {
		t.Errorf("reading: %v", err)
		return nil, false
	}
	return b, true
}

func rawDial(t *testing.T, srv *httptest.Server, auth string) *websocket.Conn {
	t.Helper()
	hdr := http.Header{}
	hdr.Set("Authorization", auth)
	ws, _, err := websocket.DefaultDialer.Dial("ws"+strings.TrimPrefix(srv.URL, "http")+"/elemental/registration/t", hdr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ws.Close() })
	ws.SetReadDeadline(time.Now().Add(5 * time.Second))
	mt, b, err := ws.ReadMessage()
	if err != nil || mt != websocket.BinaryMessage || string(b) != "\x01" {
		t.Fatalf("after auth: %v %q %v, want MsgReady", mt, b, err)
	}
	return ws
}

// Server answers to MsgVersion: docs/protocol.md §10.
func TestServerVersionNegotiation(t *testing.T) {
	srv := startServer(t, &recordingHandler{})
	cases := []struct {
		send  []byte
		reply string // "" = connection closed without reply
	}{
		{[]byte{0x05, 0x0C}, "\x05\x0c"},
		{[]byte{0x05, 0x0B}, "\x05\x0b"},
		{[]byte{0x05, 0xFF}, "\x05\x0c"},
		{[]byte{0x05, 0x04}, ""},
		{[]byte{0x05, 0x0C, 0x0C}, ""},
	}
	for _, c := range cases {
		ws := rawDial(t, srv, "Bearer PLAIN52:54:00:12:34:56")
		if err := ws.WriteMessage(websocket.BinaryMessage, c.send); err != nil {
			t.Fatal(err)
		}
		_, b, err := ws.ReadMessage()
		if c.reply == "" {
			if err == nil {
				t.Errorf("send % x: got reply % x, want close", c.send, b)
			}
			continue
		}
		if err != nil || string(b) != c.reply {
			t.Errorf("send % x: got % x %v, want % x", c.send, b, err, c.reply)
		}
	}
}

func TestServerClosesOnBadAuth(t *testing.T) {
	srv := startServer(t, &recordingHandler{})
	for _, auth := range []string{"Bearer PLAIN", "Basic foo", ""} {
		hdr := http.Header{}
		if auth != "" {
			hdr.Set("Authorization", auth)
		}
		ws, _, err := websocket.DefaultDialer.Dial("ws"+strings.TrimPrefix(srv.URL, "http")+"/x/registration/t", hdr)
		if err != nil {
			t.Fatal(err)
		}
		ws.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, b, err := ws.ReadMessage(); err == nil {
			t.Errorf("auth %q: got % x, want the connection closed", auth, b)
		}
		ws.Close()
	}
}

func TestServerRejectsClientNetworkConfigBelow12(t *testing.T) {
	srv := startServer(t, &recordingHandler{network: &NetworkConfig{Configurator: "nmstate"}})
	ws := rawDial(t, srv, "Bearer PLAIN52:54:00:12:34:56")
	send(t, ws, []byte{0x05, 0x0B})
	if b, ok := recv(t, ws); !ok || string(b) != "\x05\x0b" {
		t.Fatalf("version 11 not agreed: % x", b)
	}
	if !send(t, ws, []byte{0x0C}) {
		return
	}
	if _, b, err := ws.ReadMessage(); err == nil {
		t.Errorf("0x0C at version 11 answered with % x", b)
	}
}

func TestClientServerRegistration(t *testing.T) {
	nc := &NetworkConfig{Configurator: ConfiguratorNmstate, IPAddresses: map[string]string{"ip": "192.168.122.150"},
		Config: map[string]RawValue{"interfaces": {Value: []any{map[string]any{"name": "enp1s0"}}}}}
	h := &recordingHandler{network: nc}
	srv := startServer(t, h)
	ctx := t.Context()
	auth := Plain{AuthKind: "mac", ID: "52:54:00:12:34:56"}
	dial := DialOptions{URL: srv.URL + "/elemental/registration/t"}
	cc, err := Dial(ctx, dial, auth)
	if err != nil {
		t.Fatal(err)
	}
	if cc.Version != 12 {
		t.Errorf("negotiated %d", cc.Version)
	}
	if ip := cc.RegistrationIP(); ip != "127.0.0.1" {
		t.Errorf("registration ip %q", ip)
	}
	var cfg Config
	r, err := cc.Register(ctx, &Payloads{
		SMBIOS:       map[string]any{"System Information": map[string]any{"UUID": "u"}},
		SystemDataV2: map[string]any{"Runtime": map[string]any{"Hostname": "n1"}},
		Annotations:  map[string]string{"auth": "mac"},
		Labels:       map[string]string{"rack": "r1"},
	}, &cfg)
	cc.Close()
	if err != nil {
		t.Fatal(err)
	}
	if r.Network == nil || r.Network.IPAddresses["ip"] != "192.168.122.150" || !r.ExplicitNetworkConfig {
		t.Errorf("reply %+v", r)
	}
	s := h.sessions[0]
	if s.SMBIOS["System Information"].(map[string]any)["UUID"] != "u" || s.SystemData["Runtime"] == nil ||
		s.Annotations["auth"] != "mac" || s.Labels["rack"] != "r1" || s.Updated {
		t.Errorf("server saw %+v", s)
	}
	// Update of a known machine, then the explicit exchange on a second
	// connection.
	cc, err = Dial(ctx, dial, auth)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cc.Register(ctx, &Payloads{Update: true, NoSMBIOS: true}, &cfg); err != nil {
		t.Fatal(err)
	}
	cc.Close()
	if !h.sessions[1].Updated || h.sessions[1].SMBIOS != nil {
		t.Errorf("update session %+v", h.sessions[1])
	}
	cc, err = Dial(ctx, dial, auth)
	if err != nil {
		t.Fatal(err)
	}
	got, err := cc.ExplicitNetworkConfig(ctx)
	cc.Close()
	if err != nil || got.IPAddresses["ip"] != "192.168.122.150" || got.Config["interfaces"].Value == nil {
		t.Errorf("explicit network config %+v %v", got, err)
	}
	h.netErr = &ErrorReply{Message: "waiting for pool-a", Reason: ReasonWaitingForIPAddress, RetryAfterSeconds: 2}
	if cc, err = Dial(ctx, dial, auth); err != nil {
		t.Fatal(err)
	}
	_, err = cc.ExplicitNetworkConfig(ctx)
	cc.Close()
	var er *ErrorReply
	if !errors.As(err, &er) || er.Reason != ReasonWaitingForIPAddress || er.RetryAfterSeconds != 2 {
		t.Errorf("pending network config: %v", err)
	}
	var se *StepError
	if !errors.As(err, &se) || se.Step != StepNetworkConfig {
		t.Errorf("error does not name the step: %v", err)
	}
}

func TestClientUpdateUnknownInventory(t *testing.T) {
	srv := startServer(t, &recordingHandler{})
	cc, err := Dial(t.Context(), DialOptions{URL: srv.URL + "/elemental/registration/t"}, Plain{AuthKind: "mac", ID: "aa"})
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	var cfg Config
	_, err = cc.Register(t.Context(), &Payloads{Update: true}, &cfg)
	var er *ErrorReply
	if !errors.As(err, &er) || er.Message != "MachineInventory not found" {
		t.Errorf("got %v", err)
	}
}

// scripted runs fn as the server side of one connection after MsgReady, so a
// test can play an older elemental-operator.
func scripted(t *testing.T, fn func(ws *websocket.Conn)) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ws, err := (&websocket.Upgrader{}).Upgrade(w, r, nil)
		if err != nil {
			return
		}
		defer ws.Close()
		if send(t, ws, []byte{0x01}) {
			fn(ws)
		}
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/elemental/registration/t"
}

// An older server (v1.3.0–v1.6.2, version 10) gets legacy system data and
// no MsgSystemDataV2; the client adapts to whatever version it is given.
func TestClientAdaptsToOlderServer(t *testing.T) {
	var mu sync.Mutex
	var seen []byte
	url := scripted(t, func(ws *websocket.Conn) {
		for {
			b, ok := recv(t, ws)
			if !ok {
				return
			}
			mu.Lock()
			seen = append(seen, b[0])
			mu.Unlock()
			switch MsgType(b[0]) {
			case MsgVersion:
				send(t, ws, []byte{0x05, 10})
			case MsgGet:
				send(t, ws, append([]byte{0x07}, "elemental:\n    registration:\n        auth: mac\n"...))
				return
			default:
				send(t, ws, []byte{0x01})
			}
		}
	})
	cc, err := Dial(t.Context(), DialOptions{URL: url}, Plain{AuthKind: "mac", ID: "aa"})
	if err != nil {
		t.Fatal(err)
	}
	var cfg Config
	r, err := cc.Register(t.Context(), &Payloads{
		SMBIOS: map[string]any{}, SystemDataV2: map[string]any{}, LegacySystemData: []byte(`{"memory":{}}`),
		Annotations: map[string]string{"a": "b"},
	}, &cfg)
	if err != nil {
		t.Fatal(err)
	}
	want := []byte{0x05, 0x02, 0x06, 0x09, 0x04}
	mu.Lock()
	defer mu.Unlock()
	if string(seen) != string(want) {
		t.Errorf("message types % x, want % x", seen, want)
	}
	if r.Network != nil || cfg.Elemental.Registration.Auth != "mac" {
		t.Errorf("reply %+v cfg %+v", r, cfg)
	}
	// Version 9 cannot update.
	url = scripted(t, func(ws *websocket.Conn) {
		if _, ok := recv(t, ws); ok && send(t, ws, []byte{0x05, 9}) {
			// The client gives up on its own at version 9: it closes.
			_, _, _ = ws.ReadMessage()
		}
	})
	cc, err = Dial(t.Context(), DialOptions{URL: url}, Plain{AuthKind: "mac", ID: "aa"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cc.Register(t.Context(), &Payloads{Update: true}, &cfg); !errors.Is(err, ErrUpdateUnsupported) {
		t.Errorf("update at version 9: %v", err)
	}
}

func TestClientRefusesOversizedFrame(t *testing.T) {
	url := scripted(t, func(ws *websocket.Conn) {
		if _, ok := recv(t, ws); ok && send(t, ws, append([]byte{0x05}, make([]byte, 2048)...)) {
			// Held open until the client drops the connection.
			_, _, _ = ws.ReadMessage()
		}
	})
	_, err := Dial(t.Context(), DialOptions{URL: url, MaxFrame: 1024}, Plain{AuthKind: "mac", ID: "aa"})
	if !errors.Is(err, ErrFrame) {
		t.Errorf("oversized frame: %v", err)
	}
	var se *StepError
	if !errors.As(err, &se) || se.Step != StepVersion {
		t.Errorf("error does not name the version step: %v", err)
	}
}

func TestWebSocketURL(t *testing.T) {
	for in, want := range map[string]string{
		"https://rancher.example.com/elemental/registration/abc": "wss://rancher.example.com/elemental/registration/abc",
		"http://127.0.0.1:8080/elemental/registration/abc":       "ws://127.0.0.1:8080/elemental/registration/abc",
	} {
		if got, err := WebSocketURL(in); err != nil || got != want {
			t.Errorf("%s -> %s %v", in, got, err)
		}
	}
	if _, err := WebSocketURL("ftp://x/http"); err == nil {
		t.Error("non-http scheme accepted")
	}
}

func TestRegistrationIP(t *testing.T) {
	for in, want := range map[string]string{
		"127.0.0.1:41234":    "127.0.0.1",
		"[2001:db8::5]:8443": "[2001:db8::5]",
		"nonsense":           "",
	} {
		if got := registrationIP(in); got != want {
			t.Errorf("registrationIP(%q) = %q, want %q", in, got, want)
		}
	}
}
