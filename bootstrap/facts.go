package bootstrap

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path"
	"slices"
	"strings"

	"github.com/nodereg/nodereg/internal/host"
)

// Facts are what a static entry can match and what seeds a range's start:
// values that identify the hardware and do not change between boots.
type Facts struct {
	// MACs are the permanent MAC addresses of the physical NICs, lower
	// case with colons, sorted.
	MACs []string
	// Serial is the SMBIOS system serial number; "" when the firmware
	// leaves a placeholder there.
	Serial string
	// UUID is the SMBIOS system UUID, lower case; "" when unusable.
	UUID string
}

// Identity is the value a range's start offset is derived from: the system
// UUID, else the smallest permanent MAC, else the serial. It errors when
// the machine has none of them, since every such machine would start at
// the same address.
func (f Facts) Identity() (string, error) {
	switch {
	case f.UUID != "":
		return "uuid:" + f.UUID, nil
	case len(f.MACs) > 0:
		return "mac:" + slices.Min(f.MACs), nil
	case f.Serial != "":
		return "serial:" + f.Serial, nil
	}
	return "", errors.New("bootstrap: this machine has no system UUID, permanent MAC or serial to derive a range start from")
}

// String lists the facts for error messages and logs.
func (f Facts) String() string {
	macs := "none"
	if len(f.MACs) > 0 {
		macs = strings.Join(f.MACs, ",")
	}
	return fmt.Sprintf("mac=%s serial=%q uuid=%q", macs, f.Serial, f.UUID)
}

// permAddrFunc reads a NIC's burnt-in address from the kernel.
type permAddrFunc func(ifname string) (net.HardwareAddr, error)

// ReadFacts reads the facts of the machine files reaches (the agent's --root;
// host.Root("/") for the real system).
//
// MACs: on the real system each NIC's permanent address comes from the
// kernel (the ETHTOOL_GPERMADDR ioctl), because /sys/class/net/*/address
// is the current address, which a bond, a team or a cloned-mac-address
// profile rewrites. Where the driver reports none, and always under a
// scratch root (whose sysfs is files, not devices), the sysfs address is
// taken only when addr_assign_type says it is permanent (0). Interfaces
// under devices/virtual (veth, bridges, bonds) are skipped: their MACs are
// random or borrowed, as for the PLAIN mac identifier.
func ReadFacts(files host.FS) (Facts, error) {
	var perm permAddrFunc
	if files.Path("/") == "/" {
		perm = permanentMAC
	}
	return readFacts(files, perm)
}

func readFacts(files host.FS, perm permAddrFunc) (Facts, error) {
	var f Facts
	const dir = host.SysClassNet
	entries, err := files.ReadDir(dir)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return f, fmt.Errorf("bootstrap: reading %s: %w", files.Path(dir), err)
	}
	for _, e := range entries {
		name := e.Name()
		if name == "lo" || name == "bonding_masters" {
			continue
		}
		if dest, err := os.Readlink(files.Path(path.Join(dir, name))); err == nil && strings.Contains(dest, "devices/virtual/") {
			continue
		}
		mac := ""
		if perm != nil {
			if hw, err := perm(name); err == nil && !zeroMAC(hw) {
				mac = hw.String()
			}
		}
		if mac == "" && readTrim(files, path.Join(dir, name, "addr_assign_type")) == "0" {
			mac = readTrim(files, path.Join(dir, name, "address"))
		}
		if m, err := normaliseMAC(mac); err == nil && m != "00:00:00:00:00:00" {
			f.MACs = append(f.MACs, m)
		}
	}
	slices.Sort(f.MACs)
	f.MACs = slices.Compact(f.MACs)
	const dmi = host.DMIIDDir
	f.Serial = usableDMI(readTrim(files, path.Join(dmi, "product_serial")))
	f.UUID = strings.ToLower(usableDMI(readTrim(files, path.Join(dmi, "product_uuid"))))
	return f, nil
}

// usableDMI drops what firmware writes when it has no value: such a value
// is shared by many machines and would make one static entry match them all.
func usableDMI(v string) string {
	switch strings.ToLower(v) {
	case "", "0", "none", "unspecified", "not specified", "not available", "not applicable",
		"default string", "to be filled by o.e.m.", "system serial number", "0123456789",
		"00000000-0000-0000-0000-000000000000", "ffffffff-ffff-ffff-ffff-ffffffffffff",
		"03000200-0400-0500-0006-000700080009":
		return ""
	}
	return v
}

// maxSysfsValue bounds one sysfs attribute read (a page at most).
const maxSysfsValue = 64 << 10

func readTrim(files host.FS, p string) string {
	b, err := files.ReadFile(p, maxSysfsValue)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

func zeroMAC(hw net.HardwareAddr) bool {
	for _, b := range hw {
		if b != 0 {
			return false
		}
	}
	return true
}

// normaliseMAC accepts the spellings admins copy from labels and tools
// (colons, dashes, upper case) for 6-byte Ethernet addresses.
func normaliseMAC(s string) (string, error) {
	hw, err := net.ParseMAC(strings.TrimSpace(s))
	if err != nil || len(hw) != 6 {
		return "", fmt.Errorf("%q is not an Ethernet MAC address", s)
	}
	return hw.String(), nil
}
