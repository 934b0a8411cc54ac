package verify

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/nodereg/nodereg/internal/host"
	"github.com/nodereg/nodereg/internal/state"
	"github.com/nodereg/nodereg/internal/testutil/labkit"
)

const mgmtMAC = "52:54:00:29:07:07"

// A profile bound by MAC address (no interface-name): its addresses are
// looked for on the device the kernel gives that MAC, here vd0.
func TestMACIdentifiedInterfaceUnderItsKernelName(t *testing.T) {
	// Parallel: its namespaces are its own, and most of its time is the
	// wait for their veth's carrier.
	t.Parallel()
	l := newLab(t)
	labkit.IP(t, l.ns, "link", "set", "vd0", "address", mgmtMAC)
	n := nodeWith(t, "mgmt", "[connection]\nid=mgmt\ntype=ethernet\n[ethernet]\nmac-address="+mgmtMAC+
		"\n[ipv4]\nmethod=manual\naddress1={ip}/24\n")
	st := n.state
	if _, ok := st.Addresses()["mgmt"]; !ok {
		t.Fatalf("the state records %v, want the profile name mgmt", st.Addresses())
	}
	rep := l.run(t, n, nil)
	wantStatus(t, rep, Addresses, OK, "1 addresses on 1 interfaces")

	labkit.IP(t, l.ns, "addr", "del", "10.77.0.5/24", "dev", "vd0")
	rep = l.run(t, n, nil)
	wantStatus(t, rep, Addresses, Failed, "10.77.0.5/24 missing on mgmt (device vd0, by MAC)")

	// The profiles finding matches nmcli's DEVICE, the kernel's name.
	in := Input{Files: host.Root(n.root), State: n.state, ByMAC: func(string) (string, error) { return "vd0", nil }}
	in.addresses = st.Addresses()
	in.devices = deviceNames(in)
	rep = &Report{}
	checkProfiles(rep, in, []activeProfile{{Name: "mgmt", Device: "vd0", File: host.Root(n.root).Path("/etc/NetworkManager/system-connections/mgmt.nmconnection")}}, "")
	wantStatus(t, rep, Profiles, OK, "")
}

// A config refused or failed, kept in the state file to report back,
// fails the applicator finding, whether an older config was applied or
// none ever was.
func TestRecordedNetworkErrorFails(t *testing.T) {
	n := newNode(t)
	never, older := *n.state, *n.state
	never.NetworkDigest, never.NetworkAddresses = "", ""
	never.NetworkError, never.NetworkErrorKind, never.NetworkErrorPhase = "network policy refuses config.eth0: … (rule unknown)", "refused", "plan"
	older.NetworkError, older.NetworkErrorKind, older.NetworkErrorPhase = "apply: connection up failed", "failed", "apply"
	for name, st := range map[string]*state.State{"never applied": &never, "older one holds": &older} {
		rep := &Report{}
		checkApplicator(rep, host.Root(n.root), st)
		wantStatus(t, rep, Applicator, Failed, "the last network config was not applied ("+st.NetworkErrorKind+", phase "+st.NetworkErrorPhase+")")
		if rep.Exit&Bits[Applicator] == 0 {
			t.Errorf("%s: exit %d lacks the applicator bit", name, rep.Exit)
		}
	}
}

// An nmstate config's interface with identifier mac-address is bound by
// its MAC under its (profile) name.
func TestMACBoundNmstate(t *testing.T) {
	root := t.TempDir()
	files := host.Root(root)
	write := func(p, text string) {
		if err := os.MkdirAll(filepath.Dir(files.Path(p)), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(files.Path(p), []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("/oem/nodereg/network-config.nmstate", "interfaces:\n- name: uplink\n  type: ethernet\n  identifier: mac-address\n  mac-address: "+mgmtMAC+"\n- name: eth1\n  type: ethernet\n  mac-address: 52:54:00:00:00:01\n")
	write(state.ManifestPath(host.StateDir), `{"digest":"d","files":[{"path":"/oem/nodereg/network-config.nmstate","kind":"digested","sha256":""}]}`)
	got := macBound(files)
	if len(got) != 1 || got["uplink"] != mgmtMAC {
		t.Errorf("bound by MAC: %v, want uplink only", got)
	}
}
