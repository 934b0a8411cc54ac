package main

import (
	"context"
	"fmt"
	"net/http/httptest"
	"path/filepath"
	"time"

	"github.com/nodereg/nodereg/protocol"
	"github.com/nodereg/nodereg/server"
	"github.com/nodereg/nodereg/server/regconfig"
	"github.com/nodereg/nodereg/server/store"
)

// The pending-claims case of issue 22: registration cost must not grow
// with the claims waiting for an address. A /20 pool is filled, and then
// 0 or 5,000 more machines wait for it; we time re-registrations of
// machines holding addresses and registrations of new machines (which join
// the queue), over real websockets on loopback, store on disk.
const (
	pendingPool    = "10.216.0.0/20" // pool data only, never configured anywhere
	pendingWaiting = 5000
	pendingRounds  = 300 // the full run's; -short times fewer
)

const pendingConfig = `
registrations:
- name: pending
  token: pending-token
  config:
    elemental:
      registration: {auth: mac}
  network:
    configurator: nmstate
    ipAddresses: {ip: pool-a}
    config:
      interfaces:
      - {name: eth0, ipv4: {enabled: true, address: [{ip: "{ip}", prefix-length: 20}]}}
pools:
- name: pool-a
  addresses: [` + pendingPool + `]
  prefix: 20
  gateway: 10.216.0.1
`

func pendingMAC(i int) string {
	return fmt.Sprintf("02:22:%02x:%02x:%02x:%02x", (i>>24)&0xff, (i>>16)&0xff, (i>>8)&0xff, i&0xff)
}

// seedPending writes inventories straight into a new store: held machines
// with addresses in the pool, then waiting ones with claims but none.
func seedPending(path string, held, waiting int) error {
	st, err := store.Open(path)
	if err != nil {
		return err
	}
	defer st.Close()
	now := time.Now()
	return st.Update(func(s *store.State) (bool, error) {
		base := [4]byte{10, 216, 0, 2} // .0 is the network, .1 the gateway
		for i := range held + waiting {
			h := protocol.PlainHash(pendingMAC(i))
			name := fmt.Sprintf("m-%06d", i)
			s.PutInventory(&store.Inventory{Name: name, Hash: h, Registration: "pending", CreatedAt: now, UpdatedAt: now})
			c := &store.Claim{Name: name + "-ip", Inventory: h, IPName: "ip", Pool: "pool-a", CreatedAt: now, NotBefore: now}
			if i < held {
				n := int(base[3]) + i
				c.Address, c.Prefix = fmt.Sprintf("10.216.%d.%d", n/256, n%256), 20
			}
			s.AddClaim(c)
		}
		return true, nil
	})
}

// pendingRun times registrations against a server over a seeded store.
func pendingRun(rounds int, dir string, waiting int) (reReg, newReg []time.Duration, err error) {
	cfg, err := regconfig.Parse([]byte(pendingConfig))
	if err != nil {
		return nil, nil, err
	}
	held := int(cfg.Pools["pool-a"].Total())
	path := filepath.Join(dir, fmt.Sprintf("pending-%d.db", waiting))
	if err := seedPending(path, held, waiting); err != nil {
		return nil, nil, fmt.Errorf("seeding: %w", err)
	}
	st, err := store.Open(path)
	if err != nil {
		return nil, nil, err
	}
	defer st.Close()
	srv, err := server.New(server.Options{Config: cfg, Store: st, MaxClientSessions: -1, NewInventoriesPerMinute: -1, MaxPendingInventories: -1})
	if err != nil {
		return nil, nil, err
	}
	var pending int
	st.View(func(s *store.State) { pending = s.PendingInventories() })
	if pending != waiting {
		return nil, nil, fmt.Errorf("%d inventories wait for an address after the start, want %d", pending, waiting)
	}
	hs := httptest.NewServer(srv)
	defer hs.Close()
	url := hs.URL + "/elemental/registration/pending-token"
	for i := range rounds {
		d, err := timeRegistration(url, pendingMAC(i*held/rounds), true)
		if err != nil {
			return nil, nil, fmt.Errorf("re-registration %d: %w", i, err)
		}
		reReg = append(reReg, d)
		d, err = timeRegistration(url, pendingMAC(held+waiting+i), false)
		if err != nil {
			return nil, nil, fmt.Errorf("new machine %d: %w", i, err)
		}
		newReg = append(newReg, d)
	}
	return reReg, newReg, nil
}

// timeRegistration is one PLAIN registration as nodereg's agent makes it
// (it asks for the network config apart, so a waiting machine gets its
// MsgConfig at once); addressed says whether the reply must carry an
// address.
func timeRegistration(url, mac string, addressed bool) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	t0 := time.Now()
	cc, err := protocol.Dial(ctx, protocol.DialOptions{URL: url}, protocol.Plain{AuthKind: "mac", ID: mac})
	if err != nil {
		return 0, err
	}
	defer cc.Close()
	var cfg protocol.Config
	reply, err := cc.Register(ctx, &protocol.Payloads{SMBIOS: map[string]any{}, Annotations: map[string]string{"auth": "mac"}}, &cfg)
	d := time.Since(t0)
	if err != nil {
		return d, err
	}
	if got := reply.Network.IsReal() && len(reply.Network.IPAddresses) > 0; got != addressed {
		return d, fmt.Errorf("reply with address %v, want %v", got, addressed)
	}
	return d, nil
}

func (b *bencher) pendingRows() []row {
	var rows []row
	for _, waiting := range []int{0, pendingWaiting} {
		re, nw, err := pendingRun(b.o.pendingRounds, b.work, waiting)
		note := fmt.Sprintf("/20 pool full, %d claims waiting; %d sequential registrations over loopback, store on disk", waiting, b.o.pendingRounds)
		for _, r := range []struct {
			what string
			ds   []time.Duration
		}{{"re-registration (holds an address)", re}, {"new machine (joins the queue)", nw}} {
			rows = append(rows,
				row{name: fmt.Sprintf("regserver: %s p50, %d pending", r.what, waiting), unit: unitDuration, value: float64(percentile(r.ds, 50)), budget: noBudget(), note: note, err: err},
				row{name: fmt.Sprintf("regserver: %s p99, %d pending", r.what, waiting), unit: unitDuration, value: float64(percentile(r.ds, 99)), budget: noBudget(), note: note, err: err})
		}
	}
	return rows
}
