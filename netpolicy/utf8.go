package netpolicy

import (
	"fmt"
	"maps"
	"slices"
	"unicode/utf8"

	"github.com/nodereg/nodereg/internal/keyfile"
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
	for _, l := range keyfile.Lines(text) {
		switch {
		case utf8.ValidString(l.Text):
		case l.Header:
			return utf8Refusal(fmt.Sprintf("%s [%s]", label, quoteBad(l.Group)))
		case l.Key != "":
			return utf8Refusal(fmt.Sprintf("%s [%s] %s", label, quoteBad(l.Group), quoteBad(l.Key)))
		default:
			return utf8Refusal(fmt.Sprintf("%s line %d", label, l.Number))
		}
	}
	return utf8Refusal(label) // after a NUL byte, which ends a line for GLib
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
