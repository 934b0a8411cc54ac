package agent

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/nodereg/nodereg/internal/testutil/node"
)

// TestLegacyServerGetsSystemData: a server of upstream v1.1.1–v1.6.2
// (negotiating version 10) still gets ghw's JSON as MsgSystemData
// (docs/protocol.md §5.3), which the inventory now encodes only when such
// a server asks.
func TestLegacyServerGetsSystemData(t *testing.T) {
	var mu sync.Mutex
	var types, legacy []byte
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ws, err := (&websocket.Upgrader{}).Upgrade(w, r, nil)
		if err != nil {
			return
		}
		defer ws.Close()
		write := func(b []byte) { _ = ws.WriteMessage(websocket.BinaryMessage, b) }
		write([]byte{0x01}) // PLAIN: authenticated
		for {
			_, b, err := ws.ReadMessage()
			if err != nil || len(b) == 0 {
				return
			}
			mu.Lock()
			types = append(types, b[0])
			if b[0] == 0x06 {
				legacy = slices.Clone(b[1:])
			}
			mu.Unlock()
			switch b[0] {
			case 0x05: // MsgVersion: this server speaks 10
				write([]byte{0x05, 10})
			case 0x04: // MsgGet
				write(append([]byte{0x07}, "elemental:\n    registration:\n        auth: mac\n"...))
				return
			default:
				write([]byte{0x01})
			}
		}
	}))
	t.Cleanup(srv.Close)
	m := node.New(t, "52:54:00:aa:00:06", srv.URL+"/elemental/registration/t", "")
	if _, err := Run(t.Context(), Options{Root: m.Root, DryRun: true, Out: io.Discard, Deadline: 20 * time.Second, NetworkTimeout: 20 * time.Second}); err != nil {
		t.Fatalf("dry run against a version-10 server: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if !slices.Contains(types, 0x06) || slices.Contains(types, 0x0b) {
		t.Fatalf("message types % x: want MsgSystemData (06) and no MsgSystemDataV2 (0b)", types)
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(legacy, &top); err != nil {
		t.Fatalf("MsgSystemData %q: %v", legacy, err)
	}
	for _, k := range []string{"memory", "block", "cpu", "network", "product", "runtime"} {
		if _, ok := top[k]; !ok {
			t.Errorf("MsgSystemData lacks ghw's %q: %s", k, legacy)
		}
	}
}
