package netpolicy

import (
	"bytes"
	"os/exec"
	"strings"
	"testing"
)

// TestUnescapeMatchesNetworkManager feeds each interface name to
// NetworkManager's own keyfile reader (nmcli --offline) and checks that the
// policy refuses exactly the names NetworkManager refuses or drops.
func TestUnescapeMatchesNetworkManager(t *testing.T) {
	nmcli, err := exec.LookPath("nmcli")
	if err != nil {
		t.Skip("needs nmcli (Debian network-manager) for nmcli --offline")
	}
	for _, raw := range []string{`eth0`, `eth0\s`, `eth0 `, `eth0\t`, `et\\h0`, `eth\;0`, `  eth0`, `eth\x41`, `eth0\`, `\seth0`, `a;b`} {
		kf := "[connection]\nid=x\nuuid=0f2e8c2e-6b1d-4a0e-9a8e-3b5c2d7f1a01\ntype=ethernet\ninterface-name=" + raw + "\n"
		cmd := exec.Command(nmcli, "--offline", "connection", "modify", "connection.autoconnect", "yes")
		cmd.Stdin = strings.NewReader(kf)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		runErr := cmd.Run()
		nmTakes := runErr == nil && strings.Contains(out.String(), "\ninterface-name=")
		err := (Policy{}).CheckKeyfiles([]Keyfile{{Label: "k", Name: "k.nmconnection", Content: []byte(kf)}})
		if nmTakes != (err == nil) {
			t.Errorf("interface-name=%s: NetworkManager takes it: %v (%v: %s); policy: %v", raw, nmTakes, runErr, out.String(), err)
		}
	}
}
