package verify

import (
	"bytes"
	"encoding/json"
	"encoding/pem"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nodereg/nodereg/apply"
	"github.com/nodereg/nodereg/bootstrap"
	"github.com/nodereg/nodereg/internal/host"
	"github.com/nodereg/nodereg/internal/state"
	"github.com/nodereg/nodereg/internal/testutil/labkit"
	"github.com/nodereg/nodereg/internal/testutil/testpki"
	"github.com/nodereg/nodereg/protocol"
)

// node is a scratch root with a network config persisted by apply itself
// (manifest, digested config, applicator) for interface vd0.
type node struct {
	root  string
	state *state.State
}

const vd0Template = "[connection]\nid=vd0\ntype=ethernet\ninterface-name=vd0\n[ipv4]\nmethod=manual\naddress1={ip}/24\n"

func newNode(t *testing.T) *node {
	t.Helper()
	return nodeWith(t, "vd0", vd0Template)
}

// nodeWith is newNode with one nmconnections profile of its own, whose
// address is 10.77.0.5 ({ip}).
func nodeWith(t *testing.T, name, keyfile string) *node {
	t.Helper()
	root := t.TempDir()
	r, err := apply.Render(&protocol.NetworkConfig{
		Configurator: protocol.ConfiguratorNmconnections,
		IPAddresses:  map[string]string{"ip": "10.77.0.5"},
		Config:       map[string]protocol.RawValue{name: {Value: keyfile}},
	})
	if err != nil {
		t.Fatal(err)
	}
	a := &apply.Applier{Files: host.Root(root), Runner: host.ExecRunner{}}
	p, err := a.PlanKeyfiles(t.Context(), r)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Persist(p); err != nil {
		t.Fatal(err)
	}
	st := &state.State{InitialRegistration: time.Date(2026, 6, 9, 10, 11, 12, 0, time.UTC)}
	st.NetworkDigest, st.NetworkAddresses = p.Digest(), state.FormatAddresses(apply.InterfaceAddresses(r))
	return &node{root: root, state: st}
}

// lab is the node's network namespace with vd0 (a veth to the peer namespace) up and
// holding the config's address, and a TLS server on its loopback.
type lab struct {
	ns   string
	url  string
	ca   string
	hits *atomic.Int32
}

func newLab(t *testing.T) *lab {
	t.Helper()
	pair := labkit.NewPair(t, "nrver", "verify's address and server findings")
	ns := pair.Node
	labkit.IP(t, ns, "link", "set", "lo", "up")
	labkit.IP(t, ns, "link", "add", "vd0", "type", "veth", "peer", "name", "vp0", "netns", pair.Peer)
	labkit.IP(t, pair.Peer, "link", "set", "vp0", "up")
	labkit.IP(t, ns, "addr", "add", "10.77.0.5/24", "dev", "vd0")
	labkit.IP(t, ns, "link", "set", "vd0", "up")
	l := &lab{ns: ns, hits: &atomic.Int32{}}
	var err error
	// The veth's carrier comes up a moment after both ends are up.
	deadline := time.Now().Add(10 * time.Second)
	for {
		var link Link
		labkit.Enter(t, ns, func() { link, err = netlinkLink("vd0") })
		if err == nil && link.Running {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("vd0 has no carrier after 10 s: %+v %v", link, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	var ln net.Listener
	labkit.Enter(t, ns, func() { ln, err = net.Listen("tcp", "127.0.0.1:0") })
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { l.hits.Add(1) }))
	srv.Listener.Close()
	srv.Listener = ln
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the refused handshakes
	srv.StartTLS()
	t.Cleanup(srv.Close)
	l.url = srv.URL + "/elemental/registration/token"
	l.ca = string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}))
	return l
}

func (l *lab) run(t *testing.T, n *node, edit func(*Input)) *Report {
	t.Helper()
	in := Input{Files: host.Root(n.root), Runner: host.ExecRunner{}, Nmcli: "nodereg-test-no-such-nmcli", State: n.state, ServerURL: l.url, CA: l.ca, BootstrapKeyfiles: runtimeKeyfiles}
	if edit != nil {
		edit(&in)
	}
	var rep *Report
	labkit.Enter(t, l.ns, func() { rep = Run(t.Context(), in) })
	return rep
}

func wantStatus(t *testing.T, rep *Report, name string, st Status, detail string) {
	t.Helper()
	f := rep.Find(name)
	if f.Status != st || !strings.Contains(f.Detail, detail) {
		t.Errorf("%s: got %q %q, want %q containing %q", name, f.Status, f.Detail, st, detail)
	}
}

func TestAHealthyNodePassesAndARemovedAddressFails(t *testing.T) {
	// Parallel: its namespaces are its own, and most of its time is the
	// wait for their veth's carrier.
	t.Parallel()
	l := newLab(t)
	n := newNode(t)
	rep := l.run(t, n, nil)
	if rep.Exit != 0 {
		t.Fatalf("healthy node: exit %d, findings %+v", rep.Exit, rep.Findings)
	}
	for _, name := range []string{Registered, Applicator, Addresses, Server, Bootstrap} {
		wantStatus(t, rep, name, OK, "")
	}
	wantStatus(t, rep, Profiles, NotChecked, "not checked: nmcli not found")
	if h := l.hits.Load(); h != 0 {
		t.Errorf("the server check sent %d HTTP requests; it must only shake hands", h)
	}

	// An address removed by hand: the finding names it, exit is its bit.
	labkit.IP(t, l.ns, "addr", "del", "10.77.0.5/24", "dev", "vd0")
	rep = l.run(t, n, nil)
	wantStatus(t, rep, Addresses, Failed, "10.77.0.5/24 missing on vd0")
	if rep.Exit != Bits[Addresses] {
		t.Errorf("address removed: exit %d, want %d", rep.Exit, Bits[Addresses])
	}

	// The interface down: said so as well.
	labkit.IP(t, l.ns, "link", "set", "vd0", "down")
	rep = l.run(t, n, nil)
	wantStatus(t, rep, Addresses, Failed, "vd0 is down")
}

func TestEachFindingSetsItsBit(t *testing.T) {
	// Parallel: its namespaces are its own, and most of its time is the
	// wait for their veth's carrier.
	t.Parallel()
	l := newLab(t)
	n := newNode(t)
	// The applicator edited under /oem: no longer the applied config.
	app := filepath.Join(n.root, host.Applicator)
	if err := os.WriteFile(app, []byte("stages: {}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// A bootstrap keyfile left under /run.
	bdir := filepath.Join(n.root, "run/NetworkManager/system-connections")
	if err := os.MkdirAll(bdir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(bdir, "nodereg-bootstrap-eth0.nmconnection"), []byte("[connection]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// A CA that is not the server's.
	otherCA := string(testpki.New(t, "other CA").CertPEM())
	rep := l.run(t, n, func(in *Input) {
		in.State = &state.State{Network: n.state.Network}
		in.CA = otherCA
	})
	wantStatus(t, rep, Registered, Failed, "no registration")
	wantStatus(t, rep, Applicator, Failed, "changed since it was written")
	wantStatus(t, rep, Server, Failed, "TLS handshake")
	wantStatus(t, rep, Bootstrap, Failed, "nodereg-bootstrap-eth0.nmconnection")
	want := Bits[Registered] | Bits[Applicator] | Bits[Server] | Bits[Bootstrap]
	if rep.Exit != want {
		t.Errorf("exit %d, want %d (registered|applicator|server|bootstrap)", rep.Exit, want)
	}

	var js Report
	var buf bytes.Buffer
	if err := rep.Write(&buf, "json"); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(buf.Bytes(), &js); err != nil || js.Exit != want || len(js.Findings) != 6 {
		t.Errorf("json report: %v exit %d, %d findings:\n%s", err, js.Exit, len(js.Findings), buf.String())
	}
	buf.Reset()
	_ = rep.Write(&buf, "text")
	if !strings.Contains(buf.String(), "failed: registered, applicator, server, bootstrap") {
		t.Errorf("text report lacks the verdict:\n%s", buf.String())
	}
}

func TestAnotherDigestIsNotTheAppliedConfig(t *testing.T) {
	n := newNode(t)
	rep := &Report{}
	checkApplicator(rep, host.Root(n.root), &state.State{Network: state.Network{NetworkDigest: "sha256:other"}})
	wantStatus(t, rep, Applicator, Failed, "is not the applied one")
	rep = &Report{}
	checkApplicator(rep, host.Root(t.TempDir()), n.state)
	wantStatus(t, rep, Applicator, Failed, "no network manifest")
}

func TestNmcliTerseOutput(t *testing.T) {
	// nmcli -t escapes ':' and '\' in values with a backslash.
	out := []byte("vd0:vd0:/etc/NetworkManager/system-connections/vd0.nmconnection\n" +
		"a\\:b:eth1:/run/NetworkManager/system-connections/nodereg-bootstrap-eth1.nmconnection\n")
	got := parseActive(out)
	if len(got) != 2 || got[1].Name != "a:b" || got[1].Device != "eth1" || got[0].File != "/etc/NetworkManager/system-connections/vd0.nmconnection" {
		t.Fatalf("parsed %+v", got)
	}
	n := newNode(t)
	rep := &Report{}
	in := Input{Files: host.Root(n.root), State: n.state, addresses: n.state.Addresses()}
	checkProfiles(rep, in, got, "")
	wantStatus(t, rep, Profiles, Failed, `vd0: active profile "vd0"`)
	if !rep.ForeignActive {
		t.Error("a foreign active profile is not marked for drift repair to leave alone")
	}
	rep = &Report{}
	checkProfiles(rep, in, []activeProfile{{Name: "vd0", Device: "vd0", File: host.Root(n.root).Path("/etc/NetworkManager/system-connections/vd0.nmconnection")}}, "")
	wantStatus(t, rep, Profiles, OK, "")
	rep = &Report{}
	checkBootstrap(rep, host.Root(n.root), runtimeKeyfiles, got, "")
	wantStatus(t, rep, Bootstrap, Failed, `active profile "a:b" on eth1`)
}

// runtimeKeyfiles is what the agent hands verify.
var runtimeKeyfiles = BootstrapKeyfiles{Prefix: bootstrap.RuntimeKeyfiles.Prefix, Owned: bootstrap.RuntimeKeyfiles.Owned}
