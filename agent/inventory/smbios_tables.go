package inventory

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/nodereg/nodereg/internal/host"
)

// The DMI tables the kernel exports: the entry point says which SMBIOS
// version the table follows, DMI holds the structures.
const (
	dmiEntryPoint = host.DMIEntry
	dmiTable      = host.DMITable
	dmiIDDir      = host.DMIIDDir
)

// sysfsSMBIOS builds the SMBIOS map without dmidecode: from the raw DMI
// tables when the kernel exports them (readable by root only), else from
// the per-field files of /sys/class/dmi/id.
func sysfsSMBIOS(root string) (map[string]any, error) {
	table, tErr := os.ReadFile(host.Root(root).Path(dmiTable))
	if tErr == nil {
		ver := smbiosVersion{2, 0}
		if ep, err := os.ReadFile(host.Root(root).Path(dmiEntryPoint)); err == nil {
			ver = parseEntryPoint(ep)
		}
		return ParseDmidecode(decodeDMITable(table, ver))
	}
	m, idErr := dmiIDSMBIOS(root)
	if idErr == nil {
		return m, nil
	}
	return nil, fmt.Errorf("no SMBIOS source: %s: %w; %s: %w", dmiTable, tErr, dmiIDDir, idErr)
}

type smbiosVersion struct{ major, minor int }

func (v smbiosVersion) atLeast(major, minor int) bool {
	return v.major > major || v.major == major && v.minor >= minor
}

func parseEntryPoint(ep []byte) smbiosVersion {
	switch {
	case len(ep) >= 9 && string(ep[:5]) == "_SM3_":
		return smbiosVersion{int(ep[7]), int(ep[8])}
	case len(ep) >= 8 && string(ep[:4]) == "_SM_":
		return smbiosVersion{int(ep[6]), int(ep[7])}
	}
	return smbiosVersion{2, 0}
}

// decodeDMITable renders the SMBIOS structures we send (types 0, 1, 2, 3, 4,
// 11 and 17) as dmidecode prints them, so that ParseDmidecode gives the same
// sections and field names whichever source was used. Fields that need
// tables we do not carry (processor family names beyond the common ones,
// CPU signature and flags) are left out.
func decodeDMITable(table []byte, ver smbiosVersion) []byte {
	var b strings.Builder
	for off := 0; off+4 <= len(table); {
		typ, length := table[off], int(table[off+1])
		handle := binary.LittleEndian.Uint16(table[off+2:])
		if length < 4 || off+length > len(table) {
			break // a broken structure: the rest cannot be located
		}
		// Strings follow the formatted area up to a double NUL.
		end := off + length
		for end+1 < len(table) && (table[end] != 0 || table[end+1] != 0) {
			end++
		}
		s := &dmiStruct{data: table[off : off+length], strings: splitDMIStrings(table[off+length : min(end, len(table))]), ver: ver}
		if title, fields := s.decode(typ); title != "" {
			fmt.Fprintf(&b, "Handle 0x%04X, DMI type %d, %d bytes\n%s\n", handle, typ, length, title)
			for _, f := range fields {
				b.WriteString(f)
				b.WriteByte('\n')
			}
			b.WriteByte('\n')
		}
		if typ == 127 {
			break
		}
		off = end + 2
	}
	return []byte(b.String())
}

func splitDMIStrings(area []byte) []string {
	if len(area) == 0 {
		return nil
	}
	return strings.Split(string(area), "\x00")
}

type dmiStruct struct {
	data    []byte
	strings []string
	ver     smbiosVersion
}

func (s *dmiStruct) has(n int) bool { return len(s.data) >= n }
func (s *dmiStruct) byte(off int) byte {
	return s.data[off]
}
func (s *dmiStruct) word(off int) uint16 { return binary.LittleEndian.Uint16(s.data[off:]) }
func (s *dmiStruct) dword(off int) uint32 {
	return binary.LittleEndian.Uint32(s.data[off:])
}

// str resolves a string reference as dmidecode prints it.
func (s *dmiStruct) str(off int) string {
	i := int(s.data[off])
	switch {
	case i == 0:
		return "Not Specified"
	case i > len(s.strings) || strings.TrimSpace(s.strings[i-1]) == "":
		return "<BAD INDEX>"
	}
	return strings.TrimSpace(s.strings[i-1])
}

func kv(k, v string) string { return "\t" + k + ": " + v }

func list(header string, items []string) []string {
	out := []string{"\t" + header + ":"}
	for _, it := range items {
		out = append(out, "\t\t"+it)
	}
	return out
}

func enum(table []string, v int) string {
	if v >= 1 && v <= len(table) && table[v-1] != "" {
		return table[v-1]
	}
	return "<OUT OF SPEC>"
}

func bits(v uint64, names map[int]string) []string {
	var out []string
	for i := 0; i < 64; i++ {
		if v&(1<<i) != 0 && names[i] != "" {
			out = append(out, names[i])
		}
	}
	return out
}

func mhz(v uint16) string {
	if v == 0 {
		return "Unknown"
	}
	return fmt.Sprintf("%d MHz", v)
}

func handleOr(v uint16, none string) string {
	if v == 0xFFFF {
		return none
	}
	return fmt.Sprintf("0x%04X", v)
}

func (s *dmiStruct) decode(typ byte) (string, []string) {
	switch typ {
	case 0:
		return "BIOS Information", s.bios()
	case 1:
		return "System Information", s.system()
	case 2:
		return "Base Board Information", s.baseBoard()
	case 3:
		return "Chassis Information", s.chassis()
	case 4:
		return "Processor Information", s.processor()
	case 11:
		return "OEM Strings", s.oemStrings()
	case 17:
		return "Memory Device", s.memoryDevice()
	}
	return "", nil
}

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

func (s *dmiStruct) bios() []string {
	if !s.has(0x12) {
		return nil
	}
	f := []string{kv("Vendor", s.str(0x04)), kv("Version", s.str(0x05)), kv("Release Date", s.str(0x08))}
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
	f = append(f, list("Characteristics", chars)...)
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

func (s *dmiStruct) system() []string {
	if !s.has(0x08) {
		return nil
	}
	f := []string{kv("Manufacturer", s.str(0x04)), kv("Product Name", s.str(0x05)),
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

func (s *dmiStruct) baseBoard() []string {
	if !s.has(0x08) {
		return nil
	}
	f := []string{kv("Manufacturer", s.str(0x04)), kv("Product Name", s.str(0x05)),
		kv("Version", s.str(0x06)), kv("Serial Number", s.str(0x07))}
	if s.has(0x09) {
		f = append(f, kv("Asset Tag", s.str(0x08)))
	}
	if s.has(0x0A) {
		if feat := s.byte(0x09) & 0x1F; feat == 0 {
			f = append(f, kv("Features", "None"))
		} else {
			f = append(f, list("Features", bits(uint64(feat), boardFeatures))...)
		}
	}
	if s.has(0x0E) {
		f = append(f, kv("Location In Chassis", s.str(0x0A)),
			kv("Chassis Handle", fmt.Sprintf("0x%04X", s.word(0x0B))),
			kv("Type", enum(boardTypes, int(s.byte(0x0D)))))
	}
	if s.has(0x0F) {
		n := int(s.byte(0x0E))
		f = append(f, kv("Contained Object Handles", strconv.Itoa(n)))
		for i := 0; i < n && s.has(0x0F+2*i+2); i++ {
			f = append(f, fmt.Sprintf("\t\t0x%04X", s.word(0x0F+2*i)))
		}
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

func (s *dmiStruct) chassis() []string {
	if !s.has(0x09) {
		return nil
	}
	lock := "Not Present"
	if s.byte(0x05)&0x80 != 0 {
		lock = "Present"
	}
	f := []string{kv("Manufacturer", s.str(0x04)), kv("Type", enum(chassisTypes, int(s.byte(0x05)&0x7F))),
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

var processorTypes = []string{"Other", "Unknown", "Central Processor", "Math Processor", "DSP Processor", "Video Processor"}

// processorFamilies holds only the common values; others are left out
// rather than printed wrong.
var processorFamilies = map[int]string{
	0x01: "Other", 0x02: "Unknown", 0xB3: "Xeon", 0xC6: "Core i7", 0xCD: "Core i5", 0xCE: "Core i3",
	0x6B: "Zen", 0x100: "ARMv7", 0x101: "ARMv8",
}

var processorStatus = []string{"Enabled", "Disabled By User", "Disabled By BIOS", "Idle", "", "", "Other"}

var processorUpgrades = []string{"Other", "Unknown", "Daughter Board", "ZIF Socket", "Replaceable Piggy Back",
	"None", "LIF Socket", "Slot 1", "Slot 2", "370-pin Socket", "Slot A", "Slot M", "Socket 423",
	"Socket A (Socket 462)", "Socket 478", "Socket 754", "Socket 940", "Socket 939"}

var processorChars = map[int]string{
	2: "64-bit capable", 3: "Multi-Core", 4: "Hardware Thread", 5: "Execute Protection",
	6: "Enhanced Virtualization", 7: "Power/Performance Control", 8: "128-bit Capable", 9: "Arm64 SoC ID",
}

func (s *dmiStruct) processor() []string {
	if !s.has(0x1A) {
		return nil
	}
	f := []string{kv("Socket Designation", s.str(0x04)), kv("Type", enum(processorTypes, int(s.byte(0x05))))}
	fam := int(s.byte(0x06))
	if fam == 0xFE && s.has(0x2A) {
		fam = int(s.word(0x28))
	}
	if name, ok := processorFamilies[fam]; ok {
		f = append(f, kv("Family", name))
	}
	id := s.data[0x08:0x10]
	f = append(f, kv("Manufacturer", s.str(0x07)),
		kv("ID", fmt.Sprintf("%02X %02X %02X %02X %02X %02X %02X %02X", id[0], id[1], id[2], id[3], id[4], id[5], id[6], id[7])))
	f = append(f, x86Signature(fam, s.str(0x10), binary.LittleEndian.Uint32(id), binary.LittleEndian.Uint32(id[4:]))...)
	f = append(f, kv("Version", s.str(0x10)))
	v := s.byte(0x11)
	switch {
	case v&0x80 != 0:
		f = append(f, kv("Voltage", fmt.Sprintf("%.1f V", float64(v&0x7F)/10)))
	case v&0x07 == 0:
		f = append(f, kv("Voltage", "Unknown"))
	default:
		var vs []string
		for i, name := range []string{"5.0 V", "3.3 V", "2.9 V"} {
			if v&(1<<i) != 0 {
				vs = append(vs, name)
			}
		}
		f = append(f, kv("Voltage", strings.Join(vs, " ")))
	}
	f = append(f, kv("External Clock", mhz(s.word(0x12))), kv("Max Speed", mhz(s.word(0x14))),
		kv("Current Speed", mhz(s.word(0x16))))
	if st := s.byte(0x18); st&0x40 != 0 {
		state := "Unknown"
		if x := int(st & 0x07); x > 0 {
			state = enum(processorStatus, x)
		}
		f = append(f, kv("Status", "Populated, "+state))
	} else {
		f = append(f, kv("Status", "Unpopulated"))
	}
	if u := int(s.byte(0x19)); u >= 1 && u <= len(processorUpgrades) {
		f = append(f, kv("Upgrade", processorUpgrades[u-1]))
	}
	if s.has(0x20) {
		f = append(f, kv("L1 Cache Handle", handleOr(s.word(0x1A), "Not Provided")),
			kv("L2 Cache Handle", handleOr(s.word(0x1C), "Not Provided")),
			kv("L3 Cache Handle", handleOr(s.word(0x1E), "Not Provided")))
	}
	if s.has(0x23) {
		f = append(f, kv("Serial Number", s.str(0x20)), kv("Asset Tag", s.str(0x21)), kv("Part Number", s.str(0x22)))
	}
	if s.has(0x28) {
		count := func(off8, off16 int) int {
			if c := int(s.byte(off8)); c != 0xFF || !s.has(off16+2) {
				return c
			}
			return int(s.word(off16))
		}
		for _, c := range []struct {
			name       string
			off8, off6 int
		}{{"Core Count", 0x23, 0x2A}, {"Core Enabled", 0x24, 0x2C}, {"Thread Count", 0x25, 0x2E}} {
			if n := count(c.off8, c.off6); n != 0 {
				f = append(f, kv(c.name, strconv.Itoa(n)))
			}
		}
		if ch := s.word(0x26); ch&0x00FC == 0 {
			f = append(f, kv("Characteristics", "None"))
		} else {
			f = append(f, list("Characteristics", bits(uint64(ch), processorChars))...)
		}
	}
	return f
}

// cpuidVendor tells which CPUID layout a processor family uses: 1 for
// Intel-style, 2 for AMD-style, 0 when the ID is not an x86 CPUID (then
// dmidecode prints neither signature nor flags).
func cpuidVendor(family int, version string) int {
	in := func(lo, hi int) bool { return family >= lo && family <= hi }
	switch {
	case in(0x0B, 0x15), in(0x28, 0x2F), in(0xA1, 0xB3), family == 0xB5, in(0xB9, 0xC7),
		in(0xCD, 0xCF), in(0xD2, 0xDB), in(0xDD, 0xE0):
		return 1
	case in(0x18, 0x1D), family == 0x1F, in(0x38, 0x3F), in(0x46, 0x4F), in(0x66, 0x6B),
		in(0x83, 0x8F), in(0xB6, 0xB7), in(0xE4, 0xEF):
		return 2
	case family == 0x01 || family == 0x02:
		// Some x86 processors report "Other" or "Unknown"; their version
		// string tells whether the ID is a CPUID signature.
		for _, p := range []string{"Pentium III MMX", "Intel(R) Core(TM)2", "Intel(R) Pentium(R)"} {
			if strings.HasPrefix(version, p) {
				return 1
			}
		}
		if version == "Genuine Intel(R) CPU U1400" {
			return 1
		}
		for _, p := range []string{"AMD Athlon(TM)", "AMD Opteron(tm)", "Dual-Core AMD Opteron(tm)"} {
			if strings.HasPrefix(version, p) {
				return 2
			}
		}
	}
	return 0
}

var cpuidFlags = map[int]string{
	0: "FPU (Floating-point unit on-chip)", 1: "VME (Virtual mode extension)", 2: "DE (Debugging extension)",
	3: "PSE (Page size extension)", 4: "TSC (Time stamp counter)", 5: "MSR (Model specific registers)",
	6: "PAE (Physical address extension)", 7: "MCE (Machine check exception)",
	8: "CX8 (CMPXCHG8 instruction supported)", 9: "APIC (On-chip APIC hardware supported)",
	11: "SEP (Fast system call)", 12: "MTRR (Memory type range registers)", 13: "PGE (Page global enable)",
	14: "MCA (Machine check architecture)", 15: "CMOV (Conditional move instruction supported)",
	16: "PAT (Page attribute table)", 17: "PSE-36 (36-bit page size extension)",
	18: "PSN (Processor serial number present and enabled)", 19: "CLFSH (CLFLUSH instruction supported)",
	21: "DS (Debug store)", 22: "ACPI (ACPI supported)", 23: "MMX (MMX technology supported)",
	24: "FXSR (FXSAVE and FXSTOR instructions supported)", 25: "SSE (Streaming SIMD extensions)",
	26: "SSE2 (Streaming SIMD extensions 2)", 27: "SS (Self-snoop)", 28: "HTT (Multi-threading)",
	29: "TM (Thermal monitor supported)", 31: "PBE (Pending break enabled)",
}

// x86Signature decodes the processor ID of x86 processors into the
// Signature and Flags fields dmidecode prints.
func x86Signature(family int, version string, eax, edx uint32) []string {
	var f []string
	base := (eax >> 8) & 0xF
	switch cpuidVendor(family, version) {
	case 1:
		f = append(f, kv("Signature", fmt.Sprintf("Type %d, Family %d, Model %d, Stepping %d",
			(eax>>12)&0x3, ((eax>>20)&0xFF)+base, ((eax>>12)&0xF0)+((eax>>4)&0xF), eax&0xF)))
	case 2:
		fam, model := base, (eax>>4)&0xF
		if base == 0xF {
			fam += (eax >> 20) & 0xFF
			model |= (eax >> 12) & 0xF0
		}
		f = append(f, kv("Signature", fmt.Sprintf("Family %d, Model %d, Stepping %d", fam, model, eax&0xF)))
	default:
		return nil
	}
	if edx&0xBFEFFBFF == 0 {
		return append(f, kv("Flags", "None"))
	}
	return append(f, list("Flags", bits(uint64(edx), cpuidFlags))...)
}

func (s *dmiStruct) oemStrings() []string {
	if !s.has(0x05) {
		return nil
	}
	var f []string
	for i := 1; i <= int(s.byte(0x04)); i++ {
		v := "<BAD INDEX>"
		if i <= len(s.strings) {
			v = strings.TrimSpace(s.strings[i-1])
		}
		f = append(f, kv("String "+strconv.Itoa(i), v))
	}
	return f
}

var memoryFormFactors = []string{"Other", "Unknown", "SIMM", "SIP", "Chip", "DIP", "ZIP", "Proprietary Card",
	"DIMM", "TSOP", "Row Of Chips", "RIMM", "SODIMM", "SRIMM", "FB-DIMM", "Die"}

var memoryTypes = []string{"Other", "Unknown", "DRAM", "EDRAM", "VRAM", "SRAM", "RAM", "ROM", "Flash", "EEPROM",
	"FEPROM", "EPROM", "CDRAM", "3DRAM", "SDRAM", "SGRAM", "RDRAM", "DDR", "DDR2", "DDR2 FB-DIMM",
	"Reserved", "Reserved", "Reserved", "DDR3", "FBD2", "DDR4", "LPDDR", "LPDDR2", "LPDDR3", "LPDDR4",
	"Logical non-volatile device", "HBM", "HBM2", "DDR5", "LPDDR5", "HBM3"}

var memoryTypeDetails = map[int]string{
	1: "Other", 2: "Unknown", 3: "Fast-paged", 4: "Static Column", 5: "Pseudo-static", 6: "RAMBus",
	7: "Synchronous", 8: "CMOS", 9: "EDO", 10: "Window DRAM", 11: "Cache DRAM", 12: "Non-Volatile",
	13: "Registered (Buffered)", 14: "Unbuffered (Unregistered)", 15: "LRDIMM",
}

// memorySize prints a size given in kB with the largest unit that divides
// it, as dmidecode does ("8 GB", "512 MB").
func memorySize(kb uint64) string {
	units := []string{"kB", "MB", "GB", "TB", "PB"}
	u := 0
	for kb != 0 && kb%1024 == 0 && u < len(units)-1 {
		kb /= 1024
		u++
	}
	return fmt.Sprintf("%d %s", kb, units[u])
}

func width(v uint16) string {
	if v == 0xFFFF || v == 0 {
		return "Unknown"
	}
	return fmt.Sprintf("%d bits", v)
}

func mts(v uint16) string {
	if v == 0 {
		return "Unknown"
	}
	return fmt.Sprintf("%d MT/s", v)
}

func (s *dmiStruct) memoryDevice() []string {
	if !s.has(0x15) {
		return nil
	}
	f := []string{kv("Array Handle", fmt.Sprintf("0x%04X", s.word(0x04)))}
	switch e := s.word(0x06); e {
	case 0xFFFE:
		f = append(f, kv("Error Information Handle", "Not Provided"))
	case 0xFFFF:
		f = append(f, kv("Error Information Handle", "No Error"))
	default:
		f = append(f, kv("Error Information Handle", fmt.Sprintf("0x%04X", e)))
	}
	f = append(f, kv("Total Width", width(s.word(0x08))), kv("Data Width", width(s.word(0x0A))))
	switch sz := s.word(0x0C); {
	case sz == 0:
		f = append(f, kv("Size", "No Module Installed"))
	case sz == 0xFFFF:
		f = append(f, kv("Size", "Unknown"))
	case sz == 0x7FFF && s.has(0x20):
		f = append(f, kv("Size", memorySize(uint64(s.dword(0x1C)&0x7FFFFFFF)*1024)))
	case sz&0x8000 != 0:
		f = append(f, kv("Size", memorySize(uint64(sz&0x7FFF))))
	default:
		f = append(f, kv("Size", memorySize(uint64(sz)*1024)))
	}
	f = append(f, kv("Form Factor", enum(memoryFormFactors, int(s.byte(0x0E)))))
	switch set := s.byte(0x0F); set {
	case 0:
		f = append(f, kv("Set", "None"))
	case 0xFF:
		f = append(f, kv("Set", "Unknown"))
	default:
		f = append(f, kv("Set", strconv.Itoa(int(set))))
	}
	f = append(f, kv("Locator", s.str(0x10)), kv("Bank Locator", s.str(0x11)),
		kv("Type", enum(memoryTypes, int(s.byte(0x12)))))
	if d := s.word(0x13); d&0xFFFE == 0 {
		f = append(f, kv("Type Detail", "None"))
	} else {
		f = append(f, kv("Type Detail", strings.Join(bits(uint64(d), memoryTypeDetails), " ")))
	}
	if !s.has(0x17) {
		return f
	}
	f = append(f, kv("Speed", mts(s.word(0x15))))
	if !s.has(0x1B) {
		return f
	}
	f = append(f, kv("Manufacturer", s.str(0x17)), kv("Serial Number", s.str(0x18)),
		kv("Asset Tag", s.str(0x19)), kv("Part Number", s.str(0x1A)))
	if s.has(0x1C) {
		rank := "Unknown"
		if r := s.byte(0x1B) & 0x0F; r != 0 {
			rank = strconv.Itoa(int(r))
		}
		f = append(f, kv("Rank", rank))
	}
	if s.has(0x22) {
		f = append(f, kv("Configured Memory Speed", mts(s.word(0x20))))
	}
	if s.has(0x28) {
		f = append(f, kv("Minimum Voltage", millivolts(s.word(0x22))),
			kv("Maximum Voltage", millivolts(s.word(0x24))),
			kv("Configured Voltage", millivolts(s.word(0x26))))
	}
	// Fields added in SMBIOS 3.2 and later (memory technology, firmware,
	// module IDs, sizes per kind) are not decoded.
	return f
}

func millivolts(v uint16) string {
	switch {
	case v == 0:
		return "Unknown"
	case v%100 != 0:
		return strconv.FormatFloat(float64(v)/1000, 'g', -1, 64) + " V"
	}
	return fmt.Sprintf("%.1f V", float64(v)/1000)
}

// dmiIDFields maps the kernel's /sys/class/dmi/id files to dmidecode's
// section and field names.
var dmiIDFields = []struct{ section, field, file string }{
	{"BIOS Information", "Vendor", "bios_vendor"},
	{"BIOS Information", "Version", "bios_version"},
	{"BIOS Information", "Release Date", "bios_date"},
	{"BIOS Information", "BIOS Revision", "bios_release"},
	{"BIOS Information", "Firmware Revision", "ec_firmware_release"},
	{"System Information", "Manufacturer", "sys_vendor"},
	{"System Information", "Product Name", "product_name"},
	{"System Information", "Version", "product_version"},
	{"System Information", "Serial Number", "product_serial"},
	{"System Information", "UUID", "product_uuid"},
	{"System Information", "SKU Number", "product_sku"},
	{"System Information", "Family", "product_family"},
	{"Base Board Information", "Manufacturer", "board_vendor"},
	{"Base Board Information", "Product Name", "board_name"},
	{"Base Board Information", "Version", "board_version"},
	{"Base Board Information", "Serial Number", "board_serial"},
	{"Base Board Information", "Asset Tag", "board_asset_tag"},
	{"Chassis Information", "Manufacturer", "chassis_vendor"},
	{"Chassis Information", "Type", "chassis_type"},
	{"Chassis Information", "Version", "chassis_version"},
	{"Chassis Information", "Serial Number", "chassis_serial"},
	{"Chassis Information", "Asset Tag", "chassis_asset_tag"},
}

func dmiIDSMBIOS(root string) (map[string]any, error) {
	dir := host.Root(root).Path(dmiIDDir)
	if _, err := os.ReadDir(dir); err != nil {
		return nil, err
	}
	out := map[string]any{}
	for _, f := range dmiIDFields {
		b, err := os.ReadFile(filepath.Join(dir, f.file))
		if err != nil {
			// Serials and the UUID are readable by root only; the rest of
			// the section is still worth sending.
			if !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, fs.ErrPermission) {
				return nil, fmt.Errorf("reading %s: %w", f.file, err)
			}
			continue
		}
		v := strings.TrimSpace(string(b))
		if f.file == "chassis_type" {
			if n, err := strconv.Atoi(v); err == nil {
				v = enum(chassisTypes, n&0x7F)
			}
		}
		sec, _ := out[f.section].(map[string]any)
		if sec == nil {
			sec = map[string]any{}
			out[f.section] = sec
		}
		sec[f.field] = v
	}
	if len(out) == 0 {
		return nil, errors.New("no DMI field readable")
	}
	return out, nil
}
