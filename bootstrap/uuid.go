package bootstrap

import (
	"strings"

	"github.com/nodereg/nodereg/apply"
	"github.com/nodereg/nodereg/nmstate"
)

// bootstrapNamespace is the RFC 4122 name space (URL) the bootstrap
// profiles' UUIDs are derived in.
var bootstrapNamespace = [16]byte{0x6b, 0xa7, 0xb8, 0x11, 0x9d, 0xad, 0x11, 0xd1, 0x80, 0xb4, 0x00, 0xc0, 0x4f, 0xd4, 0x30, 0xc8}

// bootstrapUUIDs gives every bootstrap keyfile that names a
// connection.uuid a UUID of its own, derived from the one it had, and
// rewrites the values that referred to the old one (master=, parent=,
// controller= of the other bootstrap keyfiles). An nmstate template's
// keyfile carries a UUID derived from the interface alone, so a bootstrap
// profile and the IPAM profile for the same NIC would share it (as would
// two nmconnections templates copied with their uuid= line); NetworkManager
// then shows only the /run file for that UUID, never loads the IPAM keyfile
// under /etc, and the live apply fails every run. A keyfile without a
// uuid= gets one NetworkManager derives from its path, distinct already.
func bootstrapUUIDs(kfs []apply.Keyfile) []apply.Keyfile {
	renamed := map[string]string{}
	for _, kf := range kfs {
		section := ""
		for _, line := range strings.Split(string(kf.Content), "\n") {
			t := strings.TrimSpace(line)
			if strings.HasPrefix(t, "[") && strings.HasSuffix(t, "]") {
				section = t[1 : len(t)-1]
				continue
			}
			k, v, ok := strings.Cut(t, "=")
			if ok && section == "connection" && strings.TrimSpace(k) == "uuid" {
				old := strings.ToLower(strings.TrimSpace(v))
				if old != "" {
					renamed[old] = nmstate.UUIDv5(bootstrapNamespace, "nodereg-bootstrap://"+old)
				}
			}
		}
	}
	if len(renamed) == 0 {
		return kfs
	}
	out := make([]apply.Keyfile, len(kfs))
	for i, kf := range kfs {
		lines := strings.Split(string(kf.Content), "\n")
		for j, line := range lines {
			if strings.HasPrefix(strings.TrimSpace(line), "#") {
				continue
			}
			k, v, ok := strings.Cut(line, "=")
			if !ok {
				continue
			}
			if u, ok := renamed[strings.ToLower(strings.TrimSpace(v))]; ok {
				lines[j] = k + "=" + u
			}
		}
		kf.Content = []byte(strings.Join(lines, "\n"))
		out[i] = kf
	}
	return out
}
