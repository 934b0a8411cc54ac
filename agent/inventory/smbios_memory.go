package inventory

import (
	"fmt"
	"strconv"
	"strings"
)

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

func (s *dmiStruct) memoryDevice() []field {
	if !s.has(0x15) {
		return nil
	}
	f := []field{kv("Array Handle", fmt.Sprintf("0x%04X", s.word(0x04)))}
	e := s.word(0x06)
	f = append(f, kv("Error Information Handle", named(e, map[uint16]string{0xFFFE: "Not Provided", 0xFFFF: "No Error"}, fmt.Sprintf("0x%04X", e))))
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
	set := s.byte(0x0F)
	f = append(f, kv("Set", named(set, map[byte]string{0: "None", 0xFF: "Unknown"}, strconv.Itoa(int(set)))))
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

// named is what dmidecode prints for one of a field's special values, or
// other for any value else.
func named[T comparable](v T, special map[T]string, other string) string {
	if name, ok := special[v]; ok {
		return name
	}
	return other
}
