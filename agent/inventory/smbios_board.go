package inventory

import (
	"encoding/binary"
	"fmt"
	"strconv"
)

var biosChars = map[int]string{
	4: "ISA is supported", 5: "MCA is supported", 6: "EISA is supported", 7: "PCI is supported",
	8: "PC Card (PCMCIA) is supported", 9: "PNP is supported", 10: "APM is supported",
	11: "BIOS is upgradeable", 12: "BIOS shadowing is allowed", 13: "VLB is supported",
	14: "ESCD support is available", 15: "Boot from CD is supported", 16: "Selectable boot is supported",
	17: "BIOS ROM is socketed", 18: "Boot from PC Card (PCMCIA) is supported", 19: "EDD is supported",
	20: "Japanese floppy for NEC 9800 1.2 MB is supported (int 13h)",
	21: "Japanese floppy for Toshiba 1.2 MB is supported (int 13h)",
	22: "5.25\"/360 kB floppy services are supported (int 13h)",
	23: "5.25\"/1.2 MB floppy services are supported (int 13h)",
	24: "3.5\"/720 kB floppy services are supported (int 13h)",
	25: "3.5\"/2.88 MB floppy services are supported (int 13h)",
	26: "Print screen service is supported (int 5h)", 27: "8042 keyboard services are supported (int 9h)",
	28: "Serial services are supported (int 14h)", 29: "Printer services are supported (int 17h)",
	30: "CGA/mono video services are supported (int 10h)", 31: "NEC PC-98",
}

var biosCharsExt1 = map[int]string{
	0: "ACPI is supported", 1: "USB legacy is supported", 2: "AGP is supported", 3: "I2O boot is supported",
	4: "LS-120 boot is supported", 5: "ATAPI Zip drive boot is supported", 6: "IEEE 1394 boot is supported",
	7: "Smart battery is supported",
}

var biosCharsExt2 = map[int]string{
	0: "BIOS boot specification is supported", 1: "Function key-initiated network boot is supported",
	2: "Targeted content distribution is supported", 3: "UEFI is supported", 4: "System is a virtual machine",
}

func (s *dmiStruct) bios() []field {
	if !s.has(0x12) {
		return nil
	}
	f := []field{kv("Vendor", s.str(0x04)), kv("Version", s.str(0x05)), kv("Release Date", s.str(0x08))}
	if seg := s.word(0x06); seg != 0 {
		f = append(f, kv("Address", fmt.Sprintf("0x%04X0", seg)))
		size := (0x10000 - uint32(seg)) << 4
		if size&0x3FF != 0 {
			f = append(f, kv("Runtime Size", fmt.Sprintf("%d bytes", size)))
		} else {
			f = append(f, kv("Runtime Size", fmt.Sprintf("%d kB", size>>10)))
		}
	}
	if rom := s.byte(0x09); rom == 0xFF && s.has(0x1A) {
		ext := s.word(0x18)
		unit := []string{"MB", "GB"}[min(int(ext>>14), 1)]
		f = append(f, kv("ROM Size", fmt.Sprintf("%d %s", ext&0x3FFF, unit)))
	} else {
		f = append(f, kv("ROM Size", fmt.Sprintf("%d kB", (int(rom)+1)*64)))
	}
	var chars []string
	c := binary.LittleEndian.Uint64(s.data[0x0A:])
	if c&(1<<3) != 0 {
		chars = append(chars, "BIOS characteristics not supported")
	} else {
		chars = append(chars, bits(c, biosChars)...)
	}
	if s.has(0x13) {
		chars = append(chars, bits(uint64(s.byte(0x12)), biosCharsExt1)...)
	}
	if s.has(0x14) {
		chars = append(chars, bits(uint64(s.byte(0x13)), biosCharsExt2)...)
	}
	f = append(f, list("Characteristics", chars))
	if s.has(0x18) {
		if s.byte(0x14) != 0xFF && s.byte(0x15) != 0xFF {
			f = append(f, kv("BIOS Revision", fmt.Sprintf("%d.%d", s.byte(0x14), s.byte(0x15))))
		}
		if s.byte(0x16) != 0xFF && s.byte(0x17) != 0xFF {
			f = append(f, kv("Firmware Revision", fmt.Sprintf("%d.%d", s.byte(0x16), s.byte(0x17))))
		}
	}
	return f
}

var wakeUpTypes = []string{"Other", "Unknown", "APM Timer", "Modem Ring", "LAN Remote", "Power Switch", "PCI PME#", "AC Power Restored"}

func (s *dmiStruct) system() []field {
	if !s.has(0x08) {
		return nil
	}
	f := []field{kv("Manufacturer", s.str(0x04)), kv("Product Name", s.str(0x05)),
		kv("Version", s.str(0x06)), kv("Serial Number", s.str(0x07))}
	if !s.has(0x19) {
		return f
	}
	f = append(f, kv("UUID", s.uuid(s.data[0x08:0x18])))
	if w := s.byte(0x18); w == 0 {
		f = append(f, kv("Wake-up Type", "Reserved"))
	} else {
		f = append(f, kv("Wake-up Type", enum(wakeUpTypes, int(w))))
	}
	if s.has(0x1B) {
		f = append(f, kv("SKU Number", s.str(0x19)), kv("Family", s.str(0x1A)))
	}
	return f
}

// uuid formats the system UUID; from SMBIOS 2.6 on its first three fields
// are little-endian.
func (s *dmiStruct) uuid(p []byte) string {
	allFF, all0 := true, true
	for _, c := range p {
		allFF = allFF && c == 0xFF
		all0 = all0 && c == 0
	}
	switch {
	case allFF:
		return "Not Present"
	case all0:
		return "Not Settable"
	}
	if s.ver.atLeast(2, 6) {
		return fmt.Sprintf("%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
			p[3], p[2], p[1], p[0], p[5], p[4], p[7], p[6], p[8], p[9], p[10], p[11], p[12], p[13], p[14], p[15])
	}
	return fmt.Sprintf("%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
		p[0], p[1], p[2], p[3], p[4], p[5], p[6], p[7], p[8], p[9], p[10], p[11], p[12], p[13], p[14], p[15])
}

var boardFeatures = map[int]string{
	0: "Board is a hosting board", 1: "Board requires at least one daughter board",
	2: "Board is removable", 3: "Board is replaceable", 4: "Board is hot swappable",
}

var boardTypes = []string{"Unknown", "Other", "Server Blade", "Connectivity Switch", "System Management Module",
	"Processor Module", "I/O Module", "Memory Module", "Daughter Board", "Motherboard",
	"Processor+Memory Module", "Processor+I/O Module", "Interconnect Board"}

func (s *dmiStruct) baseBoard() []field {
	if !s.has(0x08) {
		return nil
	}
	f := []field{kv("Manufacturer", s.str(0x04)), kv("Product Name", s.str(0x05)),
		kv("Version", s.str(0x06)), kv("Serial Number", s.str(0x07))}
	if s.has(0x09) {
		f = append(f, kv("Asset Tag", s.str(0x08)))
	}
	if s.has(0x0A) {
		if feat := s.byte(0x09) & 0x1F; feat == 0 {
			f = append(f, kv("Features", "None"))
		} else {
			f = append(f, list("Features", bits(uint64(feat), boardFeatures)))
		}
	}
	if s.has(0x0E) {
		f = append(f, kv("Location In Chassis", s.str(0x0A)),
			kv("Chassis Handle", fmt.Sprintf("0x%04X", s.word(0x0B))),
			kv("Type", enum(boardTypes, int(s.byte(0x0D)))))
	}
	if s.has(0x0F) {
		n := int(s.byte(0x0E))
		var handles []string
		for i := 0; i < n && s.has(0x0F+2*i+2); i++ {
			handles = append(handles, fmt.Sprintf("0x%04X", s.word(0x0F+2*i)))
		}
		// dmidecode prints the handles under the count, and its parser
		// then keeps the handles in place of the count.
		f = append(f, field{key: "Contained Object Handles", value: strconv.Itoa(n), items: handles})
	}
	return f
}

var chassisTypes = []string{"Other", "Unknown", "Desktop", "Low Profile Desktop", "Pizza Box", "Mini Tower",
	"Tower", "Portable", "Laptop", "Notebook", "Hand Held", "Docking Station", "All In One", "Sub Notebook",
	"Space-saving", "Lunch Box", "Main Server Chassis", "Expansion Chassis", "Sub Chassis",
	"Bus Expansion Chassis", "Peripheral Chassis", "RAID Chassis", "Rack Mount Chassis", "Sealed-case PC",
	"Multi-system", "CompactPCI", "AdvancedTCA", "Blade", "Blade Enclosing", "Tablet", "Convertible",
	"Detachable", "IoT Gateway", "Embedded PC", "Mini PC", "Stick PC"}

var chassisStates = []string{"Other", "Unknown", "Safe", "Warning", "Critical", "Non-recoverable"}

var chassisSecurity = []string{"Other", "Unknown", "None", "External Interface Locked Out", "External Interface Enabled"}

func (s *dmiStruct) chassis() []field {
	if !s.has(0x09) {
		return nil
	}
	lock := "Not Present"
	if s.byte(0x05)&0x80 != 0 {
		lock = "Present"
	}
	f := []field{kv("Manufacturer", s.str(0x04)), kv("Type", enum(chassisTypes, int(s.byte(0x05)&0x7F))),
		kv("Lock", lock), kv("Version", s.str(0x06)), kv("Serial Number", s.str(0x07)), kv("Asset Tag", s.str(0x08))}
	if s.has(0x0D) {
		f = append(f, kv("Boot-up State", enum(chassisStates, int(s.byte(0x09)))),
			kv("Power Supply State", enum(chassisStates, int(s.byte(0x0A)))),
			kv("Thermal State", enum(chassisStates, int(s.byte(0x0B)))),
			kv("Security Status", enum(chassisSecurity, int(s.byte(0x0C)))))
	}
	if s.has(0x11) {
		f = append(f, kv("OEM Information", fmt.Sprintf("0x%08X", s.dword(0x0D))))
	}
	if s.has(0x13) {
		h := "Unspecified"
		if v := s.byte(0x11); v != 0 {
			h = fmt.Sprintf("%d U", v)
		}
		cords := "Unspecified"
		if v := s.byte(0x12); v != 0 {
			cords = strconv.Itoa(int(v))
		}
		f = append(f, kv("Height", h), kv("Number Of Power Cords", cords))
	}
	if s.has(0x15) {
		n, reclen := int(s.byte(0x13)), int(s.byte(0x14))
		f = append(f, kv("Contained Elements", strconv.Itoa(n)))
		if sku := 0x15 + n*reclen; s.has(sku + 1) {
			f = append(f, kv("SKU Number", s.str(sku)))
		}
	}
	return f
}
