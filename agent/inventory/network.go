package inventory

import (
	"path"
	"strings"

	"github.com/jaypipes/ghw/pkg/net"

	"github.com/nodereg/nodereg/internal/host"
)

// The Network family's NICs are read from the run's snapshot into ghw's
// types with ghw 0.27's rules for a run without ethtool
// (pkg/net/net_linux.go): the MAC only when addr_assign_type is 0, speed
// and duplex from sysfs, the PCI address from the device's links.

func collectNICs(files host.FS) *net.Info {
	info := &net.Info{NICs: make([]*net.NIC, 0)}
	entries, err := files.ReadDir(host.SysClassNet)
	if err != nil {
		return info
	}
	for _, e := range entries {
		name := e.Name()
		if name == "lo" || name == "bonding_masters" {
			continue
		}
		dir := path.Join(host.SysClassNet, name)
		link, _ := files.Readlink(dir)
		mac := nicMAC(files, dir)
		info.NICs = append(info.NICs, &net.NIC{
			Name:         name,
			MACAddress:   mac,
			MacAddress:   mac,
			IsVirtual:    strings.Contains(link, "devices/virtual/net"),
			Capabilities: []*net.NICCapability{},
			Speed:        host.ReadAttr(files, path.Join(dir, "speed")),
			Duplex:       host.ReadAttr(files, path.Join(dir, "duplex")),
			PCIAddress:   nicPCIAddress(files, link),
		})
	}
	return info
}

// nicMAC is the permanent-looking MAC: "" when the kernel says it was
// not set from the hardware (addr_assign_type other than 0).
func nicMAC(files host.FS, dir string) string {
	aat, err := files.ReadFile(path.Join(dir, "addr_assign_type"), host.MaxAttr)
	if err != nil || strings.TrimSpace(string(aat)) != "0" {
		return ""
	}
	return host.ReadAttr(files, path.Join(dir, "address"))
}

// nicPCIAddress follows the interface's link to its device and the
// device's subsystem: the device's name when that is the PCI bus.
func nicPCIAddress(files host.FS, link string) *string {
	if link == "" {
		return nil
	}
	netDev := path.Join(host.SysClassNet, link)
	dest, err := files.Readlink(path.Join(netDev, "device"))
	if err != nil {
		return nil
	}
	dev := path.Join(netDev, dest)
	sub, err := files.Readlink(path.Join(dev, "subsystem"))
	if err != nil || !strings.HasSuffix(sub, "/bus/pci") {
		return nil
	}
	addr := path.Base(dev)
	return &addr
}
