package netpolicy

import (
	"bufio"
	"bytes"
	"fmt"
	"strings"
)

// Keyfile is one profile to judge: Label names it in refusals (the config key
// it came from, or the generator's output), Name is its file name.
type Keyfile struct {
	Label   string
	Name    string
	Content []byte
}

// Sections is a keyfile as NetworkManager's GLib key-file parser holds it:
// section -> key -> raw value (escapes not undone). As GLib does, a section
// given twice is one section and a key given twice keeps its last value.
type Sections map[string]map[string]string

// ReadKeyfile parses text the way GLib's key-file parser, which
// NetworkManager uses, does (verified against nmcli --offline of
// NetworkManager 1.42, docs/reliability.md): leading blanks of a line and the
// blanks around the key are dropped, as are the blanks after '='; blanks at
// the end of a value are kept; only lines starting with '#' are comments; a
// line that is neither a comment, a [section] nor key=value makes the whole
// file unreadable.
func ReadKeyfile(text []byte) (Sections, error) {
	secs := Sections{}
	cur := ""
	sc := bufio.NewScanner(bytes.NewReader(text))
	sc.Buffer(make([]byte, 0, 4096), len(text)+1)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimLeft(strings.TrimSuffix(sc.Text(), "\r"), " \t")
		switch {
		case line == "" || line[0] == '#':
			continue
		case line[0] == '[':
			end := strings.IndexByte(line, ']')
			if end < 2 || strings.TrimRight(line[end+1:], " \t") != "" {
				return nil, fmt.Errorf("line %d: malformed section header", n)
			}
			cur = line[1:end]
			if secs[cur] == nil {
				secs[cur] = map[string]string{}
			}
		default:
			k, v, ok := strings.Cut(line, "=")
			k = strings.TrimRight(k, " \t")
			if !ok || k == "" {
				return nil, fmt.Errorf("line %d: neither a key=value pair, a section nor a comment", n)
			}
			if cur == "" {
				return nil, fmt.Errorf("line %d: key %q before any section", n, k)
			}
			secs[cur][k] = strings.TrimLeft(v, " \t")
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	return secs, nil
}

// Unescape is a GLib key-file string value as NetworkManager gets it: \s, \t,
// \n, \r and \\ become a blank, tab, newline, carriage return and backslash.
// Any other escape (\; included: it is a list's escape, not a string's) and a
// lone backslash at the end make GLib refuse the value, and NetworkManager
// then drops the key as if it were absent: ok is false.
func Unescape(raw string) (s string, ok bool) {
	if !strings.Contains(raw, `\`) {
		return raw, true
	}
	var b strings.Builder
	for i := 0; i < len(raw); i++ {
		c := raw[i]
		if c != '\\' {
			b.WriteByte(c)
			continue
		}
		if i+1 == len(raw) {
			return "", false
		}
		i++
		switch raw[i] {
		case 's':
			b.WriteByte(' ')
		case 't':
			b.WriteByte('\t')
		case 'n':
			b.WriteByte('\n')
		case 'r':
			b.WriteByte('\r')
		case '\\':
			b.WriteByte('\\')
		default:
			return "", false
		}
	}
	return b.String(), true
}

// sectionAliases are NetworkManager's keyfile names for settings whose
// D-Bus names differ; the policy judges by the keyfile name.
var sectionAliases = map[string]string{
	"802-3-ethernet":           "ethernet",
	"802-11-wireless":          "wifi",
	"802-11-wireless-security": "wifi-security",
}

func canonicalSection(s string) string {
	if a, ok := sectionAliases[s]; ok {
		return a
	}
	return s
}

// profile is what the uniqueness and cycle checks need of a keyfile.
type profile struct {
	label           string // names the profile in refusals
	id, uuid, iface string
	vlanParent      string
	isVLAN          bool
}

// effective reads a parsed keyfile's identity as NetworkManager would:
// unescaped, the UUID normalised (normalUUID) or, when absent, derived from
// the file name (keyfileUUID), the id the file name without .nmconnection
// when absent.
func effective(secs Sections, fileName string) profile {
	c := secs["connection"]
	get := func(sec map[string]string, k string) string {
		v, _ := Unescape(sec[k])
		return v
	}
	p := profile{id: get(c, "id"), uuid: normalUUID(get(c, "uuid")), iface: get(c, "interface-name")}
	if p.id == "" {
		p.id = strings.TrimSuffix(fileName, ".nmconnection")
	}
	if p.uuid == "" {
		p.uuid = keyfileUUID(fileName)
	}
	t := get(c, "type")
	_, hasVLAN := secs["vlan"]
	p.isVLAN = t == "vlan" || (t == "" && hasVLAN)
	if p.isVLAN {
		p.vlanParent = get(secs["vlan"], "parent")
	}
	return p
}
