// Package e2e runs the agent against the reference server over real
// websockets on loopback: each "machine" is a scratch root with its own
// fake /sys identity, config and state.
package e2e

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/nodereg/nodereg/agent"
	"github.com/nodereg/nodereg/protocol"
	"github.com/nodereg/nodereg/server"
	"github.com/nodereg/nodereg/server/regconfig"
	"github.com/nodereg/nodereg/server/store"
	"github.com/nodereg/nodereg/server/tpmauth"
	"github.com/nodereg/nodereg/tests/internal/node"
	"github.com/nodereg/nodereg/tests/internal/testbin"
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
	srv, err := server.New(server.Options{Config: cfg, Store: st, AllocationDelay: rs.delay, Auth: auth, Log: testLog(rs.t)})
	if err != nil {
		rs.t.Fatal(err)
	}
	rs.srv = srv
	// The admin API has a listener of its own in regserver; here it
	// shares the test server, under /admin/.
	mux := http.NewServeMux()
	mux.Handle("/admin/", srv.Admin(server.AdminOptions{}))
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
	must(t, err)
	defer resp.Body.Close()
	must(t, json.NewDecoder(resp.Body).Decode(into))
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

func TestMain(m *testing.M) {
	code := m.Run()
	testbin.Cleanup()
	os.Exit(code)
}

// machine is a node: a scratch root with a NIC identity and a config file.
type machine struct {
	t    *testing.T
	root string
	mac  string
}

func newMachine(t *testing.T, mac, url string) *machine {
	t.Helper()
	root := t.TempDir()
	nic := filepath.Join(root, "sys/class/net/eth0")
	must(t, os.MkdirAll(nic, 0o755))
	must(t, os.WriteFile(filepath.Join(nic, "address"), []byte(mac+"\n"), 0o644))
	must(t, os.WriteFile(filepath.Join(nic, "addr_assign_type"), []byte("0\n"), 0o644))
	dmi := filepath.Join(root, "sys/class/dmi/id")
	must(t, os.MkdirAll(dmi, 0o755))
	uuid := "00000000-0000-4000-8000-" + strings.ReplaceAll(mac, ":", "")
	must(t, os.WriteFile(filepath.Join(dmi, "product_uuid"), []byte(uuid+"\n"), 0o644))
	m := &machine{t: t, root: root, mac: mac}
	m.writeConfig("elemental:\n  registration:\n    url: " + url + "\n    auth: mac\n")
	return m
}

func (m *machine) writeConfig(text string) {
	p := filepath.Join(m.root, "oem/registration/config.yaml")
	must(m.t, os.MkdirAll(filepath.Dir(p), 0o700))
	must(m.t, os.WriteFile(p, []byte(text), 0o600))
}

// useStubNmstatectl puts the strict nmstatectl stand-in behind the agent's
// tool table and records its calls; it returns the call log's path.
func useStubNmstatectl(t *testing.T) string {
	t.Helper()
	stub := testbin.Build(t, "./tests/stubs/nmstatectl")
	dir := t.TempDir()
	t.Setenv("NODEREG_NMSTATECTL", stub)
	t.Setenv("NMSTATECTL_STUB_LOG", filepath.Join(dir, "calls.jsonl"))
	t.Setenv("NMSTATECTL_STUB_STATE", filepath.Join(dir, "checkpoint"))
	return filepath.Join(dir, "calls.jsonl")
}

// stubCalls returns the subcommands the stand-in was called with, in order.
func stubCalls(t *testing.T, log string) []string {
	t.Helper()
	b, err := os.ReadFile(log)
	if os.IsNotExist(err) {
		return nil
	}
	must(t, err)
	var out []string
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var call struct{ Args []string }
		must(t, json.Unmarshal([]byte(line), &call))
		out = append(out, strings.Join(call.Args, " "))
	}
	return out
}

func (m *machine) options(out io.Writer) agent.Options {
	return agent.Options{
		Root:           m.root,
		Deadline:       20 * time.Second,
		NetworkTimeout: 20 * time.Second,
		Out:            out,
		Log:            testLog(m.t),
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

// treeHash lists every path under root with its mode and content hash.
func treeHash(t *testing.T, root string) string {
	t.Helper()
	var lines []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		line := fmt.Sprintf("%s %v", strings.TrimPrefix(p, root), info.Mode())
		if d.Type().IsRegular() {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			sum := sha256.Sum256(b)
			line += " " + hex.EncodeToString(sum[:])
		}
		lines = append(lines, line)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

func testLog(t *testing.T) *logrus.Entry {
	l := logrus.New()
	l.Out = testWriter{t}
	l.Level = logrus.DebugLevel
	return logrus.NewEntry(l)
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
