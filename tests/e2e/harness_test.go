// Package e2e runs the agent against the reference server over real
// websockets on loopback: each "machine" is a scratch root with its own
// fake /sys identity, config and state.
package e2e

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nodereg/nodereg/agent"
	"github.com/nodereg/nodereg/internal/testutil"
	"github.com/nodereg/nodereg/internal/testutil/node"
	"github.com/nodereg/nodereg/internal/testutil/testbin"
	"github.com/nodereg/nodereg/protocol"
	"github.com/nodereg/nodereg/server"
	"github.com/nodereg/nodereg/server/regconfig"
	"github.com/nodereg/nodereg/server/store"
	"github.com/nodereg/nodereg/server/tpmauth"
)

// nmstateTemplate is the template of the foundation issue.
const nmstateTemplate = node.NmstateTemplate

func serverConfig(poolRange, network string) string {
	return node.ServerConfig{Name: "lab", Network: network, Pool: poolRange, Prefix: 24, Gateway: "192.168.122.1"}.YAML()
}

// tpmServerConfig is serverConfig for machines that authenticate with
// their TPM: regserver accepts for a registration only the authentication
// its auth names.
func tpmServerConfig(poolRange, network string) string {
	return strings.Replace(serverConfig(poolRange, network), "auth: mac", "auth: tpm", 1)
}

// regServer is an in-process regserver on loopback whose store survives
// restarts.
type regServer struct {
	t         *testing.T
	cfg       string
	storePath string
	delay     time.Duration
	conflict  float64                        // --fault-update-conflict
	auth      []protocol.ServerAuthenticator // nil: TPM, then PLAIN, as regserver
	http      *httptest.Server
	srv       *server.Server
	st        *store.Store
}

func startRegServer(t *testing.T, cfg string, delay time.Duration) *regServer {
	t.Helper()
	useStubNmstatectl(t)
	rs := &regServer{t: t, cfg: cfg, storePath: filepath.Join(t.TempDir(), "store.json"), delay: delay}
	rs.start()
	t.Cleanup(func() { rs.http.Close() })
	return rs
}

func (rs *regServer) start() {
	rs.t.Helper()
	cfg, err := regconfig.Parse([]byte(rs.cfg))
	if err != nil {
		rs.t.Fatal(err)
	}
	st, err := store.Open(rs.storePath)
	if err != nil {
		rs.t.Fatal(err)
	}
	rs.st = st
	auth := []protocol.ServerAuthenticator{tpmauth.New(tpmauth.Options{}), protocol.PlainServer{}}
	if rs.auth != nil {
		auth = rs.auth
	}
	o := server.Options{Config: cfg, Store: st, AllocationDelay: rs.delay, UpdateConflict: rs.conflict, Auth: auth, Log: testutil.TestLog(rs.t)}
	if rs.delay > 0 {
		// Pending addresses are answered at once, not waited for inside
		// MsgGet: the agent's own wait is what the delay tests exercise.
		o.NetworkWait = -1
	}
	srv, err := server.New(o)
	if err != nil {
		rs.t.Fatal(err)
	}
	rs.srv = srv
	// The admin API has a listener of its own in regserver; here it
	// shares the test server, under /admin/.
	mux := http.NewServeMux()
	mux.Handle("/admin/", srv.Admin(server.AdminOptions{Insecure: true}))
	mux.Handle("/", srv)
	if rs.http == nil {
		rs.http = httptest.NewServer(mux)
		return
	}
	// A restart keeps the address, so machines keep their config.
	addr := rs.http.Listener.Addr().String()
	l, err := net.Listen("tcp", addr)
	if err != nil {
		rs.t.Fatalf("restarting regserver on %s: %v", addr, err)
	}
	rs.http = &httptest.Server{Listener: l, Config: &http.Server{Handler: mux}}
	rs.http.Start()
}

// restart stops the server and starts a new one on the same store file.
func (rs *regServer) restart() {
	rs.http.Close()
	rs.st.Close() // the database is locked while open
	rs.start()
}

func (rs *regServer) url() string { return rs.http.URL + "/elemental/registration/lab-token" }

func getJSON(t *testing.T, url string, into any) {
	t.Helper()
	resp, err := http.Get(url)
	testutil.Must(t, err)
	defer resp.Body.Close()
	testutil.Must(t, json.NewDecoder(resp.Body).Decode(into))
}

func (rs *regServer) claims() []store.Claim {
	rs.t.Helper()
	resp, err := http.Get(rs.http.URL + "/admin/claims")
	if err != nil {
		rs.t.Fatal(err)
	}
	defer resp.Body.Close()
	var out []store.Claim
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		rs.t.Fatal(err)
	}
	return out
}

func TestMain(m *testing.M) { testbin.Main(m) }

// machine is a node: a scratch root with a NIC identity and a config file.
type machine struct {
	*node.Machine
	t *testing.T
}

func newMachine(t *testing.T, mac, url string) *machine {
	t.Helper()
	return &machine{Machine: node.New(t, mac, url, ""), t: t}
}

// useStubNmstatectl puts the strict nmstatectl stand-in behind the agent's
// tool table for the whole test (in-process runs read the environment) and
// returns its call log.
func useStubNmstatectl(t *testing.T) testutil.Stub {
	t.Helper()
	stub := testutil.NewStub(t)
	t.Setenv("NODEREG_NMSTATECTL", testbin.NmstatectlStub(t))
	t.Setenv("NMSTATECTL_STUB_LOG", stub.Log)
	t.Setenv("NMSTATECTL_STUB_STATE", stub.State)
	// Every machine here is a node.New one: its only interface is node.NIC.
	t.Setenv("NMSTATECTL_STUB_INTERFACES", node.NIC)
	return stub
}

func (m *machine) options(out io.Writer) agent.Options {
	return agent.Options{
		Root:           m.Root,
		Deadline:       20 * time.Second,
		NetworkTimeout: 20 * time.Second,
		Out:            out,
		Log:            testutil.TestLog(m.t),
		Version:        "test",
	}
}

func (m *machine) run(mod func(*agent.Options)) (*agent.Result, error) {
	o := m.options(io.Discard)
	if mod != nil {
		mod(&o)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	return agent.Run(ctx, o)
}
