package inventory

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/nodereg/nodereg/internal/host"
)

// dmidecodeDump writes a table in dmidecode's --dump-bin layout: an SMBIOS 3
// entry point whose table address is the file offset 0x20, then the table.
func dmidecodeDump(t *testing.T, structs [][]byte) string {
	t.Helper()
	var table []byte
	for _, s := range structs {
		table = append(table, s...)
	}
	table = append(table, dmiStructure(127, 0xFEFF, nil)...)
	ep := make([]byte, 0x20)
	copy(ep, "_SM3_")
	ep[6], ep[7], ep[8], ep[9], ep[10] = 0x18, 3, 0, 0, 1
	n := uint32(len(table))
	ep[12], ep[13], ep[14], ep[15] = byte(n), byte(n>>8), byte(n>>16), byte(n>>24)
	ep[16] = 0x20
	var sum byte
	for _, b := range ep[:0x18] {
		sum += b
	}
	ep[5] = -sum
	path := filepath.Join(t.TempDir(), "dmi.bin")
	if err := os.WriteFile(path, append(ep, table...), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// Cross-check with the real tool: dmidecode decoding the same bytes must
// give what our decoder gives, through the same parser.
func TestDMITablesAgreeWithRealDmidecode(t *testing.T) {
	bin, err := exec.LookPath("dmidecode")
	if err != nil {
		t.Skip("dmidecode not installed (apt-get install dmidecode)")
	}
	structs := append(vectorMachineTable(), twoXeonsAndADIMM()...)
	structs = append(structs,
		// A locked rack chassis with a SKU, and a board with several features.
		dmiStructure(3, 0x0301, []byte{
			1, 0x97, 2, 3, 4, 3, 4, 5, 3, 0x78, 0x56, 0x34, 0x12, 2, 2, 0, 0, 3,
		}, "Dell Inc.", "01", "ABC1234", "AT-9", "SKU-R"),
		dmiStructure(2, 0x0201, []byte{
			1, 2, 3, 4, 5, 0x19, 6, 0x01, 0x03, 0x0A, 2, 0x05, 0x03, 0x06, 0x03,
		}, "Dell Inc.", "0W23H8", "A01", "CN1", "AT-B", "Slot 1"),
		// AMD Zen (extended family) with the PSN bit set, and an "Other"
		// family whose version string marks it as CPUID-capable.
		dmiStructure(4, 0x0410, []byte{
			1, 3, 0x6B, 2, 0x11, 0x0F, 0xA0, 0x00, 0xFF, 0xFB, 0x8F, 0x17, 3, 0x8B,
			0x64, 0x00, 0xC4, 0x09, 0xC4, 0x09, 0x41, 0x06,
		}, "P0", "Advanced Micro Devices, Inc.", "AMD EPYC 7763"),
		dmiStructure(4, 0x0411, []byte{
			1, 3, 0x01, 2, 0x76, 0x06, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 3, 0x00,
			0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02,
		}, "P1", "Intel", "Intel(R) Core(TM)2 Duo CPU"),
	)
	out, err := exec.Command(bin, "--from-dump", dmidecodeDump(t, structs), "-t", dmidecodeTypes).Output()
	if err != nil {
		t.Fatalf("dmidecode: %v", err)
	}
	real, err := ParseDmidecode(out)
	if err != nil {
		t.Fatal(err)
	}
	ours, err := sysfsSMBIOS(host.Root(writeTables(t, structs)))
	if err != nil {
		t.Fatal(err)
	}
	if len(real) == 0 {
		t.Fatalf("dmidecode decoded nothing:\n%s", out)
	}
	for title, want := range real {
		jsonEqualAny(t, title, ours[title], want)
	}
	for title := range ours {
		if _, ok := real[title]; !ok {
			t.Errorf("%s: decoded by us, not by dmidecode", title)
		}
	}
}

func jsonEqualAny(t *testing.T, name string, got, want any) {
	t.Helper()
	w, err := jsonString(want)
	if err != nil {
		t.Fatal(err)
	}
	t.Run(name, func(t *testing.T) { jsonEqual(t, got, w) })
}

// runDmidecode on this machine: with no SMBIOS exported, dmidecode either
// fails or prints no record; both leave the /sys fallback to decide.
func TestRunDmidecodeLive(t *testing.T) {
	bin, err := exec.LookPath("dmidecode")
	if err != nil {
		t.Skip("dmidecode not installed (apt-get install dmidecode)")
	}
	out, err := runDmidecode(context.Background(), nil, bin)
	if err != nil {
		t.Logf("dmidecode failed here (no SMBIOS?): %v", err)
		return
	}
	if _, err := ParseDmidecode(out); err != nil {
		t.Fatal(err)
	}
}
