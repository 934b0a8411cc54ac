package inventory

import (
	"encoding/json"
	"net/netip"
	"strconv"
	"strings"

	"github.com/jaypipes/ghw/pkg/block"
	"github.com/jaypipes/ghw/pkg/cpu"
	"github.com/jaypipes/ghw/pkg/gpu"
	"github.com/jaypipes/ghw/pkg/memory"
	"github.com/jaypipes/ghw/pkg/net"
)

// systemDataV2 builds the MsgSystemDataV2 map (docs/protocol.md §5.2). A family
// whose module failed is left out of the top level (a template that needs it
// then fails to resolve on the server, instead of resolving to a made-up
// value); its "System Data" subtree is {} as upstream's legacy builder does.
func systemDataV2(h *ghwHost) map[string]any {
	out := map[string]any{}
	if p := h.Product; p != nil {
		out["Product"] = map[string]any{
			"Family": p.Family, "Name": p.Name, "Vendor": p.Vendor, "SerialNumber": p.SerialNumber,
			"UUID": p.UUID, "SKU": p.SKU, "Version": p.Version,
		}
	}
	if b := h.BIOS; b != nil {
		out["BIOS"] = map[string]any{"Vendor": b.Vendor, "Version": b.Version, "Date": b.Date}
	}
	if b := h.Baseboard; b != nil {
		out["BaseBoard"] = map[string]any{
			"AssetTag": b.AssetTag, "SerialNumber": b.SerialNumber, "Vendor": b.Vendor,
			"Version": b.Version, "Product": b.Product,
		}
	}
	if c := h.Chassis; c != nil {
		out["Chassis"] = map[string]any{
			"AssetTag": c.AssetTag, "SerialNumber": c.SerialNumber, "Type": c.Type,
			"TypeDescription": c.TypeDescription, "Vendor": c.Vendor, "Version": c.Version,
		}
	}
	if m := h.Memory; m != nil {
		out["Memory"] = memoryLabels(m)
	}
	if c := h.CPU; c != nil {
		out["CPU"] = cpuLabels(c)
	}
	if g := h.GPU; g != nil {
		out["GPU"] = gpuLabels(g)
	}
	if n := h.Network; n != nil {
		nics := map[string]any{}
		for i, nic := range n.NICs {
			m := nicLabels(nic, h.addrs[nic.Name])
			nics[strconv.Itoa(i)] = m
			nics[nic.Name] = copyMap(m)
		}
		out["Network"] = map[string]any{"TotalNICs": strconv.Itoa(len(n.NICs)), "NICs": nics}
	}
	if b := h.Block; b != nil {
		out["Storage"] = storageLabels(b)
	}
	if r := h.Runtime; r != nil {
		out["Runtime"] = map[string]any{"Hostname": r.Hostname}
	}
	out["System Data"] = legacyLabels(h)
	return out
}

// memoryLabels are the Memory family's labels.
func memoryLabels(m *memory.Info) map[string]any {
	sizes := make([]string, len(m.SupportedPageSizes))
	for i, s := range m.SupportedPageSizes {
		sizes[i] = strconv.FormatUint(s, 10)
	}
	var modules any = ""
	if len(m.Modules) > 0 {
		mods := map[string]any{}
		for i, mod := range m.Modules {
			mods[strconv.Itoa(i)] = map[string]any{
				"Label": mod.Label, "Location": mod.Location, "SerialNumber": mod.SerialNumber,
				"SizeBytes": strconv.FormatInt(mod.SizeBytes, 10), "Vendor": mod.Vendor,
			}
		}
		modules = mods
	}
	return map[string]any{
		"TotalPhysicalBytes": strconv.FormatInt(m.TotalPhysicalBytes, 10),
		"TotalUsableBytes":   strconv.FormatInt(m.TotalUsableBytes, 10),
		"SupportedPageSizes": strings.Join(sizes, ", "),
		"Modules":            modules,
	}
}

// cpuLabels are the CPU family's labels; the first processor's are
// copied to Processor, as upstream does.
func cpuLabels(c *cpu.Info) map[string]any {
	procs := map[string]any{}
	cpuMap := map[string]any{
		"TotalCores":      strconv.FormatUint(uint64(c.TotalCores), 10),
		"TotalThreads":    strconv.FormatUint(uint64(c.TotalHardwareThreads), 10),
		"TotalProcessors": strconv.Itoa(len(c.Processors)),
		"Processors":      procs,
	}
	for i, p := range c.Processors {
		m := map[string]any{
			"Capabilities": strings.Join(p.Capabilities, ","),
			"ID":           strconv.Itoa(p.ID),
			"Model":        p.Model,
			"NumCores":     strconv.FormatUint(uint64(p.TotalCores), 10),
			"NumThreads":   strconv.FormatUint(uint64(p.TotalHardwareThreads), 10),
			"Vendor":       p.Vendor,
		}
		procs[strconv.Itoa(i)] = m
		if i == 0 {
			cpuMap["Processor"] = copyMap(m)
		}
	}
	return cpuMap
}

// gpuLabels are the GPU family's labels.
func gpuLabels(g *gpu.Info) map[string]any {
	gm := map[string]any{}
	if len(g.GraphicsCards) > 0 {
		cards := map[string]any{}
		for i, c := range g.GraphicsCards {
			m := map[string]any{}
			if d := c.DeviceInfo; d != nil {
				m["Driver"] = d.Driver
				// Names come from the PCI ID database; without it they
				// are left out rather than sent as IDs.
				if d.Product != nil && d.Product.Name != "" {
					m["ProductName"] = d.Product.Name
				}
				if d.Vendor != nil && d.Vendor.Name != "" {
					m["VendorName"] = d.Vendor.Name
				}
			}
			cards[strconv.Itoa(i)] = m
			if i == 0 {
				// Upstream copies the first card's fields into
				// GraphicsCards itself; servers' templates may use them.
				for k, v := range m {
					cards[k] = v
				}
			}
		}
		gm["TotalCards"] = strconv.Itoa(len(g.GraphicsCards))
		gm["GraphicsCards"] = cards
	}
	return gm
}

// storageLabels are the Storage family's labels, by index and by name.
func storageLabels(b *block.Info) map[string]any {
	disks := map[string]any{}
	for i, d := range b.Disks {
		m := map[string]any{
			"Size":              strconv.FormatUint(d.SizeBytes, 10),
			"Name":              d.Name,
			"DriveType":         d.DriveType.String(),
			"StorageController": d.StorageController.String(),
			"Removable":         strconv.FormatBool(d.IsRemovable),
			"Model":             d.Model,
		}
		disks[strconv.Itoa(i)] = m
		disks[d.Name] = copyMap(m)
	}
	return map[string]any{"TotalDisks": strconv.Itoa(len(b.Disks)), "Disks": disks}
}

func nicLabels(nic *net.NIC, addrs []netip.Addr) map[string]any {
	v4, v6 := map[string]any{}, map[string]any{}
	first4, first6 := "", ""
	for _, a := range addrs {
		if a.Is4() {
			if len(v4) == 0 {
				first4 = a.String()
			}
			v4[strconv.Itoa(len(v4))] = a.String()
		} else {
			if len(v6) == 0 {
				first6 = a.String()
			}
			v6[strconv.Itoa(len(v6))] = a.String()
		}
	}
	var pci any // JSON null when the NIC is not on a PCI bus, as upstream sends
	if nic.PCIAddress != nil {
		pci = *nic.PCIAddress
	}
	return map[string]any{
		"AdvertisedLinkModes": strings.Join(nic.AdvertisedLinkModes, ","),
		"Duplex":              knownOrEmpty(nic.Duplex),
		"IsVirtual":           strconv.FormatBool(nic.IsVirtual),
		"IPv4Address":         first4,
		"IPv4Addresses":       v4,
		"IPv6Address":         first6,
		"IPv6Addresses":       v6,
		"MacAddress":          nic.MACAddress,
		"Name":                nic.Name,
		"PCIAddress":          pci,
		"Speed":               knownOrEmpty(nic.Speed),
		"SupportedLinkModes":  strings.Join(nic.SupportedLinkModes, ","),
		"SupportedPorts":      strings.Join(nic.SupportedPorts, ","),
	}
}

// knownOrEmpty blanks ethtool's "Unknown!" placeholders, as upstream does.
func knownOrEmpty(s string) string {
	if strings.HasPrefix(s, "Unknown!") {
		return ""
	}
	return s
}

// legacyLabels is the "System Data" tree old servers derived themselves.
func legacyLabels(h *ghwHost) map[string]any {
	mem, cpuM, gpuM, netM, blk, rt := map[string]any{}, map[string]any{}, map[string]any{}, map[string]any{}, map[string]any{}, map[string]any{}
	if m := h.Memory; m != nil {
		mem["Total Physical Bytes"] = strconv.FormatInt(m.TotalPhysicalBytes, 10)
		mem["Total Usable Bytes"] = strconv.FormatInt(m.TotalUsableBytes, 10)
	}
	if c := h.CPU; c != nil {
		// Zero counts (seen on some arm64 boards) are left out, as upstream does.
		if c.TotalCores > 0 {
			cpuM["Total Cores"] = strconv.FormatUint(uint64(c.TotalCores), 10)
		}
		if c.TotalHardwareThreads > 0 {
			cpuM["Total Threads"] = strconv.FormatUint(uint64(c.TotalHardwareThreads), 10)
		}
		if len(c.Processors) > 0 {
			p := c.Processors[0]
			cpuM["Model"] = p.Model
			cpuM["Vendor"] = p.Vendor
			caps := p.Capabilities
			if caps == nil {
				caps = []string{}
			}
			cpuM["Capabilities"] = caps
		}
	}
	if g := h.GPU; g != nil && len(g.GraphicsCards) > 0 && g.GraphicsCards[0].DeviceInfo != nil {
		d := g.GraphicsCards[0].DeviceInfo
		if d.Product != nil && d.Product.Name != "" {
			gpuM["Model"] = d.Product.Name
		}
		if d.Vendor != nil && d.Vendor.Name != "" {
			gpuM["Vendor"] = d.Vendor.Name
		}
	}
	if n := h.Network; n != nil {
		netM["Number Interfaces"] = strconv.Itoa(len(n.NICs))
		for _, nic := range n.NICs {
			netM[nic.Name] = map[string]any{
				"Name": nic.Name, "MacAddress": nic.MACAddress, "IsVirtual": strconv.FormatBool(nic.IsVirtual),
			}
		}
	}
	if b := h.Block; b != nil {
		blk["Number Devices"] = strconv.Itoa(len(b.Disks))
		for _, d := range b.Disks {
			blk[d.Name] = map[string]any{
				"Size":               strconv.FormatUint(d.SizeBytes, 10),
				"Name":               d.Name,
				"Drive Type":         d.DriveType.String(),
				"Storage Controller": d.StorageController.String(),
				"Removable":          strconv.FormatBool(d.IsRemovable),
			}
		}
	}
	if r := h.Runtime; r != nil {
		rt["Hostname"] = r.Hostname
	}
	return map[string]any{
		"Memory": mem, "CPU": cpuM, "GPU": gpuM, "Network": netM, "Block Devices": blk, "Runtime": rt,
	}
}

// legacySystemData encodes ghw's host info as servers v1.1.1–v1.6.2 expect
// (docs/protocol.md §5.3). Disks with enum values those servers' ghw does not know
// are dropped, because they close the connection on them.
func legacySystemData(h *ghwHost) (json.RawMessage, error) {
	c := *h
	if h.Block != nil {
		b := *h.Block
		b.Disks = nil
		b.Partitions = nil
		for _, d := range h.Block.Disks {
			if d.DriveType == block.DriveTypeVirtual || d.StorageController == block.StorageControllerLoop {
				continue
			}
			b.Disks = append(b.Disks, d)
			b.Partitions = append(b.Partitions, d.Partitions...)
		}
		if b.Disks == nil {
			b.Disks = []*block.Disk{}
		}
		c.Block = &b
	}
	return json.Marshal(&c)
}

func copyMap(m map[string]any) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}
