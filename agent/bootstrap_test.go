package agent

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/mudler/yip/pkg/schema"
	"gopkg.in/yaml.v3"

	"github.com/nodereg/nodereg/agent/exitcode"
	"github.com/nodereg/nodereg/agent/handover"
	"github.com/nodereg/nodereg/agent/retry/retrytest"
	"github.com/nodereg/nodereg/apply"
	"github.com/nodereg/nodereg/bootstrap"
	"github.com/nodereg/nodereg/internal/host"
	"github.com/nodereg/nodereg/internal/testutil"
	"github.com/nodereg/nodereg/internal/testutil/node"
	"github.com/nodereg/nodereg/internal/testutil/testbin"
	"github.com/nodereg/nodereg/netpolicy"
	"github.com/nodereg/nodereg/protocol"
)

// bootstrapBlock is a static bootstrap network for the test machines' eth0,
// indented to sit under elemental.registration.
var bootstrapBlock = node.BootstrapKeyfile{Key: "bootstrap-eth0", ID: "bootstrap-eth0", Iface: "eth0", Sources: `          static:
          - mac: 52:54:00:aa:00:21
            address: 10.231.0.21
`}.Block()

// The server never sets the bootstrap network: a MsgConfig payload that
// carries it is logged as refused, and the run keeps its local settings.
func TestServerSentBootstrapIsRefused(t *testing.T) {
	payload := []byte("elemental:\n  registration:\n    url: https://x.example/r\n    bootstrap-network:\n      configurator: nmconnections\n")
	cfg := &protocol.Config{}
	reply, err := protocol.DecodeConfigReply(payload, cfg)
	testutil.Must(t, err)
	var log testutil.Log
	local := &bootstrap.Config{Configurator: "nmstate"}
	conf := &configured{boot: local}
	checkServerReply(log.Entry(), reply)
	if !strings.Contains(log.String(), bootstrap.ErrServerSent.Error()) {
		t.Errorf("no refusal logged:\n%s", log.String())
	}
	if conf.boot != local || conf.boot.Configurator != "nmstate" {
		t.Errorf("the run's bootstrap settings changed: %+v", conf.boot)
	}
	log = testutil.Log{}
	plain, err := protocol.DecodeConfigReply([]byte("elemental:\n  registration:\n    url: https://x.example/r\n"), &protocol.Config{})
	testutil.Must(t, err)
	checkServerReply(log.Entry(), plain)
	if log.String() != "" {
		t.Errorf("a reply without the key logged: %s", log.String())
	}
}

// A node whose server is reachable (DHCP works) never brings the bootstrap
// network up, even with a bootstrap config: a live run (real runner, not
// persist-only) writes nothing under /run and touches no link (eth0 does not
// exist here: any attempt would fail the run).
func TestReachableServerNeverBringsUpBootstrap(t *testing.T) {
	s := &scriptedServer{script: script{gets: []answer{{reply: &protocol.ConfigReply{}}}}}
	m := node.New(t, "52:54:00:aa:00:21", s.start(t), "    no-smbios: true\n"+bootstrapBlock)
	var log testutil.Log
	if _, err := Run(t.Context(), Options{Root: m.Root, Log: log.Entry(), Clock: retrytest.NewClock(time.Now())}); err != nil {
		t.Fatalf("run: %v\n%s", err, log.String())
	}
	if !strings.Contains(log.String(), "bootstrap network not needed") || !strings.Contains(log.String(), "reachable as the node is") {
		t.Errorf("no line saying the bootstrap network is not needed:\n%s", log.String())
	}
	if _, err := os.Stat(filepath.Join(m.Root, "run")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the run created %s/run (%v)", m.Root, err)
	}
}

// A bad bootstrap block ends the run in the config phase with exit 78,
// naming the key, before any connection.
func TestBadBootstrapConfigIs78(t *testing.T) {
	s := &scriptedServer{script: script{gets: []answer{{reply: &protocol.ConfigReply{}}}}}
	m := node.New(t, "52:54:00:aa:00:22", s.start(t), strings.Replace(bootstrapBlock, "address: 10.231.0.21", "address: 10.231.0.21/24", 1))
	_, err := Run(t.Context(), Options{Root: m.Root, Clock: retrytest.NewClock(time.Now())})
	var pe *PhaseError
	if exitcode.Of(err) != exitcode.Config || !errors.As(err, &pe) || pe.Phase != PhaseConfig || !strings.Contains(err.Error(), bootstrap.Key+".ipAddresses.boot-ip") {
		t.Fatalf("run: %v (exit %d), want exit 78 in phase config naming the key", err, exitcode.Of(err))
	}
	if len(s.seen) != 0 {
		t.Errorf("the server saw %d registrations", len(s.seen))
	}
}

// --dry-run shows the bootstrap profile and the address tried first, and
// writes nothing.
func TestDryRunPrintsBootstrap(t *testing.T) {
	s := &scriptedServer{script: script{gets: []answer{{reply: &protocol.ConfigReply{}}}}}
	m := node.New(t, "52:54:00:aa:00:21", s.start(t), "    no-smbios: true\n"+bootstrapBlock)
	before := testutil.Tree(t, m.Root)
	var out strings.Builder
	if _, err := Run(t.Context(), Options{Root: m.Root, DryRun: true, Out: &out, Clock: retrytest.NewClock(time.Now())}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"# bootstrap network: not needed (the registration server is reachable as the node is)",
		"{boot-ip}: first try 10.231.0.21 from static[0] (mac 52:54:00:aa:00:21), probed on eth0 before use",
		"# ---- bootstrap keyfile: /run/NetworkManager/system-connections/nodereg-bootstrap-bootstrap-eth0.nmconnection (0600, gone at reboot)",
		"address1=10.231.0.21/24",
		"nmcli connection up uuid '<UUID of /run/NetworkManager/system-connections/nodereg-bootstrap-bootstrap-eth0.nmconnection>'",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("dry run output lacks %q:\n%s", want, out.String())
		}
	}
	if d := testutil.TreeDiff(before, testutil.Tree(t, m.Root)); d != "" {
		t.Errorf("dry run changed the root:\n%s", d)
	}
}

// An install or reset hands the bootstrap block on to the new system's
// registration config: it reads back to the same settings.
func TestHandOverKeepsTheBootstrapBlock(t *testing.T) {
	s := &scriptedServer{script: script{gets: []answer{{reply: &protocol.ConfigReply{}}}}}
	url := s.start(t)
	m := node.New(t, "52:54:00:aa:00:21", url, "    no-smbios: true\n"+bootstrapBlock)
	t.Setenv(host.EnvElemental, "/bin/true")
	if _, err := Run(t.Context(), Options{Root: m.Root, Mode: ModeReset, Clock: retrytest.NewClock(time.Now())}); err != nil {
		t.Fatal(err)
	}
	hook, err := os.ReadFile(filepath.Join(m.Root, handover.HookPath))
	testutil.Must(t, err)
	var cfg schema.YipConfig
	testutil.Must(t, yaml.Unmarshal(hook, &cfg))
	var reg string
	for _, st := range cfg.Stages["before-reset"] {
		for _, f := range st.Files {
			if strings.HasSuffix(f.Path, "elemental-registration.yaml") {
				var inner schema.YipConfig
				testutil.Must(t, yaml.Unmarshal([]byte(f.Content), &inner))
				reg = inner.Stages["initramfs"][0].Files[0].Content
			}
		}
	}
	got, err := bootstrap.FromConfigFile([]byte(reg))
	if err != nil || got == nil {
		t.Fatalf("the new system's registration config has no valid bootstrap block (%v):\n%s", err, reg)
	}
	b, err := os.ReadFile(filepath.Join(m.Root, node.ConfigPath))
	testutil.Must(t, err)
	want, err := bootstrap.FromConfigFile(b)
	testutil.Must(t, err)
	if !reflect.DeepEqual(got, want) {
		t.Errorf("bootstrap block handed on as %+v, want %+v", got, want)
	}
	if !strings.Contains(reg, "url: "+url) {
		t.Errorf("registration lost its url:\n%s", reg)
	}
}

func TestMain(m *testing.M) { testbin.Main(m) }

// An nmstate bootstrap network gets its keyfiles from the same keyfile
// generator as the IPAM config (nmstatectl gc; here the stand-in): the
// printout names the file gc made, carrying the address Preview would try
// first. The bootstrap network below resembles bootstrap/config_test.go's
// rangeFile on purpose but is not shared: that one is docs/bootstrap.md's
// example as parser input, this one is sized for node.New's machine, and
// sharing would make the agent's tests depend on the parser's fixtures.
func TestBootstrapNmstateUsesTheKeyfileGenerator(t *testing.T) {
	t.Setenv(host.EnvNmstatectl, testbin.NmstatectlStub(t))
	m := node.New(t, "52:54:00:aa:00:23", "https://127.0.0.1:1/r", `    bootstrap-network:
      configurator: nmstate
      config:
        interfaces: [{name: eth0, type: ethernet, state: up, ipv4: {enabled: true, dhcp: false, address: [{ip: "{boot-ip}", prefix-length: 24}]}}]
      ipAddresses:
        boot-ip: {range: {start: 10.231.0.100, end: 10.231.0.149, prefix: 24, gateway: 10.231.0.1}}
`)
	b, err := os.ReadFile(filepath.Join(m.Root, node.ConfigPath))
	testutil.Must(t, err)
	c, err := bootstrap.FromConfigFile(b)
	testutil.Must(t, err)
	facts, err := bootstrap.ReadFacts(host.Root(m.Root))
	testutil.Must(t, err)
	preview, err := bootstrap.Preview(c, facts)
	testutil.Must(t, err)
	first := preview.Choices[0].FirstTry.String()
	var out strings.Builder
	nmstatectl := string(apply.NmstateNmstatectl)
	if err := PrintBootstrap(t.Context(), &out, m.Root, "/"+node.ConfigPath, &nmstatectl); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"# bootstrap keyfiles by nmstatectl gc\n",
		"bootstrap keyfile: /run/NetworkManager/system-connections/nodereg-bootstrap-eth0.nmconnection",
		"=" + first + "/24\n",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("printout lacks %q:\n%s", want, out.String())
		}
	}
	if _, err := os.Stat(filepath.Join(m.Root, "run")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("printing created %s/run", m.Root)
	}
}

// A run that ended between applying the IPAM config and dropping the
// bootstrap profile left it under /run: the next run, with a config of ours
// applied, removes it and reloads NetworkManager once the server answers as
// the node is; while the server is away it keeps it for its apply to drop.
func TestLeftoverBootstrapKeyfilesGoOnceAConfigIsApplied(t *testing.T) {
	t.Setenv(host.EnvNmcli, "/bin/true")
	listening, err := net.Listen("tcp", "127.0.0.1:0")
	testutil.Must(t, err)
	t.Cleanup(func() { listening.Close() })
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	testutil.Must(t, err)
	closedAddr := closed.Addr().String()
	closed.Close()
	for _, c := range []struct {
		name, url   string
		appliedHere string
		wantGone    bool
	}{
		{"reachable, config applied", "http://" + listening.Addr().String() + "/r", "sha256:applied", true},
		// Refused counts as reachable (serverUnreachable): only a network
		// failure keeps the profile; a link-local address without a zone is
		// one that sends nothing.
		{"unreachable, config applied", "http://[fe80::1]:1/r", "sha256:applied", false},
		{"no config applied", "http://" + closedAddr + "/r", "", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			root := t.TempDir()
			leftover := bootstrap.RuntimeKeyfiles.Path(host.Root(root), "eth0.nmconnection")
			testutil.Must(t, os.MkdirAll(filepath.Dir(leftover), 0o755))
			testutil.Must(t, os.WriteFile(leftover, []byte("[connection]\nid=bootstrap-eth0\ntype=ethernet\n"), 0o600))
			var out strings.Builder
			var log testutil.Log
			e := newEnv(Options{Root: root, Runner: host.PrintRunner{W: &out}, Log: log.Entry()})
			conf := &configured{boot: &bootstrap.Config{}, cfg: &protocol.Config{}}
			conf.cfg.Elemental.Registration.URL = c.url
			conf.apply = e.ownedApplier(apply.NmstateAuto, netpolicy.Policy{})
			// The "no config applied" case takes the earlier run's profile
			// over and activates it: that is not this test's subject.
			bootNet, _ := e.bootstrapNetwork(t.Context(), e.phase(PhaseBootstrap, redactor{}), conf, &prior{appliedDigest: c.appliedHere})
			_, statErr := os.Stat(leftover)
			if gone := errors.Is(statErr, os.ErrNotExist); gone != c.wantGone {
				t.Fatalf("leftover removed: %v, want %v\n%s", gone, c.wantGone, log.String())
			}
			reloaded := strings.Contains(out.String(), "would run /bin/true connection reload")
			if c.wantGone && !reloaded {
				t.Errorf("NetworkManager not reloaded after the removal: %q", out.String())
			}
			if c.appliedHere != "" && !c.wantGone && len(bootNet.Keyfiles()) != 1 {
				t.Errorf("kept leftover not handed to the run's apply: %v", bootNet.Keyfiles())
			}
		})
	}
}
