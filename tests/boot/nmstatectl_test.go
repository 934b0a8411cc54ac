//go:build bootsim

package boot

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/nodereg/nodereg/internal/testutil/testbin"
)

// The nmstatectl way on a real NetworkManager (docs/apply.md, "nmstatectl:
// converging on the next boot"): the agent runs with the nmstatectl
// stand-in, which applies through the node's NetworkManager so that
// NetworkManager writes its own keyfiles (random UUID, its format; a
// rename kept in the old file; a rollback rewriting what it restores).
// After every step the node holds exactly one profile for the NIC, the one
// the applicator recreates at boot: its UUID and bytes are those of the
// keyfile the manifest owns. Each case runs with /etc wiped at boot
// (Elemental) and with /etc kept.

// nmstatectlRenameTemplate is the seed template under another profile
// name: a same-boot change that renames the NIC's profile.
var nmstatectlRenameTemplate = strings.Replace(nmstateSeedTemplate, "        type: ethernet\n", "        type: ethernet\n        profile-name: nrnode0-v2\n", 1)

type nmstatectlMachine struct {
	*machine
	env []string
}

func newNmstatectlMachine(t *testing.T, keepEtc bool) *nmstatectlMachine {
	t.Helper()
	m := &nmstatectlMachine{machine: newMachine(t, nmstateServerConfig(nmstateSeedTemplate))}
	m.keepEtc = keepEtc
	m.env = []string{"NODEREG_NMSTATECTL=" + testbin.NmstatectlStub(t), "NMSTATECTL_STUB_LOG=" + filepath.Join(t.TempDir(), "nmstatectl.log")}
	return m
}

func (m *nmstatectlMachine) register(t *testing.T, label string, wantCode int, args ...string) agentRun {
	t.Helper()
	res := m.runAgent(m.env, append([]string{"--nmstate", "nmstatectl"}, args...)...)
	if res.code != wantCode {
		t.Fatalf("%s: agent exit %d, want %d", label, res.code, wantCode)
	}
	return res
}

// ownedKeyfiles are the keyfiles the manifest owns: name -> sha256.
func (m *nmstatectlMachine) ownedKeyfiles(t *testing.T) map[string]string {
	t.Helper()
	var man struct {
		Files []struct{ Path, Kind, SHA256 string }
	}
	must(t, json.Unmarshal(m.read(manifest), &man))
	out := map[string]string{}
	for _, f := range man.Files {
		if f.Kind == "keyfile" {
			out[filepath.Base(f.Path)] = f.SHA256
		}
	}
	return out
}

// nicProfiles are NetworkManager's profiles for the NIC: UUID -> file.
func (m *nmstatectlMachine) nicProfiles(t *testing.T) map[string]string {
	t.Helper()
	out, err := m.nmcliOut("-t", "-f", "UUID,FILENAME", "connection", "show")
	must(t, err)
	profiles := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		uuid, file, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		dev, err := m.nmcliOut("-g", "connection.interface-name", "connection", "show", "uuid", uuid)
		must(t, err)
		if strings.TrimSpace(dev) == nodeIf {
			profiles[uuid] = strings.ReplaceAll(file, `\:`, ":")
		}
	}
	return profiles
}

// oneProfile checks the node holds exactly one profile for the NIC, the
// boot's: the keyfile directory holds exactly the keyfiles the manifest
// owns, byte for byte (by hash), and NetworkManager's only profile for the
// NIC is the one in that file, with its UUID, and active.
func (m *nmstatectlMachine) oneProfile(t *testing.T, label, name string) {
	t.Helper()
	owned := m.ownedKeyfiles(t)
	if _, ok := owned[name]; !ok || len(owned) != 1 {
		t.Errorf("%s: the manifest owns %v, want only %s", label, keys(owned), name)
	}
	files := keyfiles(t, m.machine)
	if got := keys(files); !equal(got, []string{name}) {
		t.Errorf("%s: keyfile directory holds %v, want only %s", label, got, name)
	}
	kf := []byte(files[name])
	if got := sha(kf); got != owned[name] {
		t.Errorf("%s: %s is not the bytes the manifest owns (NetworkManager's own?):\n%s", label, name, kf)
	}
	uuid := ""
	for _, line := range strings.Split(string(kf), "\n") {
		if v, ok := strings.CutPrefix(line, "uuid="); ok {
			uuid = v
		}
	}
	want := m.path(keyfileDir + "/" + name)
	if got := m.nicProfiles(t); len(got) != 1 || got[uuid] != want {
		t.Errorf("%s: NetworkManager's profiles for %s are %v, want only %s in %s", label, nodeIf, got, uuid, want)
	}
	active, err := m.nmcliOut("-t", "-f", "UUID", "connection", "show", "--active")
	must(t, err)
	if !slices.Contains(strings.Fields(active), uuid) {
		t.Errorf("%s: the profile %s is not active (active: %s)", label, uuid, active)
	}
}

// applicatorWrites is the keyfile the applicator writes at every boot.
func (m *nmstatectlMachine) applicatorWrites(t *testing.T, name string) bool {
	t.Helper()
	return bytes.Contains(m.read(applicator), []byte(keyfileDir+"/"+name))
}

func TestNmstatectlOneProfilePerDevice(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		keepEtc bool
	}{{"etc-wiped", false}, {"etc-kept", true}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := newReport(t, "N3 nmstatectl stand-in, /etc "+strings.TrimPrefix(tc.name, "etc-")+": one profile per device")
			m := newNmstatectlMachine(t, tc.keepEtc)
			seed := nodeIf + ".nmconnection"
			renamed := "nrnode0-v2.nmconnection"

			// 1: first boot, the apply.
			start := m.boot(active, true)
			res := m.register(t, "first boot", 0)
			if !strings.Contains(res.out, "keyfiles by nmstatectl gc") {
				t.Errorf("first boot: the agent did not go the nmstatectl way")
			}
			addr := m.claimed("inventory-ip")
			r.boot("first", m.waitAddr(start, cidr(addr)))
			m.oneProfile(t, "after the first apply", seed)

			// 2: a reboot: the applicator's keyfile, unchanged.
			start = m.boot(active, false)
			r.boot("reboot", m.waitAddr(start, cidr(addr)))
			m.oneProfile(t, "after a reboot, before the agent", seed)
			if res := m.register(t, "reboot", 0); !strings.Contains(res.out, "unchanged since the last run") {
				t.Errorf("reboot: the agent did not find the config unchanged")
			}
			m.oneProfile(t, "after a reboot", seed)

			// 3: a same-boot rename, then a reboot.
			m.startServer(nmstateServerConfig(nmstatectlRenameTemplate))
			start = m.boot(active, false)
			r.boot("before the rename", m.waitAddr(start, cidr(addr)))
			m.register(t, "rename", 0)
			m.oneProfile(t, "after a same-boot rename", renamed)
			if !m.applicatorWrites(t, renamed) || m.applicatorWrites(t, seed) {
				t.Errorf("after the rename the applicator does not write only %s", renamed)
			}
			start = m.boot(active, false)
			r.boot("after the rename", m.waitAddr(start, cidr(addr)))
			m.oneProfile(t, "after the rename's reboot, before the agent", renamed)
			m.register(t, "after the rename's reboot", 0)
			m.oneProfile(t, "after the rename's reboot", renamed)

			// 4: a rollback (the cut-off template), then a reboot.
			kfBefore := keyfiles(t, m.machine)
			manBefore := m.read(manifest)
			m.startServer(nmstateServerConfig(nmstateCutOffTemplate))
			start = m.boot(active, false)
			r.boot("before the cut-off", m.waitAddr(start, cidr(addr)))
			if res := m.register(t, "cut-off template", 75); !strings.Contains(res.out, "reachability check") {
				t.Errorf("cut-off: the failure does not name the reachability check")
			}
			m.oneProfile(t, "after the rollback", renamed)
			if got := keyfiles(t, m.machine); !equalMaps(got, kfBefore) {
				t.Errorf("after the rollback the keyfiles are not the previous bytes: %v", keys(got))
			}
			if !bytes.Equal(m.read(manifest), manBefore) {
				t.Errorf("the manifest changed by a rolled-back apply")
			}
			if got := m.addrs(); !equal(got, []string{cidr(addr)}) {
				t.Errorf("after the rollback the NIC has %v, want %s", got, cidr(addr))
			}
			start = m.boot(active, false)
			r.boot("after the rollback", m.waitAddr(start, cidr(addr)))
			m.oneProfile(t, "after the rollback's reboot", renamed)

			// 5: --reset-network leaves no profile of ours.
			m.register(t, "--reset-network", 0, "--reset-network")
			if got := keyfiles(t, m.machine); len(got) != 0 {
				t.Errorf("--reset-network left keyfiles %v", keys(got))
			}
			if got := m.nicProfiles(t); len(got) != 0 {
				t.Errorf("--reset-network left NetworkManager profiles %v for %s", got, nodeIf)
			}
			m.boot(active, false)
			if got := m.nicProfiles(t); len(got) != 0 {
				t.Errorf("the boot after --reset-network brought profiles %v for %s", got, nodeIf)
			}
			if got := keyfiles(t, m.machine); len(got) != 0 {
				t.Errorf("the boot after --reset-network holds keyfiles %v", keys(got))
			}
		})
	}
}

func sha(b []byte) string { return fmt.Sprintf("%x", sha256.Sum256(b)) }
