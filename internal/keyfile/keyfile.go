// Package keyfile reads NetworkManager keyfiles the way NetworkManager does:
// GLib's key-file format (g_key_file_load_from_data and its getters), then
// NetworkManager 1.42's reading of the keys the agent judges a profile by or
// identifies it with (nm.go). It is the module's only keyfile reader, so the
// network policy, apply, verify and bootstrap see one and the same profile,
// the one NetworkManager loads (docs/reliability.md, "Network-config
// policy"; held to nmcli --offline by netpolicy's differential test).
package keyfile

import (
	"errors"
	"fmt"
	"strings"
	"unicode"
)

// File is a parsed key file. As in GLib, a group given twice is one group
// (its keys merged, in the place of its first header) and a key given
// twice in a group keeps its last value.
type File struct {
	groups []string
	keys   map[string][]string          // group -> keys, in first-seen order
	vals   map[string]map[string]string // group -> key -> raw value
}

// SyntaxError is a file GLib refuses to load as a whole: NetworkManager
// then loads no profile from it.
type SyntaxError struct {
	Line   int
	Reason string
}

func (e *SyntaxError) Error() string { return fmt.Sprintf("line %d: %s", e.Line, e.Reason) }

// isSpace is g_ascii_isspace: blank, tab, newline, form feed and carriage
// return; not vertical tab (GLib's table leaves it out, and nmcli 1.42
// refuses a "\v[connection]" line).
func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\f' || c == '\r' }

// Parse reads b as g_key_file_load_from_data does. Lines end at '\n' (one
// '\r' before it is dropped) and, as GLib works on C strings, at a NUL
// byte. Leading whitespace (g_ascii_isspace) is skipped; then a line is a
// comment (it starts with '#', or is empty), a group header ("[name]",
// blanks allowed after ']'), or key=value: the key is what precedes the
// first '=' less trailing whitespace, the value what follows it less
// leading whitespace (trailing whitespace is kept). Anything else, a key
// before any group, an invalid group or key name, or an Encoding other
// than UTF-8 in the first group, makes the whole file unreadable.
func Parse(b []byte) (*File, error) {
	f := &File{keys: map[string][]string{}, vals: map[string]map[string]string{}}
	for _, l := range Lines(b) {
		switch {
		case l.Comment:
		case l.Header:
			if !validGroupName(l.Group) {
				return nil, &SyntaxError{l.Number, fmt.Sprintf("invalid group name %q", l.Group)}
			}
			if _, ok := f.vals[l.Group]; !ok {
				f.groups = append(f.groups, l.Group)
				f.vals[l.Group] = map[string]string{}
			}
		case l.Key != "":
			if l.Group == "" {
				return nil, &SyntaxError{l.Number, "a key before any group"}
			}
			if !validKeyName(l.Key) {
				return nil, &SyntaxError{l.Number, fmt.Sprintf("invalid key name %q", l.Key)}
			}
			if l.Group == f.groups[0] && l.Key == "Encoding" && !strings.EqualFold(l.Value, "UTF-8") {
				return nil, &SyntaxError{l.Number, fmt.Sprintf("unsupported encoding %q", l.Value)}
			}
			if _, ok := f.vals[l.Group][l.Key]; !ok {
				f.keys[l.Group] = append(f.keys[l.Group], l.Key)
			}
			f.vals[l.Group][l.Key] = l.Value
		default:
			return nil, &SyntaxError{l.Number, fmt.Sprintf("%q is neither a key=value pair, a group nor a comment", l.Text)}
		}
	}
	return f, nil
}

// Line is one line of a keyfile told apart as GLib tells lines apart (the
// one place that does, for Parse, Rewrite and callers that point at a
// line): a comment, a group header, a key=value line, or none of them.
type Line struct {
	Number int
	// Text is the line less its end ("\n", or "\r\n"), cut at a NUL
	// byte, leading whitespace skipped.
	Text string
	// Comment: it starts with '#' or is empty.
	Comment bool
	// Header: a group header; Group is then its name. Otherwise Group is
	// the group the line is in ("" before the first header).
	Header bool
	Group  string
	// Key and Value of a key=value line (Key "" for any other line).
	Key, Value string

	raw     string // the line with its end, as in the file
	valueAt int    // where Value starts in raw
}

// Lines splits b into its lines. Nothing is validated: a header's name or
// a key may still be one GLib refuses (Parse says so).
func Lines(b []byte) []Line {
	parts := strings.SplitAfter(string(b), "\n")
	if len(parts) > 0 && parts[len(parts)-1] == "" {
		parts = parts[:len(parts)-1]
	}
	out := make([]Line, 0, len(parts))
	group := ""
	for i, raw := range parts {
		body := strings.TrimSuffix(raw, "\n")
		if len(body) < len(raw) {
			body = strings.TrimSuffix(body, "\r") // GLib drops it only before a '\n'
		}
		if j := strings.IndexByte(body, 0); j >= 0 {
			body = body[:j]
		}
		t := body
		for len(t) > 0 && isSpace(t[0]) {
			t = t[1:]
		}
		l := Line{Number: i + 1, Text: t, Group: group, raw: raw}
		switch {
		case t == "" || t[0] == '#':
			l.Comment = true
		case isGroupLine(t):
			l.Header, l.Group = true, t[1:strings.LastIndexByte(t, ']')]
			group = l.Group
		case strings.IndexByte(t, '=') > 0:
			k, v, _ := strings.Cut(t, "=")
			l.Key = strings.TrimRightFunc(k, func(r rune) bool { return r < 0x80 && isSpace(byte(r)) })
			for len(v) > 0 && isSpace(v[0]) {
				v = v[1:]
			}
			l.Value, l.valueAt = v, len(body)-len(v)
		}
		out = append(out, l)
	}
	return out
}

// isGroupLine: '[', anything up to the first ']', then only blanks and
// tabs.
func isGroupLine(line string) bool {
	if line[0] != '[' {
		return false
	}
	end := strings.IndexByte(line, ']')
	return end > 0 && strings.Trim(line[end+1:], " \t") == ""
}

// validGroupName is g_key_file_is_group_name: not empty, no '[', ']' or
// ASCII control character.
func validGroupName(name string) bool {
	if name == "" {
		return false
	}
	for i := 0; i < len(name); i++ {
		if c := name[i]; c == '[' || c == ']' || c < 0x20 || c == 0x7f {
			return false
		}
	}
	return true
}

// validKeyName is g_key_file_is_key_name: not empty, no '=', '[' or ']'
// except for one trailing locale suffix "[xx_YY.enc@mod]", no leading or
// trailing blank.
func validKeyName(k string) bool {
	base, loc, hasLoc := strings.Cut(k, "[")
	if base == "" || strings.ContainsAny(base, "=]") || base[0] == ' ' || base[len(base)-1] == ' ' {
		return false
	}
	if !hasLoc {
		return true
	}
	loc, ok := strings.CutSuffix(loc, "]")
	if !ok {
		return false
	}
	for _, r := range loc {
		if !(r == '-' || r == '_' || r == '.' || r == '@' || unicode.IsLetter(r) || unicode.IsNumber(r)) {
			return false
		}
	}
	return true
}

// Groups lists the groups in the order of their first header.
func (f *File) Groups() []string { return append([]string(nil), f.groups...) }

// HasGroup says whether the file has the group.
func (f *File) HasGroup(g string) bool { _, ok := f.vals[g]; return ok }

// Keys lists a group's keys in the order they first appear.
func (f *File) Keys(g string) []string { return append([]string(nil), f.keys[g]...) }

// Value is a key's raw value (g_key_file_get_value): escapes not undone.
func (f *File) Value(g, k string) (string, bool) {
	v, ok := f.vals[g][k]
	return v, ok
}

// ErrNotFound: the group or the key is not in the file.
var ErrNotFound = errors.New("no such key")

// ValueError is a value GLib's getter refuses: NetworkManager then drops
// the key (reads it as absent).
type ValueError struct{ Reason string }

func (e *ValueError) Error() string { return e.Reason }

// String is g_key_file_get_string: the value unescaped (Unescape).
func (f *File) String(g, k string) (string, error) {
	v, ok := f.Value(g, k)
	if !ok {
		return "", ErrNotFound
	}
	return Unescape(v)
}

// StringList is g_key_file_get_string_list (SplitList).
func (f *File) StringList(g, k string) ([]string, error) {
	v, ok := f.Value(g, k)
	if !ok {
		return nil, ErrNotFound
	}
	return SplitList(v)
}

// Boolean is g_key_file_get_boolean: the raw value less trailing
// whitespace must be exactly true or 1, false or 0 (no escapes, case
// matters).
func (f *File) Boolean(g, k string) (bool, error) {
	v, ok := f.Value(g, k)
	if !ok {
		return false, ErrNotFound
	}
	switch strings.TrimRightFunc(v, func(r rune) bool { return r < 0x80 && isSpace(byte(r)) }) {
	case "true", "1":
		return true, nil
	case "false", "0":
		return false, nil
	}
	return false, &ValueError{fmt.Sprintf("%q is not a boolean (true, false, 1, 0)", v)}
}

// Unescape undoes GLib's string escapes: \s \n \t \r \\ become a blank,
// newline, tab, carriage return and backslash. Any other escape (\; too:
// it belongs to lists) and a lone backslash at the end are refused, as
// g_key_file_get_string refuses them.
func Unescape(raw string) (string, error) {
	s, _, err := unescape(raw, false)
	return s, err
}

// SplitList is a list value as g_key_file_get_string_list reads it: split
// at each ';' that is not escaped as "\;", the string escapes undone in
// each item; an empty last item (a trailing ';') is dropped, other empty
// items are kept. An escape Unescape refuses fails the whole list.
func SplitList(raw string) ([]string, error) {
	_, items, err := unescape(raw, true)
	return items, err
}

func unescape(raw string, list bool) (string, []string, error) {
	var b strings.Builder
	var items []string
	start := 0 // where the current item starts in b
	for i := 0; i < len(raw); i++ {
		c := raw[i]
		if c != '\\' {
			b.WriteByte(c)
			if list && c == ';' {
				items = append(items, b.String()[start:b.Len()-1])
				start = b.Len()
			}
			continue
		}
		if i+1 == len(raw) {
			return "", nil, &ValueError{"escape character at the end of the value"}
		}
		i++
		switch raw[i] {
		case 's':
			b.WriteByte(' ')
		case 'n':
			b.WriteByte('\n')
		case 't':
			b.WriteByte('\t')
		case 'r':
			b.WriteByte('\r')
		case '\\':
			b.WriteByte('\\')
		case ';':
			if !list {
				return "", nil, &ValueError{`invalid escape sequence "\;" in a string (it is a list's escape)`}
			}
			b.WriteByte(';')
		default:
			return "", nil, &ValueError{fmt.Sprintf("invalid escape sequence %q", raw[i-1:i+1])}
		}
	}
	s := b.String()
	if list && start < len(s) {
		items = append(items, s[start:])
	}
	return s, items, nil
}

// Rewrite returns b with what follows '=' on each key=value line whose raw
// value edit changes replaced by the new raw value, every other byte kept:
// the lines are told apart as Parse tells them (so a '#' comment is never edited, and a ';' line is a
// key). b should parse; the lines of a file that does not are kept.
func Rewrite(b []byte, edit func(group, key, raw string) (string, bool)) []byte {
	var out strings.Builder
	for _, l := range Lines(b) {
		if l.Key != "" && l.Group != "" {
			if nv, ok := edit(l.Group, l.Key, l.Value); ok {
				// Replaced from just after '=', the end of the line kept.
				eq := strings.LastIndexByte(l.raw[:l.valueAt], '=')
				out.WriteString(l.raw[:eq+1] + nv + l.raw[l.valueAt+len(l.Value):])
				continue
			}
		}
		out.WriteString(l.raw)
	}
	return []byte(out.String())
}
