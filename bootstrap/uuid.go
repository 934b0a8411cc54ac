package bootstrap

import (
	"strings"

	"github.com/nodereg/nodereg/apply"
	"github.com/nodereg/nodereg/internal/keyfile"
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
//
// The keyfiles are read and edited as NetworkManager reads them
// (internal/keyfile): only a '#' line is a comment, and a value is
// compared unescaped, in lower case.
func bootstrapUUIDs(kfs []apply.Keyfile) []apply.Keyfile {
	renamed := map[string]string{}
	for _, kf := range kfs {
		f, err := keyfile.Parse(kf.Content)
		if err != nil {
			continue // the plan's policy check refuses it
		}
		if old, err := f.String("connection", "uuid"); err == nil && old != "" {
			old = strings.ToLower(old)
			renamed[old] = nmstate.UUIDv5(bootstrapNamespace, "nodereg-bootstrap://"+old)
		}
	}
	if len(renamed) == 0 {
		return kfs
	}
	out := make([]apply.Keyfile, len(kfs))
	for i, kf := range kfs {
		kf.Content = keyfile.Rewrite(kf.Content, func(_, _, raw string) (string, bool) {
			v, err := keyfile.Unescape(raw)
			u, ok := renamed[strings.ToLower(v)]
			return u, ok && err == nil
		})
		out[i] = kf
	}
	return out
}
