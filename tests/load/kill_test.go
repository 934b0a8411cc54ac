package load

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nodereg/nodereg/internal/testutil/labkit"
	"github.com/nodereg/nodereg/internal/testutil/node"
)

// TestKillDuringAllocations runs bin/regserver as a process, sends it a herd
// of registrations, SIGKILLs it once some have been answered, restarts it on
// the same store and checks: no address held by two machines, every
// address an agent was told is still that machine's. Three rounds, then a
// final herd re-registers everybody: each machine keeps its address.
func TestKillDuringAllocations(t *testing.T) {
	n, killAfter := 400, int64(60)
	if testing.Short() {
		n, killAfter = 100, 20
	}
	dir := t.TempDir()
	cfg := filepath.Join(dir, "regserver.yaml")
	node.Must(t, os.WriteFile(cfg, []byte(serverConfig), 0o600))
	storePath := filepath.Join(dir, "store.json")
	token := filepath.Join(dir, "admin-token")
	node.Must(t, os.WriteFile(token, []byte(adminToken), 0o600))
	// One client address plays every machine: the per-client limits are
	// off here (server/clients_test.go floods them on purpose).
	start := func() *labkit.Regserver {
		return labkit.StartRegserver(t, "--config", cfg, "--store", storePath, "--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0",
			"--admin-token-file", token, "--no-tpm", "--max-client-sessions", "0", "--new-inventories-per-minute", "0", "--max-pending-inventories", "0")
	}
	told := map[string]string{} // machine -> address it was told, over all rounds
	var acked []result
	for round := 0; round < 3; round++ {
		rs := start()
		var ok atomic.Int64
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		var killed sync.WaitGroup
		killed.Add(1)
		stop := make(chan struct{})
		go func() {
			defer killed.Done()
			for ok.Load() < killAfter {
				select {
				case <-stop:
					return
				case <-time.After(time.Millisecond):
				}
			}
			rs.Kill()
		}()
		// One attempt each: the kill cuts some off, on purpose.
		res := herdCounting(ctx, rs.URL("load-token"), round*n, n, &ok, false)
		close(stop)
		killed.Wait()
		rs.Kill()
		cancel()
		fails := 0
		for _, r := range res {
			if r.err != nil {
				fails++
				continue
			}
			acked = append(acked, r)
			told[r.id] = r.addr
		}
		t.Logf("round %d: %d registrations, %d answered before SIGKILL, %d cut off", round, n, n-fails, fails)
		if fails == 0 {
			t.Errorf("round %d: the kill came after every registration: nothing was cut off", round)
		}
		rs = start()
		checkClaims(t, adminClaims(t, rs.AdminBase(), adminToken), acked)
		rs.Kill()
	}
	// Everybody again, no kill: acknowledged machines keep their address,
	// the cut-off ones get one, still no address twice.
	rs := start()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var ok atomic.Int64
	var all []result
	// In herds of 100: the point here is stability, not load (the
	// server's 10 s session deadline is not meant for 400 at once on a
	// store of 1,200 inventories).
	for first := 0; first < 3*n; first += 100 {
		all = append(all, herdCounting(ctx, rs.URL("load-token"), first, 100, &ok, true)...)
	}
	moved := 0
	for _, r := range all {
		if r.err != nil {
			t.Errorf("after the restarts %s: %v\nserver log:\n%s", r.id, r.err, rs.Stderr.String())
			continue
		}
		if a, ok := told[r.id]; ok && a != r.addr {
			moved++
			t.Errorf("%s was told %s before the kill, now %s", r.id, a, r.addr)
		}
	}
	claims := adminClaims(t, rs.AdminBase(), adminToken)
	checkClaims(t, claims, all)
	t.Logf("final: %d machines, %d claims, %d acknowledged before kills, %d moved", len(all), len(claims), len(told), moved)
}

// herdCounting is herdOf that counts the registrations that succeeded in
// ok while they run, for the kill loop to read.
func herdCounting(ctx context.Context, url string, first, n int, ok *atomic.Int64, retried bool) []result {
	return herdOf(ctx, url, first, n, time.Minute, ok, retried)
}
