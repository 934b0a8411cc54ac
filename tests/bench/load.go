package main

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nodereg/nodereg/agent"
	"github.com/nodereg/nodereg/agent/inventory"
	"github.com/nodereg/nodereg/internal/host"
	"github.com/nodereg/nodereg/protocol"
)

// loadResult is one burst of PLAIN registrations at a fixed concurrency.
type loadResult struct {
	perSecond float64
	retried   int64 // registrations that needed more than one attempt
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
		SMBIOS:       inv.SMBIOS,
		SystemDataV2: inv.SystemDataV2,
		Annotations:  map[string]string{"elemental.cattle.io/auth": "mac"},
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
// machines across bursts so each registration is a new machine. A session
// the server refuses (HTTP 503 when no slot frees within its wait, which a
// loaded machine reaches at 1,000 clients) is retried as the agent
// retries, and counted: the latency then includes the wait.
func registerLoad(url string, p *protocol.Payloads, conc, total int, ids *atomic.Int64) (loadResult, error) {
	lat := make([]time.Duration, total)
	var next atomic.Int64
	var wg sync.WaitGroup
	var errOnce sync.Once
	var firstErr error
	var retried atomic.Int64
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
				mac := macOf(id)
				t0 := time.Now()
				attempts := 0
				err := agent.RetryPolicy(time.Minute, nil).Do(context.Background(), "registration", func(context.Context, int) error {
					attempts++
					return agent.ClassifyRegister(registerOnce(url, stormAddr(i, false), machinePayloads(p, id), mac))
				})
				lat[i] = time.Since(t0)
				if attempts > 1 {
					retried.Add(1)
				}
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
	return loadResult{perSecond: float64(total) / elapsed.Seconds(), p99: percentile(lat, 99), retried: retried.Load()}, nil
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

// registerOnce is one registration from src: each load client is a
// machine of its own, with its own loopback address, so the burst measures
// the server rather than its per-client limits.
func registerOnce(url string, src netip.Addr, p *protocol.Payloads, mac string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return registerWith(ctx, protocol.DialOptions{URL: url, LocalAddr: &net.TCPAddr{IP: src.AsSlice()}}, p, mac)
}

// registerWith is the agent's conversation: dial, authenticate, register,
// and a network config with addresses in the reply.
func registerWith(ctx context.Context, o protocol.DialOptions, p *protocol.Payloads, mac string) error {
	cc, err := protocol.Dial(ctx, o, protocol.Plain{AuthKind: "mac", ID: mac})
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

// loadRows starts a regserver with an empty store for every burst, so each
// level measures new machines on an empty store, not the store of earlier
// bursts. The peak RSS is the server's VmHWM over the 1,000-client bursts.
func (b *bencher) loadRows() []row {
	p, err := loadPayloads()
	if err != nil {
		return []row{{name: "regserver load", budget: noBudget(), err: err}}
	}
	var ids atomic.Int64
	var rows []row
	burst := 0
	var peakRSS float64
	var rssErr error
	for _, level := range b.o.loadLevels {
		lv := struct{ conc, total int }{level[0], level[1]}
		var rates []float64
		var p99s []time.Duration
		var err error
		var storeSize, retried int64
		for range b.o.loadRepeat {
			burst++
			dir := filepath.Join(b.work, fmt.Sprintf("regserver-load-%d", burst))
			var rs *regserver
			if rs, err = startRegserver(b.bins["regserver"], dir); err != nil {
				break
			}
			var r loadResult
			r, err = registerLoad(rs.url(), p, lv.conc, lv.total, &ids)
			if lv.conc == 1000 {
				if hwm, herr := rs.peakRSS(); herr == nil {
					peakRSS = max(peakRSS, hwm)
				} else {
					rssErr = herr
				}
			}
			rs.stop()
			if err != nil {
				break
			}
			if fi, err := os.Stat(filepath.Join(dir, storeName)); err == nil {
				storeSize = fi.Size()
			}
			rates = append(rates, r.perSecond)
			p99s = append(p99s, r.p99)
			retried += r.retried
		}
		note := fmt.Sprintf("%d new machines per burst on an empty store (%s at the end), median of %d bursts", lv.total, format(unitBytes, float64(storeSize)), b.o.loadRepeat)
		if retried > 0 {
			note += fmt.Sprintf("; %d registrations refused once or more and retried as the agent does", retried)
		}
		rows = append(rows,
			row{name: fmt.Sprintf("regserver: registrations/s, %d PLAIN clients", lv.conc), unit: unitRate, value: medianFloat(rates), budget: noBudget(), note: note, err: err},
			row{name: fmt.Sprintf("regserver: p99 latency, %d PLAIN clients", lv.conc), unit: unitDuration, value: float64(median(p99s)), budget: noBudget(), note: "dial + conversation + close (and the waits of a retried one)", err: err})
		if lv.conc == 1000 {
			if err != nil && rssErr == nil {
				rssErr = err
			}
			rows = append(rows, row{name: "regserver: peak RSS, 1000 PLAIN clients", unit: unitBytes, value: peakRSS, budget: budgetServerRSS,
				note: "VmHWM of the server process, max over the bursts (issue 13's goal)", err: rssErr})
		}
	}
	return rows
}
