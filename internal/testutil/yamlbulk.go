package testutil

import (
	"fmt"
	"strings"
)

// YAML that is small as text and large once its aliases are expanded, for
// the tests that hold a parser to a node budget (protocol.YAMLBudget).

// zeros is a flow list of n zeros.
func zeros(n int) string { return "[" + strings.TrimSuffix(strings.Repeat("0, ", n), ", ") + "]" }

// AliasBulk is a mapping entry key, indented by indent: an anchor of 1023
// zeros and a list of aliases aliases of it. Once expanded it is
// AliasBulkNodes(aliases) YAML nodes: the key, the mapping, the key a, the
// anchored list and its zeros (1+1023), the key b, its list, and 1024 per
// alias.
func AliasBulk(indent, key string, aliases int) string {
	return fmt.Sprintf("%s%s:\n%s  a: &a %s\n%s  b: [%s]\n", indent, key, indent, zeros(1023), indent,
		strings.TrimSuffix(strings.Repeat("*a, ", aliases), ", "))
}

// AliasBulkNodes is the expanded size of AliasBulk(_, _, aliases).
func AliasBulkNodes(aliases int) int { return 1 + 1 + 1 + 1 + 1023 + 1 + 1 + 1024*aliases }

// AmplifyAnchors is the amplification shape's anchors, under key:
// a, 1000 zeros, and b, 100 aliases of a (about 100,000 nodes, under the
// budget on its own); AmplifyValues then uses b once per value.
func AmplifyAnchors(indent, key string) string {
	return fmt.Sprintf("%s%s:\n%s  a: &a %s\n%s  b: &b [%s]\n", indent, key, indent, zeros(1000), indent,
		strings.TrimSuffix(strings.Repeat("*a, ", 100), ", "))
}

// AmplifyValues is n mapping entries "kN: [0, *b]" indented by indent:
// each value alone under the budget, together n times it.
func AmplifyValues(indent string, n int) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "%sk%d: [0, *b]\n", indent, i)
	}
	return b.String()
}
