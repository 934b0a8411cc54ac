package main

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nodereg/nodereg/agent/inventory"
	"github.com/nodereg/nodereg/internal/host"
	"github.com/nodereg/nodereg/protocol"
)

// loadResult is one burst of PLAIN registrations at a fixed concurrency.
type loadResult struct {
	perSecond float64
	p99       time.Duration
}

// payloads are what every simulated client sends: this machine's real
// inventory, so the server parses payloads of a realistic size.
func loadPayloads() (*protocol.Payloads, error) {
	inv, err := inventory.Collect(context.Background(), inventory.Options{Files: host.Root("/")})
	if err != nil {
		return nil, fmt.Errorf("load: inventory for the payloads: %w", err)
	}
	p := &protocol.Payloads{
		SMBIOS:           inv.SMBIOS,
		SystemDataV2:     inv.SystemDataV2,
		LegacySystemData: inv.LegacySystemData,
		Annotations:      map[string]string{"elemental.cattle.io/auth": "mac"},
	}
	if p.SMBIOS == nil {
		p.SMBIOS = map[string]any{}
	}
	if p.SystemDataV2 == nil {
		p.SystemDataV2 = map[string]any{}
	}
	return p, nil
}

// registerLoad runs total registrations of new machines from conc clients
// at once; each latency is dial, conversation and close. ids numbers the
// machines across bursts so each registration is a new machine.
func registerLoad(url string, p *protocol.Payloads, conc, total int, ids *atomic.Int64) (loadResult, error) {
	lat := make([]time.Duration, total)
	var next atomic.Int64
	var wg sync.WaitGroup
	var errOnce sync.Once
	var firstErr error
	start := time.Now()
	for range conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= total {
					return
				}
				id := ids.Add(1)
				mac := fmt.Sprintf("02:00:%02x:%02x:%02x:%02x", (id>>24)&0xff, (id>>16)&0xff, (id>>8)&0xff, id&0xff)
				t0 := time.Now()
				err := registerOnce(url, machinePayloads(p, id), mac)
				lat[i] = time.Since(t0)
				if err != nil {
					errOnce.Do(func() { firstErr = fmt.Errorf("load: %d clients: registration of %s: %w", conc, mac, err) })
					next.Store(int64(total))
					return
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	if firstErr != nil {
		return loadResult{}, firstErr
	}
	return loadResult{perSecond: float64(total) / elapsed.Seconds(), p99: percentile(lat, 99)}, nil
}

// machinePayloads gives machine id its own SMBIOS UUID: the server names
// inventories after it, and this host may have no SMBIOS at all.
func machinePayloads(base *protocol.Payloads, id int64) *protocol.Payloads {
	p := *base
	p.SMBIOS = make(map[string]any, len(base.SMBIOS)+1)
	for k, v := range base.SMBIOS {
		p.SMBIOS[k] = v
	}
	sys := map[string]any{"Manufacturer": "nodereg-bench", "Product Name": "load"}
	if old, ok := base.SMBIOS["System Information"].(map[string]any); ok {
		for k, v := range old {
			sys[k] = v
		}
	}
	sys["UUID"] = fmt.Sprintf("00000000-0000-4000-8000-%012x", id)
	p.SMBIOS["System Information"] = sys
	return &p
}

func registerOnce(url string, p *protocol.Payloads, mac string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cc, err := protocol.Dial(ctx, protocol.DialOptions{URL: url}, protocol.Plain{AuthKind: "mac", ID: mac})
	if err != nil {
		return err
	}
	defer cc.Close()
	var cfg protocol.Config
	reply, err := cc.Register(ctx, p, &cfg)
	if err != nil {
		return err
	}
	if !reply.Network.IsReal() || len(reply.Network.IPAddresses) == 0 {
		return fmt.Errorf("reply without a network config carrying addresses")
	}
	return nil
}
