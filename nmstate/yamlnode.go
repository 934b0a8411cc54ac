package nmstate

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// This file reads yaml.v3 nodes with the leniency of nmstate's serde
// deserialisers (rust/src/lib/deserializer.rs at the matched commit):
// booleans as 1|0|true|false|yes|no|on|off|y|n in any case, unsigned
// integers as numbers or as decimal or 0x-hex strings. Anything the
// translator does not know is refused with its key path.

type field struct {
	key  string
	val  *yaml.Node
	path string
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func index(path string, i int) string { return fmt.Sprintf("%s[%d]", path, i) }

// isNull is YAML null as serde_yaml 0.8 (yaml-rust) reads it: ~, null or
// nothing. yaml.v3 also reads Null and NULL as null; yaml-rust reads them as
// text, and so does this package.
func isNull(n *yaml.Node) bool {
	return n == nil || (n.Kind == yaml.ScalarNode && n.Tag == "!!null" && n.Style == 0 &&
		(n.Value == "" || n.Value == "~" || n.Value == "null"))
}

// checkNode refuses what serde_yaml would treat differently from yaml.v3 or
// what could make a small input expand: aliases and custom tags.
func checkNode(path string, n *yaml.Node) error {
	if n.Kind == yaml.AliasNode {
		return unsupported(path, "YAML aliases are not supported")
	}
	if n.Tag != "" && !strings.HasPrefix(n.Tag, "!!") {
		return unsupported(path, "YAML tag %q is not supported", n.Tag)
	}
	return nil
}

// mapping returns the fields of a mapping in document order; a null node is
// an empty mapping. known lists the keys this translator reads; nmstateKeys
// the other keys nmstate would accept there (refused as outside the subset,
// not as unknown).
func mapping(path string, n *yaml.Node, known, nmstateKeys []string) ([]field, error) {
	if isNull(n) {
		return nil, nil
	}
	if err := checkNode(path, n); err != nil {
		return nil, err
	}
	if n.Kind != yaml.MappingNode {
		return nil, invalid(path, "invalid type: expected a mapping")
	}
	var out []field
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if err := checkNode(path, k); err != nil {
			return nil, err
		}
		if k.Kind != yaml.ScalarNode {
			return nil, invalid(path, "mapping key is not a string")
		}
		p := join(path, k.Value)
		if err := checkNode(p, v); err != nil {
			return nil, err
		}
		switch {
		case contains(known, k.Value):
		case contains(nmstateKeys, k.Value):
			return nil, unsupported(p, "key %q is outside the supported subset of nmstate (docs/nmstate.md)", k.Value)
		default:
			return nil, invalid(p, "unknown field `%s`", k.Value)
		}
		if seen[k.Value] {
			return nil, invalid(p, "duplicate field `%s`", k.Value)
		}
		seen[k.Value] = true
		out = append(out, field{key: k.Value, val: v, path: p})
	}
	return out, nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// sequence returns the items of a list, at most max of them; null is empty.
func sequence(path string, n *yaml.Node, max int) ([]*yaml.Node, error) {
	if isNull(n) {
		return nil, nil
	}
	if n.Kind != yaml.SequenceNode {
		return nil, invalid(path, "invalid type: expected a sequence")
	}
	if len(n.Content) > max {
		return nil, unsupported(path, "more than %d entries", max)
	}
	for i, it := range n.Content {
		if err := checkNode(index(path, i), it); err != nil {
			return nil, err
		}
	}
	return n.Content, nil
}

// str reads a scalar as text, as serde_yaml does for a String field (a
// plain 100 is the string "100"). maxLen bounds it.
func str(path string, n *yaml.Node, maxLen int) (string, error) {
	if n.Kind != yaml.ScalarNode || isNull(n) {
		return "", invalid(path, "invalid type: expected a string")
	}
	if len(n.Value) > maxLen {
		return "", unsupported(path, "longer than %d bytes", maxLen)
	}
	return n.Value, nil
}

func boolean(path string, n *yaml.Node) (bool, error) {
	if n.Kind == yaml.ScalarNode && n.Tag != "!!float" && !isNull(n) {
		switch strings.ToLower(n.Value) {
		case "1", "true", "yes", "on", "y":
			return true, nil
		case "0", "false", "no", "off", "n":
			return false, nil
		}
	}
	return false, invalid(path, "Need to be boolean: 1|0|true|false|yes|no|on|off|y|n")
}

// unsigned reads an unsigned integer no larger than max: a YAML integer, or
// a string holding a decimal or 0x-prefixed hexadecimal number.
func unsigned(path string, n *yaml.Node, max uint64) (uint64, error) {
	if n.Kind != yaml.ScalarNode || (n.Tag != "!!int" && n.Tag != "!!str") {
		return 0, invalid(path, "invalid type: expected an unsigned integer or a string")
	}
	v, neg, err := integer(n)
	if err != nil || neg || strings.HasPrefix(n.Value, "-") {
		return 0, invalid(path, "invalid unsigned integer %q", n.Value)
	}
	if v > max {
		return 0, invalid(path, "out of range integral type conversion attempted: %d is larger than %d", v, max)
	}
	return v, nil
}

// signed reads a signed 64-bit integer: a YAML integer or a decimal string.
func signed(path string, n *yaml.Node) (int64, error) {
	if n.Kind != yaml.ScalarNode || (n.Tag != "!!int" && n.Tag != "!!str") {
		return 0, invalid(path, "invalid type: expected a signed integer or a string")
	}
	v, neg, err := integer(n)
	if err == nil && n.Tag == "!!str" && strings.HasPrefix(n.Value, "0x") {
		err = errors.New("no hex for signed") // nmstate's i64 string parse is decimal only
	}
	switch {
	case err != nil || v > math.MaxInt64+1 || (!neg && v > math.MaxInt64):
		return 0, invalid(path, "invalid signed integer %q", n.Value)
	case neg:
		return -int64(v-1) - 1, nil
	}
	return int64(v), nil
}

// integer reads the text itself rather than trusting yaml.v3, which reads
// 010 as octal and drops underscores. As YAML integers, yaml-rust takes
// 0x (hex), 0o (octal) and decimal with a sign; as strings, nmstate takes
// 0x (hex, unsigned only) and decimal (Rust's parse, a leading + allowed).
func integer(n *yaml.Node) (v uint64, neg bool, err error) {
	s := n.Value
	if n.Tag == "!!int" {
		if h, ok := strings.CutPrefix(s, "0x"); ok {
			v, err = strconv.ParseUint(h, 16, 64)
			return v, false, err
		}
		if o, ok := strings.CutPrefix(s, "0o"); ok {
			v, err = strconv.ParseUint(o, 8, 64)
			return v, false, err
		}
	} else if h, ok := strings.CutPrefix(s, "0x"); ok {
		v, err = strconv.ParseUint(h, 16, 64)
		return v, false, err
	}
	if rest, ok := strings.CutPrefix(s, "-"); ok {
		s, neg = rest, true
	} else {
		s = strings.TrimPrefix(s, "+")
	}
	if s == "" || s[0] < '0' || s[0] > '9' {
		return 0, false, errors.New("not a number")
	}
	v, err = strconv.ParseUint(s, 10, 64)
	if neg && v == 0 {
		neg = false
	}
	return v, neg, err
}

const maxU32 = math.MaxUint32
