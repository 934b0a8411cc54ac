package netpolicy

import "fmt"

// Shapes of an nmstate state that a generator reads but a key-by-key walk
// would pass over (docs/reliability.md, "Network-config policy").

// interfaceList is interfaces: as the list it must be. nmstatectl reads a
// mapping too (each value an interface), so one is refused by the unknown
// rule rather than left unjudged.
func (p Policy) interfaceList(path string, v any) ([]any, error) {
	switch t := v.(type) {
	case nil:
		return nil, nil
	case []any:
		return t, nil
	}
	return nil, p.refuse(path, Unknown, "interfaces given as %s, not a list: the policy judges interfaces one by one in a list", kindOf(v))
}

func kindOf(v any) string {
	switch v.(type) {
	case map[string]any, map[any]any:
		return "a mapping"
	case string:
		return "a string"
	}
	return fmt.Sprintf("a %T", v)
}
