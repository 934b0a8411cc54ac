package bootstrap

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/nodereg/nodereg/apply"
	"github.com/nodereg/nodereg/internal/host"
	"github.com/nodereg/nodereg/internal/testutil"
	"github.com/nodereg/nodereg/internal/testutil/node"
)

// fakeProber finds the first address it is asked about held (by
// 02:00:00:00:00:09) and records every probe.
type fakeProber struct {
	probed []netip.Addr
	ifaces []string
}

func (p *fakeProber) Probe(_ context.Context, iface string, addr netip.Addr) (ProbeResult, error) {
	p.probed = append(p.probed, addr)
	p.ifaces = append(p.ifaces, iface)
	if len(p.probed) == 1 {
		return ProbeResult{Taken: true, Holder: net.HardwareAddr{2, 0, 0, 0, 0, 9}}, nil
	}
	return ProbeResult{}, nil
}

// fakeNM stands in for nmcli: it records the commands and, asked for the
// profiles, names a UUID for every keyfile in NetworkManager's runtime
// directory under root, by the path NetworkManager would report.
type fakeNM struct {
	root string
	mu   sync.Mutex
	ran  []string
}

func (f *fakeNM) Run(_ context.Context, c host.Command) ([]byte, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.ran = append(f.ran, strings.Join(c.Args, " "))
	if !slices.Equal(c.Args, []string{"-t", "-f", "UUID,FILENAME", "connection", "show"}) {
		return nil, nil
	}
	entries, _ := os.ReadDir(filepath.Join(f.root, RuntimeKeyfiles.Dir))
	var out strings.Builder
	for i, e := range entries {
		fmt.Fprintf(&out, "00000000-0000-4000-8000-%012d:%s/%s\n", i, RuntimeKeyfiles.Dir, e.Name())
	}
	return []byte(out.String()), nil
}

func (f *fakeNM) commands() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.ran)
}

// Up, on a machine whose server is unreachable and with nothing of ours
// applied, walks the range with the prober (the first address tried is
// held),
// writes the keyfile with the free address under the root's /run,
// activates it, and hands back a Network that Restore activates again after
// a rollback and Drop removes once the IPAM config works.
func TestUpBringsTheNetworkUpAndDropsIt(t *testing.T) {
	root := t.TempDir()
	// The range's first try derives from the system UUID.
	testutil.Must(t, os.MkdirAll(filepath.Join(root, "sys/class/dmi/id"), 0o755))
	testutil.Must(t, os.WriteFile(filepath.Join(root, "sys/class/dmi/id/product_uuid"), []byte("4c4c4544-0000-4000-8000-000000000001\n"), 0o444))
	c, err := FromConfigFile([]byte(node.BootstrapKeyfile{Key: "boot", ID: "boot", Iface: "eth0",
		Sources: "          range: {start: 10.231.0.5, end: 10.231.0.6, prefix: 24}\n          interface: eth0\n"}.File()))
	testutil.Must(t, err)
	nm := &fakeNM{root: root}
	prober := &fakeProber{}
	reachable := false
	var linked []string
	var log testutil.Log
	env := Env{
		Files:   host.Root(root),
		Applier: &apply.Applier{Files: host.Root(root), Runner: nm, Tools: host.Tools{Nmcli: "/bin/true"}},
		Log:     log.Entry(),
		Prober:  prober,
		LinkReady: func(_ context.Context, iface string) (bool, error) {
			linked = append(linked, iface)
			return false, nil
		},
		Unreachable: func(context.Context) error {
			if reachable {
				return nil
			}
			reachable = true // up once the bootstrap address is
			return errors.New("connect: network is unreachable")
		},
	}
	n, err := Up(t.Context(), c, env)
	if err != nil {
		t.Fatalf("Up: %v\n%s", err, log.String())
	}
	if len(prober.probed) != 2 || prober.probed[0] == prober.probed[1] || !slices.Equal(prober.ifaces, []string{"eth0", "eth0"}) || !slices.Equal(linked, []string{"eth0"}) {
		t.Fatalf("probed %v on %v after raising %v, want the held first try, then the other address, on eth0", prober.probed, prober.ifaces, linked)
	}
	file := filepath.Join(root, RuntimeKeyfiles.Dir, RuntimeKeyfiles.Prefix+"boot.nmconnection")
	b, err := os.ReadFile(file)
	if err != nil || !strings.Contains(string(b), "address1="+prober.probed[1].String()+"/24") {
		t.Fatalf("bootstrap keyfile %s: %v\n%s", file, err, b)
	}
	want := []string{RuntimeKeyfiles.Dir + "/" + RuntimeKeyfiles.Prefix + "boot.nmconnection"}
	if !slices.Equal(n.Keyfiles(), want) {
		t.Errorf("network keyfiles %v, want %v", n.Keyfiles(), want)
	}
	up := []string{"connection reload", "-t -f UUID,FILENAME connection show", "connection up uuid 00000000-0000-4000-8000-000000000000"}
	if got := nm.commands(); !slices.Equal(got, up) {
		t.Errorf("nmcli ran %q, want %q", got, up)
	}

	// A rolled-back IPAM apply brings it back; another failure does not.
	other := errors.New("persist failed")
	if err := n.Restore(t.Context(), log.Entry(), other); err != other || len(nm.commands()) != len(up) {
		t.Errorf("Restore after a failure that was not a rollback: %v, ran %q", err, nm.commands())
	}
	rolled := fmt.Errorf("apply: %w", apply.ErrRolledBack)
	if err := n.Restore(t.Context(), log.Entry(), rolled); err != rolled || !slices.Equal(nm.commands(), append(slices.Clone(up), up...)) {
		t.Errorf("Restore after a rollback: %v, ran %q", err, nm.commands())
	}

	// Not applied: kept. Applied: removed, NetworkManager reloaded.
	n.Drop(t.Context(), log.Entry(), false)
	if _, err := os.Stat(file); err != nil {
		t.Fatalf("Drop without an applied config removed the keyfile: %v", err)
	}
	n.Drop(t.Context(), log.Entry(), true)
	if _, err := os.Stat(file); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("keyfile left after Drop: %v", err)
	}
	if got := nm.commands(); len(got) != 3*len(up)-1 || got[len(got)-2] != "connection reload" || len(n.Keyfiles()) != 0 {
		t.Errorf("after Drop: ran %q, keyfiles %v", got, n.Keyfiles())
	}
}

// With the server reachable as the node is, Up writes nothing and probes
// nothing.
func TestUpLeavesAReachableNodeAlone(t *testing.T) {
	root := t.TempDir()
	c, err := FromConfigFile([]byte(node.BootstrapKeyfile{Key: "boot", ID: "boot", Iface: "eth0",
		Sources: "          range: {start: 10.231.0.5, end: 10.231.0.9, prefix: 24}\n          interface: eth0\n"}.File()))
	testutil.Must(t, err)
	prober := &fakeProber{}
	var log testutil.Log
	n, err := Up(t.Context(), c, Env{Files: host.Root(root), Applier: &apply.Applier{Files: host.Root(root)}, Log: log.Entry(),
		Prober: prober, Unreachable: func(context.Context) error { return nil }})
	if err != nil || n != nil || len(prober.probed) != 0 {
		t.Fatalf("Up on a reachable node: %v, %v, probed %v", n, err, prober.probed)
	}
	if entries, _ := os.ReadDir(root); len(entries) != 0 {
		t.Errorf("Up wrote %v", entries)
	}
	if !strings.Contains(log.String(), "reachable as the node is") {
		t.Errorf("no reason logged:\n%s", log.String())
	}
}
