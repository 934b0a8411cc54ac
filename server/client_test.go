package server

import (
	"context"
	"errors"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/nodereg/nodereg/protocol"
)

// The protocol package's client against this server: registration, then
// the explicit ask on a second connection while the address is held back.
func TestProtocolClientWaitsForDelayedAddress(t *testing.T) {
	clk := &clock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	s := newServer(t, testConfig(t, "192.168.122.150-192.168.122.200"), memStore(t), func(o *Options) {
		o.AllocationDelay = 3 * time.Second
		o.Now = clk.Now
	})
	ts := httptest.NewServer(s)
	defer ts.Close()
	url := ts.URL + "/elemental/registration/demo-token"
	auth := protocol.Plain{AuthKind: "sys-uuid", ID: "uuid-a"}
	ctx := context.Background()
	dial := func() *protocol.ClientConn {
		t.Helper()
		cc, err := protocol.Dial(ctx, protocol.DialOptions{URL: url}, auth)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cc.Close() })
		return cc
	}
	var cfg protocol.Config
	reply, err := dial().Register(ctx, &protocol.Payloads{
		SMBIOS:      machine("uuid-a").SMBIOS,
		Annotations: map[string]string{"auth": "sys-uuid"},
	}, &cfg)
	if err != nil {
		t.Fatal(err)
	}
	if reply.Network != nil || !reply.ExplicitNetworkConfig {
		t.Fatalf("reply network %+v, announcement %v", reply.Network, reply.ExplicitNetworkConfig)
	}
	_, err = dial().ExplicitNetworkConfig(ctx)
	var er *protocol.ErrorReply
	if !errors.As(err, &er) || er.Reason != protocol.ReasonWaitingForIPAddress || er.RetryAfterSeconds != 3 {
		t.Fatalf("explicit ask during delay: %v", err)
	}
	clk.Add(3 * time.Second)
	nc, err := dial().ExplicitNetworkConfig(ctx)
	if err != nil || nc.IPAddresses["inventory-ip"] != "192.168.122.150" || nc.Configurator != "nmstate" {
		t.Fatalf("explicit ask after delay: %+v, %v", nc, err)
	}
	// Re-registration with MsgUpdate now carries the address in MsgConfig.
	reply, err = dial().Register(ctx, &protocol.Payloads{Update: true, SMBIOS: machine("uuid-a").SMBIOS}, &cfg)
	if err != nil || reply.Network == nil || reply.Network.IPAddresses["inventory-ip"] != "192.168.122.150" {
		t.Fatalf("update: %+v, %v", reply, err)
	}
}
