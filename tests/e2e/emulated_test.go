//go:build emulatedtpm

package e2e

import "testing"

// The emulated TPM with seed 1 registers with the identity of docs/protocol.md
// section 11 (go-tpm-tools simulator, upstream's seeding).
func TestEmulatedTPMRegistration(t *testing.T) {
	const seed1Hash = "a2e5b231dac4e90151454e2ebc76a6b118f7d1b826b810d22868b2d09b38b7f7"
	rs := startRegServer(t, tpmServerConfig("192.168.122.150-192.168.122.200", nmstateTemplate), 0)
	m := newMachine(t, "52:54:00:00:30:01", rs.url())
	m.WriteConfig("elemental:\n  registration:\n    url: " + rs.url() + "\n    auth: tpm\n    emulate-tpm: true\n    emulated-tpm-seed: 1\n")
	res, err := m.run(nil)
	if got := address(t, res, err); got != "192.168.122.150" {
		t.Fatalf("address %s", got)
	}
	if res.TPMHash != seed1Hash {
		t.Errorf("TPM hash %s, want %s", res.TPMHash, seed1Hash)
	}
	var inv []struct {
		Hash        string
		Annotations map[string]string
	}
	getJSON(t, rs.http.URL+"/admin/inventories", &inv)
	if len(inv) != 1 || inv[0].Hash != seed1Hash || inv[0].Annotations["elemental.cattle.io/auth"] != "emulated-tpm" {
		t.Errorf("server inventory %+v", inv)
	}
	t.Logf("cold: %d TPM commands, %d CreatePrimary, %d Create", res.TPM.Commands, res.TPM.CreatePrimary, res.TPM.Create)

	// The simulator starts empty at every open, so its primaries are made
	// again; the cached AK is loaded, not created.
	res, err = m.run(nil)
	if err != nil || !res.Updated || res.TPMHash != seed1Hash || res.TPM.Create != 0 {
		t.Errorf("warm run: %+v %v", res, err)
	}
	t.Logf("warm: %d TPM commands, %d CreatePrimary, %d Create", res.TPM.Commands, res.TPM.CreatePrimary, res.TPM.Create)
}
