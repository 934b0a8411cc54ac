package apply

import (
	"strings"
	"testing"
)

// FuzzParseGC: nmstatectl's output is trusted no more than the server's.
// Accepted keyfiles have names that stay in the keyfile directory, are
// unique, and parse as keyfiles.
func FuzzParseGC(f *testing.F) {
	// The two encodings nmstatectl gc produces (docs/apply.md: block or
	// double-quoted).
	f.Add([]byte("NetworkManager:\n- - eth0.nmconnection\n  - |\n    [connection]\n    id=eth0\n    type=ethernet\n    interface-name=eth0\n\n    [ipv4]\n    address0=192.168.122.150/24\n    method=manual\n"))
	f.Add([]byte("NetworkManager:\n- - eth0.nmconnection\n  - \"[connection]\n\n    id=eth0\n\n    type=ethernet\n\n    \"\n- - bond0.nmconnection\n  - \"[connection]\n\n    id=bond0\n\n    type=bond\n\n    \"\n"))
	f.Add([]byte("NetworkManager: []\n"))
	f.Add([]byte("NetworkManager:\n- - ../../etc/passwd\n  - \"[connection]\\nid=x\\n\"\n"))
	f.Add([]byte("NetworkManager:\n- [a.nmconnection, \"[connection]\\n\", extra]\n"))
	f.Fuzz(func(t *testing.T, out []byte) {
		kfs, err := parseGC(out)
		if err != nil {
			if !strings.Contains(err.Error(), "nmstatectl gc output") {
				t.Fatalf("error does not name the gc output: %v", err)
			}
			return
		}
		seen := map[string]bool{}
		for _, kf := range kfs {
			if err := checkFileName("fuzz", kf.Name); err != nil {
				t.Fatalf("accepted bad keyfile name %q: %v", kf.Name, err)
			}
			if seen[kf.Name] {
				t.Fatalf("accepted duplicate keyfile %q", kf.Name)
			}
			seen[kf.Name] = true
			if err := ParseKeyfile(kf.Name, kf.Content); err != nil {
				t.Fatalf("accepted keyfile %s that does not parse: %v", kf.Name, err)
			}
		}
	})
}
