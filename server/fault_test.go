package server

import (
	"context"
	"errors"
	"net/http/httptest"
	"regexp"
	"testing"

	"github.com/nodereg/nodereg/protocol"
	"github.com/nodereg/nodereg/server/store"
)

// conflictRe is elemental-operator's conflict as a 50-machine storm against the real operator got it
// (pkg/server/server.go's wrapping around the API server's conflict).
var conflictRe = regexp.MustCompile(`^MachineInventory update failed: failed to update machine inventory fleet-default/([a-z0-9.-]+): ` +
	`Operation cannot be fulfilled on machineinventories\.elemental\.cattle\.io "([a-z0-9.-]+)": ` +
	`the object has been modified; please apply your changes to the latest version and try again$`)

// Over a real websocket: the fault's MsgError is the operator's, with no
// reason (as the operator sends it), stores nothing, and hits each machine
// once: its next attempt registers, and so do later ones.
func TestUpdateConflictFault(t *testing.T) {
	st := memStore(t)
	s := newServer(t, testConfig(t, "192.168.122.150-192.168.122.200"), st, func(o *Options) { o.UpdateConflict = 1 })
	ts := httptest.NewServer(s)
	defer ts.Close()
	url := ts.URL + "/elemental/registration/demo-token"
	registerOnce := func(uuid string) (*protocol.Reply, error) {
		cc, err := protocol.Dial(context.Background(), protocol.DialOptions{URL: url}, protocol.Plain{AuthKind: "sys-uuid", ID: uuid})
		if err != nil {
			t.Fatal(err)
		}
		defer cc.Close()
		var cfg protocol.Config
		return cc.Register(context.Background(), &protocol.Payloads{SMBIOS: machine(uuid).SMBIOS, Annotations: map[string]string{"auth": "sys-uuid"}}, &cfg)
	}
	_, err := registerOnce("uuid-a")
	var er *protocol.ErrorReply
	if !errors.As(err, &er) {
		t.Fatalf("first registration: %v, want the conflict as MsgError", err)
	}
	m := conflictRe.FindStringSubmatch(er.Message)
	if er.Reason != "" || er.RetryAfterSeconds != 0 || m == nil || m[1] != m[2] || !regexp.MustCompile(`^m-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`).MatchString(m[1]) {
		t.Fatalf("first registration refused with %+v, want the operator's conflict naming an m-UUID inventory, no reason", er)
	}
	st.View(func(s *store.State) {
		if len(s.Inventories) != 0 || len(s.Claims) != 0 {
			t.Errorf("the refused attempt stored %d inventories, %d claims", len(s.Inventories), len(s.Claims))
		}
	})
	for i := range 2 {
		if r, err := registerOnce("uuid-a"); err != nil || r.Network == nil || r.Network.IPAddresses["inventory-ip"] != "192.168.122.150" {
			t.Fatalf("attempt %d after the conflict: %+v %v, want registered with .150", i+2, r, err)
		}
	}
}

// A machine the store already knows gets the conflict naming its own
// inventory, once.
func TestUpdateConflictNamesTheInventory(t *testing.T) {
	st := memStore(t)
	register(t, newServer(t, testConfig(t, "192.168.122.150-192.168.122.200"), st, nil), "uuid-b")
	s := newServer(t, testConfig(t, "192.168.122.150-192.168.122.200"), st, func(o *Options) { o.UpdateConflict = 1 })
	_, err := handler(s).Get(context.Background(), machine("uuid-b"))
	var er *protocol.ErrorReply
	if !errors.As(err, &er) || conflictRe.FindStringSubmatch(er.Message) == nil || conflictRe.FindStringSubmatch(er.Message)[2] != "m-uuid-b" {
		t.Fatalf("update of a known machine: %v, want the conflict on m-uuid-b", err)
	}
	if r := register(t, s, "uuid-b"); ip(t, r) != "192.168.122.150" {
		t.Errorf("after the conflict: %s, want its address kept", ip(t, r))
	}
}
