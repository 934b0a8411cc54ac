package inventory

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"path"
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
func sysfsSMBIOS(files host.FS) (map[string]any, error) {
	table, tErr := files.ReadFile(dmiTable, maxDMITable)
	if tErr == nil {
		ver := smbiosVersion{2, 0}
		if ep, err := files.ReadFile(dmiEntryPoint, host.MaxAttr); err == nil {
			ver = parseEntryPoint(ep)
		}
		return keyRecords(decodeDMITable(table, ver)), nil
	}
	m, idErr := dmiIDSMBIOS(files)
	if idErr == nil {
		return m, nil
	}
	return nil, fmt.Errorf("no SMBIOS source: %s: %w; %s: %w", dmiTable, tErr, dmiIDDir, idErr)
}

// maxDMITable bounds the DMI table: SMBIOS 3 allows up to 4 GiB, real
// machines export a few kB to a few hundred.
const maxDMITable = 16 << 20

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

// decodeDMITable decodes the SMBIOS structures we send (types 0, 1, 2, 3,
// 4, 11 and 17) into the sections and field names ParseDmidecode gives for
// dmidecode's text, whichever source was used. Fields that need tables we
// do not carry (processor family names beyond the common ones) are left
// out.
func decodeDMITable(table []byte, ver smbiosVersion) []dmiRecord {
	var records []dmiRecord
	for off := 0; off+4 <= len(table); {
		typ, length := table[off], int(table[off+1])
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
			records = append(records, dmiRecord{title: title, value: sectionOf(fields)})
		}
		if typ == 127 {
			break
		}
		off = end + 2
	}
	return records
}

// sectionOf is the map ParseDmidecode makes of the lines fields would
// print as: a list header keeps its colon and holds its items (nothing when
// it has none), a field with items below it holds them in place of its
// value, and a field whose value is empty keeps its colon.
func sectionOf(fields []field) map[string]any {
	m := map[string]any{}
	for _, f := range fields {
		v := strings.TrimSpace(f.value)
		switch {
		case f.list && len(f.items) == 0:
			m[f.key+":"] = ""
		case f.list:
			m[f.key+":"] = append([]string(nil), f.items...)
		case len(f.items) > 0:
			m[f.key] = append([]string(nil), f.items...)
		case v == "":
			m[f.key+":"] = ""
		default:
			m[f.key] = v
		}
	}
	return m
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

// field is one line of a structure as dmidecode prints it: "key: value",
// or a list header ("Characteristics:") with its items indented below.
type field struct {
	key, value string
	items      []string
	list       bool
}

func kv(k, v string) field { return field{key: k, value: v} }

func list(header string, items []string) field { return field{key: header, items: items, list: true} }

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

func (s *dmiStruct) decode(typ byte) (string, []field) {
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

func dmiIDSMBIOS(files host.FS) (map[string]any, error) {
	if _, err := files.ReadDir(dmiIDDir); err != nil {
		return nil, err
	}
	out := map[string]any{}
	for _, f := range dmiIDFields {
		if !dmiListed(files, f.file) {
			continue // as a read failing with ErrNotExist
		}
		b, err := files.ReadFile(path.Join(dmiIDDir, f.file), host.MaxAttr)
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
