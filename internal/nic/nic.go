// Package nic enumerates the machine's physical network cards and their
// permanent MAC addresses, with one rule for both users: the PLAIN mac
// identifier (agent/inventory) and the facts a bootstrap entry matches
// (bootstrap), so the two cannot disagree about a machine.
package nic

import (
	"fmt"
	"net"
	"path"
	"slices"
	"strings"

	"github.com/nodereg/nodereg/internal/host"
)

// permFunc reads a NIC's burnt-in address from the kernel.
type permFunc func(ifname string) (net.HardwareAddr, error)

// PermanentMACs returns the permanent MAC addresses of the physical NICs of
// the machine files is, lower case with colons, sorted, each once. A
// missing /sys/class/net is fs.ErrNotExist.
//
// On the live system each NIC's address comes from the kernel (Permanent),
// because /sys/class/net/*/address is the current address, which a bond, a
// team or a cloned-mac-address profile rewrites. Where the driver reports
// none, and always under a scratch root (whose sysfs is files, not
// devices), the sysfs address is taken only when addr_assign_type says it
// is permanent (0): random or stolen ones change or are shared. Loopback
// and interfaces under devices/virtual (veth, bridges, bonds) are skipped.
func PermanentMACs(files host.FS) ([]string, error) {
	var perm permFunc
	if host.Live(files) {
		perm = Permanent
	}
	return permanentMACs(files, perm)
}

func permanentMACs(files host.FS, perm permFunc) ([]string, error) {
	const dir = host.SysClassNet
	entries, err := files.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var macs []string
	for _, e := range entries {
		name := e.Name()
		if name == "lo" || name == "bonding_masters" {
			continue
		}
		if dest, err := files.Readlink(path.Join(dir, name)); err == nil && strings.Contains(dest, "devices/virtual/") {
			continue
		}
		mac := ""
		if perm != nil {
			if hw, err := perm(name); err == nil && !zero(hw) {
				mac = hw.String()
			}
		}
		if mac == "" && host.ReadAttr(files, path.Join(dir, name, "addr_assign_type")) == "0" {
			mac = host.ReadAttr(files, path.Join(dir, name, "address"))
		}
		if m, err := Normalise(mac); err == nil && m != "00:00:00:00:00:00" {
			macs = append(macs, m)
		}
	}
	slices.Sort(macs)
	return slices.Compact(macs), nil
}

func zero(hw net.HardwareAddr) bool {
	for _, b := range hw {
		if b != 0 {
			return false
		}
	}
	return true
}

// Normalise accepts the spellings admins copy from labels and tools
// (colons, dashes, upper case) for 6-byte Ethernet addresses.
func Normalise(s string) (string, error) {
	hw, err := net.ParseMAC(strings.TrimSpace(s))
	if err != nil || len(hw) != 6 {
		return "", fmt.Errorf("%q is not an Ethernet MAC address", s)
	}
	return hw.String(), nil
}
