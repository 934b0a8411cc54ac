package inventory

import (
	"encoding/json"
	"maps"
	"reflect"
	"slices"
	"testing"

	"github.com/nodereg/nodereg/internal/vectors"
)

// The sample (dmidecode 3.4 output) and upstream's view of it are fixed
// inputs, in the shape docs/protocol.md §5.1 describes.
const protocolSample = "# dmidecode 3.4\n" +
	"Getting SMBIOS data from sysfs.\n" +
	"SMBIOS 3.0.0 present.\n" +
	"\n" +
	"Handle 0x0000, DMI type 0, 26 bytes\n" +
	"BIOS Information\n" +
	"\tVendor: SeaBIOS\n" +
	"\tVersion: 1.16.0\n" +
	"\tRelease Date: 04/01/2014\n" +
	"\tROM Size: 64 kB\n" +
	"\tCharacteristics:\n" +
	"\t\tBIOS characteristics not supported\n" +
	"\t\tTargeted content distribution is supported\n" +
	"\tBIOS Revision: 0.0\n" +
	"\n" +
	"Handle 0x0100, DMI type 1, 27 bytes\n" +
	"System Information\n" +
	"\tManufacturer: QEMU\n" +
	"\tProduct Name: Standard PC (Q35 + ICH9, 2009)\n" +
	"\tVersion: pc-q35-7.2\n" +
	"\tSerial Number: Not Specified\n" +
	"\tUUID: 8e2f4b1a-0c3d-4e5f-9a6b-7c8d9e0f1a2b\n" +
	"\tWake-up Type: Power Switch\n" +
	"\tSKU Number: Not Specified\n" +
	"\tFamily: Not Specified\n" +
	"\n" +
	"Handle 0x0400, DMI type 4, 48 bytes\n" +
	"Processor Information\n" +
	"\tSocket Designation: CPU 0\n" +
	"\tType: Central Processor\n" +
	"\tVersion: pc-q35-7.2\n" +
	"\tCore Count: 2\n" +
	"\tFlags:\n" +
	"\t\tFPU (Floating-point unit on-chip)\n" +
	"\t\tVME (Virtual mode extension)\n" +
	"\n" +
	"Handle 0x0401, DMI type 4, 48 bytes\n" +
	"Processor Information\n" +
	"\tSocket Designation: CPU 1\n" +
	"\tType: Central Processor\n" +
	"\tCore Count: 4\n" +
	"\n" +
	"Handle 0x0B00, DMI type 11, 5 bytes\n" +
	"OEM Strings\n" +
	"\tString 1: foo=bar\n" +
	"\tString 2: hello: world\n" +
	"\n" +
	"Handle 0x0002, DMI type 127, 4 bytes\n" +
	"End Of Table\n"

const protocolUpstreamView = `{"BIOS Information":{"BIOS Revision":"0.0","Characteristics:":["BIOS characteristics not supported","Targeted content distribution is supported"],"ROM Size":"64 kB","Release Date":"04/01/2014","Vendor":"SeaBIOS","Version":"1.16.0"},
 "OEM Strings":{"String 1":"foo=bar","String 2":"hello: world"},
 "Processor Information":{"Core Count":"4","Socket Designation":"CPU 1","Type":"Central Processor"},
 "System Information":{"Family":"Not Specified","Manufacturer":"QEMU","Product Name":"Standard PC (Q35 + ICH9, 2009)","SKU Number":"Not Specified","Serial Number":"Not Specified","UUID":"8e2f4b1a-0c3d-4e5f-9a6b-7c8d9e0f1a2b","Version":"pc-q35-7.2","Wake-up Type":"Power Switch"}}`

// jsonEqual compares through JSON so that []string and []any, or the
// shared record maps, compare by content.
func jsonEqual(t *testing.T, got any, want string) {
	t.Helper()
	var g, w any
	b, err := json.Marshal(got)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &g); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatalf("bad expectation: %v", err)
	}
	if !reflect.DeepEqual(g, w) {
		t.Errorf("mismatch\n got: %s\nwant: %s", b, want)
	}
}

func TestParseDmidecodeProtocolSample(t *testing.T) {
	got, err := ParseDmidecode([]byte(protocolSample))
	if err != nil {
		t.Fatal(err)
	}
	// Upstream-compatible view: drop our extra record keys and compare with
	// upstream's map for that sample (docs/protocol.md §5.1).
	upstream := map[string]any{}
	for k, v := range got {
		if k != RecordKey("Processor Information", 1) && k != RecordKey("Processor Information", 2) {
			upstream[k] = v
		}
	}
	jsonEqual(t, upstream, protocolUpstreamView)

	// Every record of the repeated type is kept, in table order.
	jsonEqual(t, got[RecordKey("Processor Information", 1)],
		`{"Socket Designation":"CPU 0","Type":"Central Processor","Version":"pc-q35-7.2","Core Count":"2",
		  "Flags:":["FPU (Floating-point unit on-chip)","VME (Virtual mode extension)"]}`)
	jsonEqual(t, got[RecordKey("Processor Information", 2)],
		`{"Socket Designation":"CPU 1","Type":"Central Processor","Core Count":"4"}`)
	if _, ok := got[RecordKey("BIOS Information", 1)]; ok {
		t.Error("a single record must not get an extra key (payload stays byte-identical to upstream)")
	}
	if len(got) != 6 {
		t.Errorf("got %d top-level keys, want 6: %v", len(got), slices.Sorted(maps.Keys(got)))
	}
}

// The captured upstream payload has the same section and field spelling our
// parser must produce; check that parsing dmidecode text shaped like it gives
// keys the vector has, with the trailing-colon quirk.
func TestParseDmidecodeMatchesUpstreamVectorKeys(t *testing.T) {
	raw := vectors.Read(t, "upstream-smbios.json")
	var vec map[string]any
	if err := json.Unmarshal(raw, &vec); err != nil {
		t.Fatal(err)
	}
	out := "Handle 0x0200, DMI type 2, 15 bytes\nBase Board Information\n" +
		"\tManufacturer: Canonical Ltd.\n\tFeatures:\n\t\tBoard is a hosting board\n" +
		"\tChassis Handle: 0x0300\n\tContained Object Handles: 0\n\n"
	got, err := ParseDmidecode([]byte(out))
	if err != nil {
		t.Fatal(err)
	}
	bb := got["Base Board Information"].(map[string]any)
	vbb := vec["Base Board Information"].(map[string]any)
	for k := range bb {
		if _, ok := vbb[k]; !ok {
			t.Errorf("key %q not in upstream vector", k)
		}
	}
	jsonEqual(t, bb["Features:"], `["Board is a hosting board"]`)
}

func TestParseDmidecodeOddInput(t *testing.T) {
	cases := map[string]struct {
		in   string
		want string
	}{
		"empty":            {"", `{}`},
		"header only":      {"# dmidecode 3.4\nNo SMBIOS nor DMI entry point found, sorry.\n", `{}`},
		"oem specific":     {"Handle 0x1, DMI type 200, 4 bytes\nOEM-specific Type\n\tHeader and Data:\n\t\tC8 04\n\n", `{}`},
		"crlf and no tail": {"Handle 0x1, DMI type 1, 4 bytes\r\nSystem Information\r\n\tUUID: abc\r\n", `{"System Information":{"UUID":"abc"}}`},
		"too deep":         {"Handle 0x1, DMI type 1, 4 bytes\nSystem Information\n\t\t\tUUID: abc\n", `{"System Information":{"UUID":"abc"}}`},
		"nested pairs":     {"Handle 0x1, DMI type 9, 4 bytes\nX\n\tBus:\n\t\tA: 1\n", `{"X":{"Bus:":{"A":"1"}}}`},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := ParseDmidecode([]byte(c.in))
			if err != nil {
				t.Fatal(err)
			}
			jsonEqual(t, got, c.want)
		})
	}
}

func jsonString(v any) (string, error) {
	b, err := json.Marshal(v)
	return string(b), err
}
