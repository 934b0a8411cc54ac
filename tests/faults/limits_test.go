package faults

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/gorilla/websocket"

	"github.com/nodereg/nodereg/apply"
	"github.com/nodereg/nodereg/protocol"
)

// TestBillionLaughs: a config reply of about a kilobyte whose aliases
// expand to 10^8 and more nodes is refused, wherever the alias bomb hangs:
// under the network config (raw values decoded as plain YAML), under
// cloud-config, or at top level where nothing reads it.
func TestBillionLaughs(t *testing.T) {
	for _, where := range []string{"config: {interfaces: *l%d}\n", "cloud-config: {users: *l%d}\n", "unused: *l%d\n"} {
		for _, levels := range []int{6, 9, 12} {
			doc := laughsAt(levels, where)
			var cfg protocol.Config
			_, err := protocol.DecodeConfigReply(doc, &cfg)
			if err == nil {
				// Only a document nothing decodes may be accepted:
				// yaml.v3 then never expands the aliases.
				if !strings.HasPrefix(where, "unused") {
					t.Errorf("%d levels under %q: accepted", levels, strings.Fields(where)[0])
				}
				continue
			}
			if !strings.Contains(err.Error(), "excessive aliasing") {
				t.Errorf("%d levels under %q: refused for another reason: %v", levels, strings.Fields(where)[0], err)
			}
			t.Logf("%d levels (%d bytes) under %s: %v", levels, len(doc), strings.Fields(where)[0], err)
		}
	}
}

// BenchmarkBillionLaughs: the cost of refusing one alias bomb.
func BenchmarkBillionLaughs(b *testing.B) {
	doc := laughsAt(9, "config: {interfaces: *l%d}\n")
	for i := 0; i < b.N; i++ {
		var cfg protocol.Config
		if _, err := protocol.DecodeConfigReply(doc, &cfg); err == nil {
			b.Fatal("accepted")
		}
	}
}

func laughsAt(levels int, where string) []byte {
	d := laughs(levels)
	i := bytes.LastIndex(d, []byte("config: {interfaces:"))
	return append(d[:i:i], fmt.Sprintf(where, levels-1)...)
}

// wsPair serves one websocket whose server side runs fn, and returns the
// client side wrapped as a protocol.Conn.
func wsPair(t *testing.T, fn func(*websocket.Conn)) *protocol.Conn {
	t.Helper()
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ws, err := (&websocket.Upgrader{}).Upgrade(w, r, nil)
		if err != nil {
			return
		}
		defer ws.Close()
		fn(ws)
		_, _, _ = ws.ReadMessage()
	}))
	t.Cleanup(hs.Close)
	ws, _, err := websocket.DefaultDialer.Dial("ws"+strings.TrimPrefix(hs.URL, "http"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ws.Close() })
	return protocol.NewConn(ws, 0)
}

// TestFrameLimit: a message of exactly DefaultMaxFrame bytes (type byte
// included) is read; one byte more is refused as a framing error.
func TestFrameLimit(t *testing.T) {
	c := wsPair(t, func(ws *websocket.Conn) {
		_ = ws.WriteMessage(websocket.BinaryMessage, protocol.EncodeFrame(protocol.MsgConfig, make([]byte, protocol.DefaultMaxFrame-1)))
		_ = ws.WriteMessage(websocket.BinaryMessage, protocol.EncodeFrame(protocol.MsgConfig, make([]byte, protocol.DefaultMaxFrame)))
	})
	if _, p, err := c.Read(); err != nil || len(p) != protocol.DefaultMaxFrame-1 {
		t.Fatalf("message at the limit: %d bytes, %v", len(p), err)
	}
	_, _, err := c.Read()
	if !errors.Is(err, protocol.ErrFrame) || !strings.Contains(err.Error(), "larger than the limit") {
		t.Fatalf("message over the limit: %v", err)
	}
}

// TestConversationLimit: messages each under the frame limit but together
// over DefaultMaxConversation end the conversation.
func TestConversationLimit(t *testing.T) {
	chunk := protocol.DefaultMaxFrame - 16
	n := protocol.DefaultMaxConversation/chunk + 2
	c := wsPair(t, func(ws *websocket.Conn) {
		for i := 0; i < n; i++ {
			if ws.WriteMessage(websocket.BinaryMessage, protocol.EncodeFrame(protocol.MsgReady, make([]byte, chunk-1))) != nil {
				return
			}
		}
	})
	read := 0
	var err error
	for i := 0; i < n; i++ {
		if _, err = c.Expect(protocol.MsgReady); err != nil {
			break
		}
		read += chunk
	}
	if !errors.Is(err, protocol.ErrFrame) || !strings.Contains(err.Error(), "conversation exceeds") {
		t.Fatalf("after %d bytes: %v", read, err)
	}
	if read > protocol.DefaultMaxConversation {
		t.Errorf("read %d bytes, more than the %d allowed", read, protocol.DefaultMaxConversation)
	}
	t.Logf("conversation cut after %d bytes in %d-byte messages: %v", read, chunk, err)
}

// TestInterfaceAndKeyfileCount: apply.MaxConnections is what a network
// config may reasonably hold: a node with more than a few hundred NICs,
// VLANs and bonds is not a node. Without a bound, the only bound is the
// 4 MiB frame: about 50,000 interfaces whose keyfiles, yip stages and
// nmstatectl runs all scale with it.
func TestInterfaceAndKeyfileCount(t *testing.T) {
	n := 20000
	ifaces := make([]any, n)
	for i := range ifaces {
		ifaces[i] = map[string]any{"name": fmt.Sprintf("v%d", i), "type": "dummy", "state": "up"}
	}
	nmstate := &protocol.NetworkConfig{Configurator: protocol.ConfiguratorNmstate, Config: map[string]protocol.RawValue{"interfaces": {Value: ifaces}}}
	kfs := map[string]protocol.RawValue{}
	for i := 0; i < n; i++ {
		kfs[fmt.Sprintf("v%d", i)] = protocol.RawValue{Value: fmt.Sprintf("[connection]\nid=v%d\ntype=dummy\n", i)}
	}
	nmconn := &protocol.NetworkConfig{Configurator: protocol.ConfiguratorNmconnections, Config: kfs}
	js, _ := json.Marshal(nmstate)
	t.Logf("%d interfaces: %d bytes as MsgNetworkConfig JSON (frame limit %d)", n, len(js), protocol.DefaultMaxFrame)
	var accepted []string
	for name, nc := range map[string]*protocol.NetworkConfig{"nmstate interfaces": nmstate, "nmconnections keyfiles": nmconn} {
		_, err := apply.Render(nc)
		var fe *apply.FieldError
		switch {
		case err == nil:
			accepted = append(accepted, name)
		case !errors.As(err, &fe):
			t.Errorf("%s: %d refused, but not as a field error: %v", name, n, err)
		}
	}
	if len(accepted) > 0 {
		t.Errorf("apply.Render accepted %d %v; the limit is %d", n, accepted, apply.MaxConnections)
	}
}
