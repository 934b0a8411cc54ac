package inventory

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/nodereg/nodereg/internal/host"
)

// dmidecodeTypes are the DMI types upstream asks for (BIOS, System, Base
// Board, Chassis, Processor, OEM Strings) plus Memory Device (17), which the
// /sys fallback also gives; one process instead of upstream's six.
const dmidecodeTypes = "0,1,2,3,4,11,17"

// RecordKey names the key under which the n-th record (1-based, table order)
// of a repeated SMBIOS type is kept. The title itself keeps the last record,
// as upstream's parser does, so existing templates resolve unchanged; "/" and
// "}" are avoided because templates split on them.
func RecordKey(title string, n int) string {
	return title + " #" + strconv.Itoa(n)
}

// ParseDmidecode parses dmidecode's text output into the map elemental's
// parser produces (docs/protocol.md §5.1), and adds every record of a repeated type
// under RecordKey(title, n).
func ParseDmidecode(out []byte) (map[string]any, error) {
	var (
		records []*dmiRecord
		cur     *dmiRecord
		path    []string // keys of the last line seen at each depth below the title
	)
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 0, 64*1024), 1024*1024)
	inRecord, wantTitle := false, false
	for sc.Scan() {
		line := strings.TrimRight(sc.Text(), "\r")
		if strings.HasPrefix(line, "Handle ") {
			inRecord, wantTitle, cur = true, true, nil
			continue
		}
		if !inRecord {
			continue
		}
		trimmed := strings.TrimSpace(line)
		if trimmed == "" || trimmed == "OEM-specific Type" || trimmed == "End Of Table" {
			inRecord, cur = false, nil
			continue
		}
		depth := len(line) - len(strings.TrimLeft(line, "\t"))
		if wantTitle || depth == 0 {
			cur = &dmiRecord{title: trimmed, value: map[string]any{}}
			records = append(records, cur)
			path, wantTitle = path[:0], false
			continue
		}
		if depth-1 > len(path) {
			depth = len(path) + 1 // a line indented too deep hangs under the deepest key
		}
		parents := path[:depth-1]
		name, value, keyed := splitDMILine(trimmed)
		if !keyed {
			cur.value = appendListItem(cur.value, parents, trimmed)
			continue
		}
		cur.value = setDMIValue(cur.value, parents, name, value)
		path = append(path[:depth-1], name)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("parsing dmidecode output: %w", err)
	}

	flat := make([]dmiRecord, len(records))
	for i, r := range records {
		flat[i] = *r
	}
	return keyRecords(flat), nil
}

// dmiRecord is one SMBIOS structure: dmidecode's section title and what
// its lines hold.
type dmiRecord struct {
	title string
	value any
}

// keyRecords keeps each record under its title (the last one of a repeated
// type, as upstream's parser does) and, for a repeated type, every one
// under RecordKey(title, n) too.
func keyRecords(records []dmiRecord) map[string]any {
	result := map[string]any{}
	count := map[string]int{}
	for _, r := range records {
		count[r.title]++
	}
	seen := map[string]int{}
	for _, r := range records {
		result[r.title] = r.value
		if count[r.title] > 1 {
			seen[r.title]++
			result[RecordKey(r.title, seen[r.title])] = r.value
		}
	}
	return result
}

// splitDMILine applies upstream's rule: split at the first ": "; a line is a
// key/value pair when it has a value or contains ':' at all (so a list
// header such as "Flags:" keeps its colon in the key).
func splitDMILine(s string) (name, value string, keyed bool) {
	if i := strings.Index(s, ": "); i >= 0 {
		name, value = strings.TrimSpace(s[:i]), strings.TrimSpace(s[i+2:])
	} else {
		name = s
	}
	return name, value, value != "" || strings.Contains(s, ":")
}

// setDMIValue stores name=value in the map reached through parents, turning
// an empty string on the way into a map (a header line followed by nested
// key/value lines).
func setDMIValue(root any, parents []string, name, value string) any {
	if len(parents) == 0 {
		m, ok := root.(map[string]any)
		if !ok {
			// The parent became a list; upstream has no place for the pair.
			return root
		}
		m[name] = value
		return m
	}
	m, ok := root.(map[string]any)
	if !ok {
		return root
	}
	child := m[parents[0]]
	if s, isStr := child.(string); isStr && s == "" || child == nil {
		child = map[string]any{}
	}
	m[parents[0]] = setDMIValue(child, parents[1:], name, value)
	return m
}

// appendListItem turns the value reached through parents into a list of
// strings (if it is not one yet) and appends item.
func appendListItem(root any, parents []string, item string) any {
	if len(parents) == 0 {
		if l, ok := root.([]string); ok {
			return append(l, item)
		}
		return []string{item}
	}
	m, ok := root.(map[string]any)
	if !ok {
		return root
	}
	m[parents[0]] = appendListItem(m[parents[0]], parents[1:], item)
	return m
}

// runDmidecode runs dmidecode (entry: the tool table's value, "" for the
// default name) once for all the types we send; it only reads.
func runDmidecode(ctx context.Context, runner host.Runner, entry string) ([]byte, error) {
	path, err := host.Lookup("dmidecode", entry)
	if err != nil {
		return nil, err
	}
	if runner == nil {
		runner = host.ExecRunner{}
	}
	return runner.Run(ctx, host.Command{Name: path, Args: []string{"-t", dmidecodeTypes}, ReadOnly: true})
}
