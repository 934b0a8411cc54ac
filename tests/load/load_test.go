// Package load puts the reference server under many registrations at once
// and kills it in the middle of its address allocations.
package load

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sort"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/nodereg/nodereg/agent"
	"github.com/nodereg/nodereg/internal/errclass"
	"github.com/nodereg/nodereg/internal/testutil/node"
	"github.com/nodereg/nodereg/internal/testutil/testbin"
	"github.com/nodereg/nodereg/protocol"
	"github.com/nodereg/nodereg/server"
	"github.com/nodereg/nodereg/server/regconfig"
	"github.com/nodereg/nodereg/server/store"
)

func TestMain(m *testing.M) {
	raiseFDLimit()
	testbin.Main(m)
}

// raiseFDLimit lifts the soft limit to the hard one: 1,000 clients and
// their server ends need 2,000 descriptors in one process.
func raiseFDLimit() {
	var l syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l) == nil && l.Cur < l.Max {
		l.Cur = l.Max
		_ = syscall.Setrlimit(syscall.RLIMIT_NOFILE, &l)
	}
}

// Pool data only: these addresses are never configured anywhere.
var serverConfig = node.ServerConfig{
	Name: "load", MachineName: "-", Network: node.AddressOnlyTemplate(16),
	Pool: "10.213.0.10-10.213.15.250", Prefix: 16, Gateway: "10.213.0.1",
}.YAML()

func startServer(tb testing.TB, storePath string) *httptest.Server {
	tb.Helper()
	cfg, err := regconfig.Parse([]byte(serverConfig))
	node.Must(tb, err)
	st, err := store.Open(storePath)
	node.Must(tb, err)
	// One client address plays every machine here: the per-client limits
	// are off (server/clients_test.go floods them on purpose).
	srv, err := server.New(server.Options{Config: cfg, Store: st, SessionDeadline: time.Minute,
		MaxClientSessions: -1, NewInventoriesPerMinute: -1, MaxPendingInventories: -1})
	node.Must(tb, err)
	// The admin API beside the registrations, for the checks only.
	mux := http.NewServeMux()
	mux.Handle("/admin/", srv.Admin(server.AdminOptions{Insecure: true}))
	mux.Handle("/", srv)
	hs := httptest.NewServer(mux)
	tb.Cleanup(func() { hs.Close(); st.Close() })
	return hs
}

func mac(i int) string {
	return fmt.Sprintf("52:54:%02x:%02x:%02x:%02x", (i>>24)&0xff, (i>>16)&0xff, (i>>8)&0xff, i&0xff)
}

// register is one agent's conversation: dial, PLAIN auth, version, the
// payloads, MsgGet; it returns the address the config carries.
func register(ctx context.Context, url, id string, deadline time.Duration) (string, error) {
	cc, err := protocol.Dial(ctx, protocol.DialOptions{URL: url, SessionDeadline: deadline, HandshakeTimeout: deadline}, protocol.Plain{AuthKind: "mac", ID: id})
	if err != nil {
		return "", err
	}
	defer cc.Close()
	var cfg protocol.Config
	reply, err := cc.Register(ctx, &protocol.Payloads{
		SMBIOS:       map[string]any{"System Information": map[string]any{"UUID": id}},
		SystemDataV2: map[string]any{},
		Annotations:  map[string]string{"auth": "mac"},
	}, &cfg)
	if err != nil {
		return "", err
	}
	if reply.Network == nil || reply.Network.IPAddresses["inventory-ip"] == "" {
		// The server's answer, not its load: not worth another attempt.
		return "", errclass.Wrap(errclass.Final, "", fmt.Errorf("config of %s carries no address: %+v", id, reply.Network))
	}
	return reply.Network.IPAddresses["inventory-ip"], nil
}

type result struct {
	id       string
	addr     string
	err      error
	latency  time.Duration
	attempts int
}

// asTheAgent runs one client's registration as the agent runs it: a
// refused or failed attempt (HTTP 503 when every session slot stays busy
// past its wait, a timeout on a machine busier than the server was sized
// for) is retried under the agent's own policy and classification,
// backoff with jitter, until ctx ends: the bound on a hang, not a measure
// of speed. A failure the agent would not retry ends at once.
func asTheAgent(ctx context.Context, attempt func(ctx context.Context) error) (attempts int, err error) {
	err = agent.RetryPolicy(0, nil).Do(ctx, "registration", func(ctx context.Context, n int) error {
		attempts = n
		return agent.ClassifyRegister(attempt(ctx))
	})
	return attempts, err
}

// registerRetried is register, retried as the agent does.
func registerRetried(ctx context.Context, url, id string, deadline time.Duration) (addr string, attempts int, err error) {
	attempts, err = asTheAgent(ctx, func(ctx context.Context) error {
		var err error
		addr, err = register(ctx, url, id, deadline)
		return err
	})
	return addr, attempts, err
}

// herd registers n machines at once (all dial together), each retrying
// as the agent does, and returns each one's outcome.
func herd(ctx context.Context, url string, first, n int, deadline time.Duration) []result {
	return herdOf(ctx, url, first, n, deadline, nil, true)
}

// herdOf is herd, adding each success to ok while the herd runs (nil: no
// count); retried false makes one attempt each (a herd the test cuts off
// on purpose).
func herdOf(ctx context.Context, url string, first, n int, deadline time.Duration, ok *atomic.Int64, retried bool) []result {
	out := make([]result, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			id := mac(first + i)
			<-start
			t0 := time.Now()
			addr, attempts, err := "", 1, error(nil)
			if retried {
				addr, attempts, err = registerRetried(ctx, url, id, deadline)
			} else {
				addr, err = register(ctx, url, id, deadline)
			}
			out[i] = result{id: id, addr: addr, err: err, latency: time.Since(t0), attempts: attempts}
			if err == nil && ok != nil {
				ok.Add(1)
			}
		}()
	}
	close(start)
	wg.Wait()
	return out
}

// Test1000Agents: 1,000 agents register at the same moment against one
// file-backed reference server: no error, 1,000 distinct addresses, and
// the store agrees with what every agent was told.
func Test1000Agents(t *testing.T) {
	n := 1000
	if testing.Short() {
		n = 200
	}
	storePath := filepath.Join(t.TempDir(), "store.json")
	hs := startServer(t, storePath)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	res := herd(ctx, hs.URL+"/elemental/registration/load-token", 0, n, 2*time.Minute)
	byAddr := map[string]string{}
	errs, retried := 0, 0
	for _, r := range res {
		retried += r.attempts - 1
		if r.err != nil {
			errs++
			if errs <= 5 {
				t.Errorf("%s: %v", r.id, r.err)
			}
			continue
		}
		if other, dup := byAddr[r.addr]; dup {
			t.Errorf("address %s given to %s and %s", r.addr, other, r.id)
		}
		byAddr[r.addr] = r.id
	}
	t.Logf("%d agents: %d errors, %d distinct addresses, %d retried attempts", n, errs, len(byAddr), retried)
	if errs != 0 || len(byAddr) != n {
		t.Fatalf("want 0 errors and %d distinct addresses, got %d errors and %d", n, errs, len(byAddr))
	}
	claims := adminClaims(t, hs.URL, "")
	checkClaims(t, claims, res)
	if len(claims) != n {
		t.Errorf("store holds %d claims for %d machines", len(claims), n)
	}
}

// adminToken is the admin API's token in the tests that start regserver.
const adminToken = "load-test-admin-token-0123456789"

// adminClaims reads every claim from the admin API; token "" for the
// in-process server, which serves the admin API without one.
func adminClaims(tb testing.TB, base, token string) []store.Claim {
	tb.Helper()
	req, err := http.NewRequest(http.MethodGet, base+"/admin/claims", nil)
	node.Must(tb, err)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	node.Must(tb, err)
	if resp.StatusCode != http.StatusOK {
		tb.Fatalf("GET /admin/claims: %s", resp.Status)
	}
	defer resp.Body.Close()
	var out []store.Claim
	node.Must(tb, json.NewDecoder(resp.Body).Decode(&out))
	return out
}

// checkClaims: no address held twice, and every address an agent got
// (the server acknowledged the claim) is held by that machine's claim.
func checkClaims(tb testing.TB, claims []store.Claim, acked []result) {
	tb.Helper()
	holder := map[string]string{}
	byMachine := map[string]string{}
	for _, c := range claims {
		if c.Address == "" {
			continue
		}
		if h, dup := holder[c.Address]; dup {
			tb.Errorf("address %s held by two claims: %s and %s", c.Address, h, c.Name)
		}
		holder[c.Address] = c.Name
		byMachine[c.Inventory] = c.Address
	}
	lost := 0
	for _, r := range acked {
		if r.err != nil {
			continue
		}
		if got := byMachine[protocol.PlainHash(r.id)]; got != r.addr {
			lost++
			if lost <= 5 {
				tb.Errorf("%s was told %s, the store says %q", r.id, r.addr, got)
			}
		}
	}
	if lost > 0 {
		tb.Errorf("%d acknowledged claims lost", lost)
	}
}

// BenchmarkRegister1000 registers 1,000 agents at once per iteration on a
// fresh server and reports the latency percentiles of one registration.
func BenchmarkRegister1000(b *testing.B) {
	var all []time.Duration
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		hs := startServer(b, filepath.Join(b.TempDir(), "store.json"))
		b.StartTimer()
		res := herd(context.Background(), hs.URL+"/elemental/registration/load-token", 0, 1000, 2*time.Minute)
		for _, r := range res {
			if r.err != nil {
				b.Fatalf("%s: %v", r.id, r.err)
			}
			all = append(all, r.latency)
		}
		b.StopTimer()
		hs.Close()
		b.StartTimer()
	}
	sort.Slice(all, func(i, j int) bool { return all[i] < all[j] })
	p := func(q float64) time.Duration { return all[int(q*float64(len(all)-1))] }
	b.ReportMetric(float64(p(0.50).Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(p(0.99).Microseconds())/1000, "p99-ms")
	b.ReportMetric(float64(p(1).Microseconds())/1000, "max-ms")
	b.Logf("1000 concurrent registrations x %d: p50 %v p99 %v max %v", b.N, p(0.50), p(0.99), p(1))
}
