package inventory

import (
	"encoding/binary"
	"fmt"
	"strconv"
	"strings"
)

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

func (s *dmiStruct) processor() []field {
	if !s.has(0x1A) {
		return nil
	}
	f := []field{kv("Socket Designation", s.str(0x04)), kv("Type", enum(processorTypes, int(s.byte(0x05))))}
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
			f = append(f, list("Characteristics", bits(uint64(ch), processorChars)))
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
func x86Signature(family int, version string, eax, edx uint32) []field {
	var f []field
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
	return append(f, list("Flags", bits(uint64(edx), cpuidFlags)))
}

func (s *dmiStruct) oemStrings() []field {
	if !s.has(0x05) {
		return nil
	}
	var f []field
	for i := 1; i <= int(s.byte(0x04)); i++ {
		v := "<BAD INDEX>"
		if i <= len(s.strings) {
			v = strings.TrimSpace(s.strings[i-1])
		}
		f = append(f, kv("String "+strconv.Itoa(i), v))
	}
	return f
}
