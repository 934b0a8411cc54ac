package nmstate

import (
	"errors"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"

	"gopkg.in/yaml.v3"
)

// This file reads yaml.v3 nodes the way nmstate's reader reads the same
// text: serde_yaml 0.8.26 resolves plain scalars itself (visit_untagged_str:
// only ~ and null are null, only true and false are booleans, 0x/0o/0b
// integers, digits with leading zeros are text), and nmstate's lenient
// deserialisers (rust/src/lib/deserializer.rs) take booleans as
// 1|0|true|false|yes|no|on|off|y|n in any case and unsigned integers as
// numbers or decimal or 0x-hex text. Inside interfaces[] nmstate goes
// through serde_json::Value, so a plain 123 or true there is not text.
// Anything else is refused with its key path.

// keyRecorder, when set (by a test), sees every key list mapping reads: the
// parser's own subset, which docs/nmstate.md's table must list.
var keyRecorder func(path string, known []string)

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
// isNull is YAML null as serde_yaml reads it: a plain ~ or null. (yaml.v3
// also reads Null, NULL and an empty value as null; serde_yaml reads them as
// text.)
func isNull(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode && n.Style == 0 && (n.Value == "~" || n.Value == "null")
}

// Compiled on first use: package start-up stays free for the commands
// that translate nothing.
var (
	decimalRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[+-]?[0-9]+$`) })
	floatRE   = sync.OnceValue(func() *regexp.Regexp {
		return regexp.MustCompile(`^[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?$`)
	})
)

// untagged is the type serde_yaml 0.8.26 gives a plain scalar when the
// target takes any type: "null", "bool", "int", "float" or "str".
func untagged(v string) string {
	switch v {
	case "~", "null":
		return "null"
	case "true", "false":
		return "bool"
	}
	if _, _, ok := radixInt(v); ok {
		return "int"
	}
	if t := strings.TrimLeft(v, "+-"); len(t) > 1 && t[0] == '0' && decimalRE().MatchString(t) {
		return "str"
	}
	if decimalRE().MatchString(v) && len(strings.TrimLeft(v, "+-")) <= 38 && strings.Count(v[:1], "+")+strings.Count(v[:1], "-") <= 1 {
		return "int"
	}
	switch strings.TrimLeft(v, "+") {
	case ".inf", ".Inf", ".INF":
		return "float"
	}
	switch v {
	case "-.inf", "-.Inf", "-.INF", ".nan", ".NaN", ".NAN":
		return "float"
	}
	if floatRE().MatchString(v) {
		if f, err := strconv.ParseFloat(v, 64); err == nil && !math.IsInf(f, 0) {
			return "float"
		}
	}
	return "str"
}

// radixInt reads 0x, 0o and 0b integers with an optional sign, as
// serde_yaml does.
func radixInt(v string) (mag uint64, neg bool, ok bool) {
	s := v
	switch {
	case strings.HasPrefix(s, "-"):
		s, neg = s[1:], true
	case strings.HasPrefix(s, "+"):
		s = s[1:]
	}
	base := 0
	switch {
	case strings.HasPrefix(s, "0x"):
		base = 16
	case strings.HasPrefix(s, "0o"):
		base = 8
	case strings.HasPrefix(s, "0b"):
		base = 2
	default:
		return 0, false, false
	}
	digits := s[2:]
	if digits == "" || strings.ContainsAny(digits[:1], "+-") {
		return 0, false, false
	}
	m, err := strconv.ParseUint(digits, base, 64)
	if err != nil || (neg && m > 1<<63) {
		return 0, false, false
	}
	return m, neg && m != 0, true
}

// checkNode refuses what serde_yaml would treat differently from yaml.v3 or
// what could make a small input expand: aliases and custom tags.
func checkNode(path string, n *yaml.Node) error {
	if n.Kind == yaml.AliasNode {
		return unsupported(path, "YAML aliases are not supported")
	}
	if n.Style&yaml.TaggedStyle != 0 || (n.Tag != "" && !strings.HasPrefix(n.Tag, "!!")) {
		return unsupported(path, "YAML tag %q is not supported", n.Tag)
	}
	if isNull(n) {
		// nmstate reads null as "not given" for some keys and refuses it for
		// others; templates do not need it.
		return unsupported(path, "null values are not supported")
	}
	return nil
}

// mapping returns the fields of a mapping in document order; a null node is
// an empty mapping. known lists the keys this translator reads; nmstateKeys
// the other keys nmstate would accept there (refused as outside the subset,
// not as unknown).
func mapping(path string, n *yaml.Node, known, nmstateKeys []string) ([]field, error) {
	if keyRecorder != nil {
		keyRecorder(path, known)
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
		case slices.Contains(known, k.Value):
		case slices.Contains(nmstateKeys, k.Value):
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

// sequence returns the items of a list, at most max of them.
func sequence(path string, n *yaml.Node, max int) ([]*yaml.Node, error) {
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

// versionDependent are plain scalars serde_yaml 0.8.26 reads as text and
// serde_yaml 0.9 (what nmstate releases link) as null or boolean.
var versionDependent = []string{"", "Null", "NULL", "True", "TRUE", "False", "FALSE"}

// str reads a scalar as text, as serde_yaml does for a String field (a
// plain 100 is the string "100"). strict is for keys under interfaces[],
// where nmstate reads through serde_json::Value: a plain scalar that is a
// number or boolean there is not a string. maxLen bounds it.
func str(path string, n *yaml.Node, maxLen int, strict bool) (string, error) {
	if n.Kind != yaml.ScalarNode {
		return "", invalid(path, "invalid type: expected a string")
	}
	if n.Style == 0 && slices.Contains(versionDependent, n.Value) {
		return "", unsupported(path, "plain %q is text for the serde_yaml 0.8 that made the gen_conf vectors but null or a boolean for the serde_yaml 0.9 of nmstate releases: quote it", n.Value)
	}
	if k := untagged(n.Value); strict && n.Style == 0 && k != "str" {
		return "", invalid(path, "invalid type: %s `%s`, expected a string", k, n.Value)
	}
	if len(n.Value) > maxLen {
		return "", unsupported(path, "longer than %d bytes", maxLen)
	}
	return n.Value, nil
}

func boolean(path string, n *yaml.Node) (bool, error) {
	if n.Kind == yaml.ScalarNode {
		v := n.Value
		if n.Style == 0 {
			switch untagged(v) {
			case "bool":
				return v == "true", nil
			case "int":
				if m, neg, err := plainInt(v); err == nil && !neg && m <= 1 {
					return m == 1, nil
				}
				return false, invalid(path, "Need to be boolean: 1|0|true|false|yes|no|on|off|y|n")
			case "str":
			default:
				return false, invalid(path, "Need to be boolean: 1|0|true|false|yes|no|on|off|y|n")
			}
		}
		switch strings.ToLower(v) {
		case "1", "true", "yes", "on", "y":
			return true, nil
		case "0", "false", "no", "off", "n":
			return false, nil
		}
	}
	return false, invalid(path, "Need to be boolean: 1|0|true|false|yes|no|on|off|y|n")
}

// plainInt is the value of a plain scalar untagged reads as "int".
func plainInt(v string) (mag uint64, neg bool, err error) {
	if m, n, ok := radixInt(v); ok {
		return m, n, nil
	}
	s := strings.TrimPrefix(v, "+")
	if rest, ok := strings.CutPrefix(v, "-"); ok {
		s, neg = rest, true
	}
	mag, err = strconv.ParseUint(s, 10, 64)
	if err != nil || (neg && mag > 1<<63) {
		return 0, false, errors.New("out of range")
	}
	return mag, neg && mag != 0, nil
}

// unsigned reads an unsigned integer no larger than max: a YAML integer, or
// text holding a decimal (Rust's parse: a leading + is fine) or 0x-prefixed
// hexadecimal number.
func unsigned(path string, n *yaml.Node, max uint64) (uint64, error) {
	if n.Kind != yaml.ScalarNode {
		return 0, invalid(path, "invalid type: expected an unsigned integer or a string")
	}
	var v uint64
	var neg bool
	var err error
	kind := "str"
	if n.Style == 0 {
		kind = untagged(n.Value)
	}
	switch kind {
	case "int":
		v, neg, err = plainInt(n.Value)
	case "str":
		if h, ok := strings.CutPrefix(n.Value, "0x"); ok {
			v, err = strconv.ParseUint(h, 16, 64)
		} else {
			v, err = strconv.ParseUint(strings.TrimPrefix(n.Value, "+"), 10, 64)
			if strings.HasPrefix(n.Value, "+-") || strings.HasPrefix(n.Value, "++") {
				err = errors.New("sign")
			}
		}
	default:
		err = errors.New("not an integer")
	}
	if err != nil || neg {
		return 0, invalid(path, "invalid type or value %q: expected an unsigned integer or a string", n.Value)
	}
	if v > max {
		return 0, invalid(path, "out of range integral type conversion attempted: %d is larger than %d", v, max)
	}
	return v, nil
}

// signed reads a signed 64-bit integer: a YAML integer or decimal text.
func signed(path string, n *yaml.Node) (int64, error) {
	if n.Kind != yaml.ScalarNode {
		return 0, invalid(path, "invalid type: expected a signed integer or a string")
	}
	kind := "str"
	if n.Style == 0 {
		kind = untagged(n.Value)
	}
	var mag uint64
	var neg bool
	var err error
	switch kind {
	case "int":
		mag, neg, err = plainInt(n.Value)
	case "str":
		var v int64
		if v, err = strconv.ParseInt(n.Value, 10, 64); err == nil {
			return v, nil
		}
	default:
		err = errors.New("not an integer")
	}
	switch {
	case err != nil || (!neg && mag > math.MaxInt64):
		return 0, invalid(path, "invalid type or value %q: expected a signed integer or a string", n.Value)
	case neg:
		return -int64(mag-1) - 1, nil
	}
	return int64(mag), nil
}

const maxU32 = math.MaxUint32
