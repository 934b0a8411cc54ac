package inventory

import (
	"encoding/json"
	"github.com/nodereg/nodereg/internal/host"
	"github.com/nodereg/nodereg/internal/vectors"
	"os"
	"path/filepath"
	"testing"
)

// dmiStructure assembles one SMBIOS structure: the 4-byte header, the
// formatted area after it, then the string set.
func dmiStructure(typ byte, handle uint16, body []byte, strs ...string) []byte {
	out := []byte{typ, byte(4 + len(body)), byte(handle), byte(handle >> 8)}
	out = append(out, body...)
	if len(strs) == 0 {
		return append(out, 0, 0)
	}
	for _, s := range strs {
		out = append(append(out, s...), 0)
	}
	return append(out, 0)
}

// The structures of the QEMU (SeaBIOS, q35) machine the upstream vector was
// captured on, written from the SMBIOS specification's layouts and the
// values in vectors/upstream-smbios.json.
func vectorMachineTable() [][]byte {
	return [][]byte{
		dmiStructure(0, 0x0000, []byte{
			1, 2, 0x00, 0xE8, 3, 0x00, // vendor, version, segment 0xE800, date, ROM 64 kB
			0x08, 0, 0, 0, 0, 0, 0, 0, // characteristics not supported
			0x00, 0x04, // ext: targeted content distribution
			0, 0, 0xFF, 0xFF, // BIOS 0.0, no EC firmware
		}, "SeaBIOS", "1.16.2-debian-1.16.2-1", "04/01/2014"),
		dmiStructure(1, 0x0100, []byte{
			1, 2, 3, 4,
			0x44, 0x45, 0x4c, 0x4c, 0x42, 0x00, 0x10, 0x30, 0x80, 0x58, 0xb4, 0xc0, 0x4f, 0x4e, 0x4e, 0x32,
			6, 0, 0, // power switch, SKU and family not specified
		}, "QEMU", "Standard PC (Q35 + ICH9, 2009)", "pc-q35-8.0", "PEER-SERIAL-0001"),
		dmiStructure(2, 0x0200, []byte{
			1, 2, 3, 0, 0, 0x01, 0, 0x00, 0x03, 0x0A, 0,
		}, "Canonical Ltd.", "LXD", "pc-q35-8.0"),
		dmiStructure(3, 0x0300, []byte{
			1, 0x01, 2, 0, 0, 3, 3, 3, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0,
		}, "QEMU", "pc-q35-8.0"),
		dmiStructure(4, 0x0400, []byte{
			1, 3, 1, 2, 0x63, 0x06, 0x00, 0x00, 0xFF, 0xFB, 0x8B, 0x0F, 3, 0x00,
			0, 0, 0xD0, 0x07, 0xD0, 0x07, 0x41, 0x01,
			0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0, 0, 0, 2, 2, 1, 0x02, 0x00,
			0x01, 0x00, 0x02, 0x00, 0x02, 0x00, 0x01, 0x00,
		}, "CPU 0", "QEMU", "pc-q35-8.0"),
		dmiStructure(11, 0x0B00, []byte{1}, "elemental-peer-harness"),
	}
}

func writeTables(t *testing.T, structs [][]byte) string {
	t.Helper()
	root := t.TempDir()
	dir := host.Root(root).Path("/sys/firmware/dmi/tables")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	var table []byte
	for _, s := range structs {
		table = append(table, s...)
	}
	table = append(table, dmiStructure(127, 0xFEFF, nil)...)
	// SMBIOS 3.0 entry point: anchor, checksum, length, major 3, minor 0.
	ep := []byte{'_', 'S', 'M', '3', '_', 0, 0x18, 3, 0, 0}
	if err := os.WriteFile(filepath.Join(dir, "smbios_entry_point"), ep, 0o400); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "DMI"), table, 0o400); err != nil {
		t.Fatal(err)
	}
	return root
}

// Decoding the raw tables must give exactly what dmidecode gave upstream on
// the same machine.
func TestDMITablesMatchUpstreamDmidecode(t *testing.T) {
	raw := vectors.Read(t, "upstream-smbios.json")
	got, err := sysfsSMBIOS(host.Root(writeTables(t, vectorMachineTable())))
	if err != nil {
		t.Fatal(err)
	}
	jsonEqual(t, got, string(raw))
}

// xeonFlags are the CPUID EDX bits of BFEBFBFF (all but 10, 18, 20, 30).
const xeonFlags = `["FPU (Floating-point unit on-chip)","VME (Virtual mode extension)","DE (Debugging extension)",
	"PSE (Page size extension)","TSC (Time stamp counter)","MSR (Model specific registers)",
	"PAE (Physical address extension)","MCE (Machine check exception)","CX8 (CMPXCHG8 instruction supported)",
	"APIC (On-chip APIC hardware supported)","SEP (Fast system call)","MTRR (Memory type range registers)",
	"PGE (Page global enable)","MCA (Machine check architecture)","CMOV (Conditional move instruction supported)",
	"PAT (Page attribute table)","PSE-36 (36-bit page size extension)","CLFSH (CLFLUSH instruction supported)",
	"DS (Debug store)","ACPI (ACPI supported)","MMX (MMX technology supported)",
	"FXSR (FXSAVE and FXSTOR instructions supported)","SSE (Streaming SIMD extensions)",
	"SSE2 (Streaming SIMD extensions 2)","SS (Self-snoop)","HTT (Multi-threading)",
	"TM (Thermal monitor supported)","PBE (Pending break enabled)"]`

func TestDMITablesRepeatedRecordsAndMemoryDevice(t *testing.T) {
	structs := append(vectorMachineTable()[1:2], twoXeonsAndADIMM()...)
	got, err := sysfsSMBIOS(host.Root(writeTables(t, structs)))
	if err != nil {
		t.Fatal(err)
	}
	cpu1 := `{"Socket Designation":"CPU1","Type":"Central Processor","Family":"Xeon","Manufacturer":"Intel(R) Corporation",
		"ID":"57 06 05 00 FF FB EB BF","Signature":"Type 0, Family 6, Model 85, Stepping 7","Flags:":` + xeonFlags + `,"Version":"Intel(R) Xeon(R) Gold 6130","Voltage":"1.0 V","External Clock":"100 MHz",
		"Max Speed":"3600 MHz","Current Speed":"2400 MHz","Status":"Populated, Enabled","Upgrade":"Other",
		"L1 Cache Handle":"0x0700","L2 Cache Handle":"0x0701","L3 Cache Handle":"Not Provided",
		"Serial Number":"SN-A","Asset Tag":"Not Specified","Part Number":"PN-1",
		"Core Count":"8","Core Enabled":"8","Thread Count":"16",
		"Characteristics:":["64-bit capable","Multi-Core","Hardware Thread","Execute Protection","Enhanced Virtualization","Power/Performance Control"]}`
	cpu2 := `{"Socket Designation":"CPU2","Type":"Central Processor","Family":"Xeon","Manufacturer":"Intel(R) Corporation",
		"ID":"57 06 05 00 FF FB EB BF","Signature":"Type 0, Family 6, Model 85, Stepping 7","Flags:":` + xeonFlags + `,"Version":"Intel(R) Xeon(R) Gold 6130","Voltage":"1.0 V","External Clock":"100 MHz",
		"Max Speed":"3600 MHz","Current Speed":"2400 MHz","Status":"Populated, Unknown","Upgrade":"Other",
		"L1 Cache Handle":"0x0700","L2 Cache Handle":"0x0701","L3 Cache Handle":"Not Provided",
		"Serial Number":"Not Specified","Asset Tag":"Not Specified","Part Number":"Not Specified",
		"Core Count":"8","Core Enabled":"4","Thread Count":"16",
		"Characteristics:":["64-bit capable","Multi-Core","Hardware Thread","Execute Protection","Enhanced Virtualization","Power/Performance Control"]}`
	jsonEqual(t, got["Processor Information"], cpu2)
	jsonEqual(t, got[RecordKey("Processor Information", 1)], cpu1)
	jsonEqual(t, got[RecordKey("Processor Information", 2)], cpu2)
	jsonEqual(t, got["Memory Device"], `{"Array Handle":"0x1000","Error Information Handle":"Not Provided",
		"Total Width":"Unknown","Data Width":"Unknown","Size":"8 GB","Form Factor":"DIMM","Set":"None",
		"Locator":"DIMM 0","Bank Locator":"Not Specified","Type":"RAM","Type Detail":"Other","Speed":"Unknown",
		"Manufacturer":"QEMU","Serial Number":"Not Specified","Asset Tag":"Not Specified","Part Number":"Not Specified",
		"Rank":"Unknown","Configured Memory Speed":"Unknown",
		"Minimum Voltage":"1.2 V","Maximum Voltage":"1.35 V","Configured Voltage":"Unknown"}`)
	if n := len(got); n != 5 {
		b, _ := json.Marshal(got)
		t.Errorf("got %d sections, want 5: %s", n, b)
	}
}

func TestDMITablesTruncated(t *testing.T) {
	// A structure whose length runs past the end is dropped with the rest;
	// what came before it is kept.
	structs := vectorMachineTable()[1:2]
	broken := []byte{4, 0x30, 0x00, 0x04, 1, 2}
	root := writeTables(t, nil)
	var table []byte
	for _, s := range structs {
		table = append(table, s...)
	}
	table = append(table, broken...)
	if err := os.WriteFile(host.Root(root).Path(dmiTable), table, 0o400); err != nil {
		t.Fatal(err)
	}
	got, err := sysfsSMBIOS(host.Root(root))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := got["System Information"]; !ok || len(got) != 1 {
		t.Errorf("got %v", got)
	}
}

func TestSMBIOSNoSource(t *testing.T) {
	if _, err := sysfsSMBIOS(host.Root(t.TempDir())); err == nil {
		t.Fatal("want an error without DMI tables or dmi/id")
	}
}

// twoXeonsAndADIMM are a dual-socket server's processors (the second with
// cores disabled) and a QEMU DIMM with SMBIOS 2.8 voltages.
func twoXeonsAndADIMM() [][]byte {
	return [][]byte{
		dmiStructure(4, 0x0400, []byte{
			1, 3, 0xB3, 2, 0x57, 0x06, 0x05, 0x00, 0xFF, 0xFB, 0xEB, 0xBF, 3, 0x8A,
			0x64, 0x00, 0x10, 0x0E, 0x60, 0x09, 0x41, 0x01,
			0x00, 0x07, 0x01, 0x07, 0xFF, 0xFF, 4, 0, 5, 8, 8, 16, 0xFC, 0x00,
		}, "CPU1", "Intel(R) Corporation", "Intel(R) Xeon(R) Gold 6130", "SN-A", "PN-1"),
		dmiStructure(4, 0x0401, []byte{
			1, 3, 0xB3, 2, 0x57, 0x06, 0x05, 0x00, 0xFF, 0xFB, 0xEB, 0xBF, 3, 0x8A,
			0x64, 0x00, 0x10, 0x0E, 0x60, 0x09, 0x40, 0x01,
			0x00, 0x07, 0x01, 0x07, 0xFF, 0xFF, 0, 0, 0, 8, 4, 16, 0xFC, 0x00,
		}, "CPU2", "Intel(R) Corporation", "Intel(R) Xeon(R) Gold 6130"),
		dmiStructure(17, 0x1100, []byte{
			0x00, 0x10, 0xFE, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x00, 0x20, 0x09, 0x00, 1, 0, 0x07, 0x02, 0x00,
			0x00, 0x00, 2, 0, 0, 0, 0x00, 0, 0, 0, 0, 0x00, 0x00, 0xB0, 0x04, 0x46, 0x05, 0, 0,
		}, "DIMM 0", "QEMU"),
	}
}
