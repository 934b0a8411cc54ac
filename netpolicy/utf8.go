package netpolicy

import (
	"bufio"
	"bytes"
	"fmt"
	"maps"
	"slices"
	"strings"
	"unicode/utf8"
)

// NetworkManager reads keyfiles and names as UTF-8: GLib refuses a key-file
// line that is not, and drops a value that is not, so a profile with such a
// byte binds to something else than was checked (an interface-name dropped
// binds to any device). Invalid UTF-8 is refused everywhere, first, by the
// names rule (docs/reliability.md, "Network-config policy").

const notUTF8 = "is not valid UTF-8: NetworkManager would drop or refuse it, and the profile would not be what was checked"

// CheckUTF8Keyfile refuses a keyfile holding a byte sequence that is not
// UTF-8, naming the section and key it is in. The plan checks every
// keyfile so; apply's rendering calls it first on the server's own.
func CheckUTF8Keyfile(label string, text []byte) error {
	if utf8.Valid(text) {
		return nil
	}
	sec := ""
	sc := bufio.NewScanner(bytes.NewReader(text))
	sc.Buffer(make([]byte, 0, 4096), len(text)+1)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimLeft(sc.Text(), " \t")
		valid := utf8.ValidString(line)
		switch {
		case strings.HasPrefix(line, "["):
			if end := strings.IndexByte(line, ']'); end > 0 {
				sec = line[1:end]
			}
			if !valid {
				return utf8Refusal(fmt.Sprintf("%s [%s]", label, quoteBad(sec)))
			}
		case !valid:
			k, _, ok := strings.Cut(line, "=")
			if !ok || strings.HasPrefix(line, "#") {
				return utf8Refusal(fmt.Sprintf("%s line %d", label, n))
			}
			return utf8Refusal(fmt.Sprintf("%s [%s] %s", label, quoteBad(sec), quoteBad(strings.TrimRight(k, " \t"))))
		}
	}
	return utf8Refusal(label) // a line the scanner did not split (a lone \r)
}

// CheckUTF8Value refuses a key or string of a state that is not UTF-8,
// naming its path; apply's rendering calls it before anything else.
func CheckUTF8Value(path string, v any) error {
	switch t := v.(type) {
	case map[string]any:
		for _, k := range slices.Sorted(maps.Keys(t)) {
			kp := path + "." + quoteBad(k)
			if !utf8.ValidString(k) {
				return utf8Refusal(kp)
			}
			if err := CheckUTF8Value(kp, t[k]); err != nil {
				return err
			}
		}
	case map[any]any: // a YAML mapping with a !!binary key
		for k, e := range t {
			ks, ok := k.(string)
			if ok && !utf8.ValidString(ks) {
				return utf8Refusal(path + "." + quoteBad(ks))
			}
			if err := CheckUTF8Value(path+"."+fmt.Sprint(k), e); err != nil {
				return err
			}
		}
	case []any:
		for i, e := range t {
			if err := CheckUTF8Value(fmt.Sprintf("%s[%d]", path, i), e); err != nil {
				return err
			}
		}
	case string:
		if !utf8.ValidString(t) {
			return utf8Refusal(path)
		}
	}
	return nil
}

func utf8Refusal(path string) error {
	return &Refusal{Path: path, Rule: Names, Reason: "the value " + notUTF8}
}

// quoteBad quotes s only when it is not UTF-8, so the refusal can be
// printed and names the key as it is otherwise.
func quoteBad(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	return fmt.Sprintf("%q", s)
}
