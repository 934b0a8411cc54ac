package nmstate

import (
	"bytes"
	"crypto/sha1"
	"fmt"
	"slices"
)

// section is one [name] block of a keyfile. nmstate's own keyfile writer
// (not NetworkManager's) sorts keys byte-wise, skips keys whose value is
// empty but always writes the header.
type section struct {
	name string
	keys map[string]string
}

func newSection(name string) *section { return &section{name: name, keys: map[string]string{}} }

func (s *section) set(k, v string) { s.keys[k] = v }

// sectionOrder is the order nmstate writes the sections this translator
// produces (nm_dbus/gen_conf/conn.rs).
var sectionOrder = []string{"connection", "bond", "bond-port", "bridge", "bridge-port", "ipv4", "ipv6", "ethernet",
	"vlan", "vxlan", "sriov", "vrf", "veth", "user", "ethtool", "infiniband"}

func render(secs []*section) []byte {
	slices.SortStableFunc(secs, func(a, b *section) int {
		return slices.Index(sectionOrder, a.name) - slices.Index(sectionOrder, b.name)
	})
	var buf bytes.Buffer
	for i, s := range secs {
		if i > 0 {
			buf.WriteByte('\n')
		}
		fmt.Fprintf(&buf, "[%s]\n", s.name)
		keys := make([]string, 0, len(s.keys))
		for k, v := range s.keys {
			if v != "" {
				keys = append(keys, k)
			}
		}
		slices.Sort(keys)
		for _, k := range keys {
			buf.WriteString(k)
			buf.WriteByte('=')
			buf.WriteString(s.keys[k])
			buf.WriteByte('\n')
		}
	}
	return buf.Bytes()
}

// namespaceURL is RFC 4122's name space for URLs, the one nmstate uses.
var namespaceURL = [16]byte{0x6b, 0xa7, 0xb8, 0x11, 0x9d, 0xad, 0x11, 0xd1, 0x80, 0xb4, 0x00, 0xc0, 0x4f, 0xd4, 0x30, 0xc8}

// UUIDv5 is RFC 4122's name-based (SHA-1) UUID, as nmstate derives profile ids.
func UUIDv5(ns [16]byte, name string) string {
	h := sha1.New()
	h.Write(ns[:])
	h.Write([]byte(name))
	u := h.Sum(nil)[:16]
	u[6] = (u[6] & 0x0f) | 0x50
	u[8] = (u[8] & 0x3f) | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", u[0:4], u[4:6], u[6:8], u[8:10], u[10:16])
}
