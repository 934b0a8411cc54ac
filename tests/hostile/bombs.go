package hostile

import (
	"fmt"
	"strings"

	"github.com/nodereg/nodereg/protocol"
)

// Replies built to be small on the wire and huge once decoded. Each is a
// MsgConfig payload under protocol.DefaultMaxFrame.

// zeros is a flow list of n zeros.
func zeros(n int) string { return strings.TrimSuffix(strings.Repeat("0, ", n), ", ") }

// aliasAnchors is the ignored top-level key that holds the anchors: a, a
// list of 1000 zeros, and b, 390 aliases of a.
func aliasAnchors() string {
	return "anchors:\n    a: &a [" + zeros(1000) + "]\n    b: &b [" + strings.TrimSuffix(strings.Repeat("*a, ", 390), ", ") + "]\n"
}

// fill appends "    kN: value" lines under section until the payload
// reaches size bytes.
func fill(head, section, value string, size int) []byte {
	var b strings.Builder
	b.WriteString(head + section + ":\n")
	for i := 0; b.Len()+len(value)+16 < size; i++ {
		fmt.Fprintf(&b, "    k%d: %s\n", i, value)
	}
	return []byte(b.String())
}

// keys is n lines "    kN: value".
func keys(n int, value string) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "    k%d: %s\n", i, value)
	}
	return b.String()
}

// issueReply is the alias-bomb reply docs/reliability.md ("Hostile
// server") measures: anchors under an ignored
// key, each config.kN = [4000 zeros, *b], about 4,009,647 bytes.
func issueReply() []byte {
	return fill(aliasAnchors()+"configurator: nmstate\n", "config", "["+zeros(4000)+", *b]", 4009647)
}

// bomb is one hostile reply, refused or not.
type bomb struct {
	name string
	doc  func() []byte
	// accepted: the reply is within the budget; it must decode.
	accepted bool
}

var bombs = []bomb{
	{name: "issue-item-1", doc: issueReply},
	{name: "alias-per-value-network-config", doc: func() []byte {
		return fill(aliasAnchors()+"configurator: nmstate\n", "config", "[0, *b]", protocol.DefaultMaxFrame-64)
	}},
	{name: "alias-per-value-cloud-config", doc: func() []byte {
		return fill(aliasAnchors(), "cloud-config", "[0, *b]", protocol.DefaultMaxFrame-64)
	}},
	{name: "anchors-inside-network-config", doc: func() []byte {
		return fill("configurator: nmstate\nconfig:\n    anchors: &b [&a ["+zeros(1000)+"], "+strings.Repeat("*a, ", 389)+"*a]\n", "cloud-config", "{users: [*b]}", protocol.DefaultMaxFrame-64)
	}},
	{name: "nested-sequences-of-maps", doc: func() []byte {
		return fill(aliasAnchors()+"configurator: nmstate\n", "config", "[{interfaces: [{name: *a}, {name: [*b]}]}]", protocol.DefaultMaxFrame-64)
	}},
	{name: "raw-bytes-alias", doc: func() []byte {
		return fill("anchors:\n    a: &a ["+strings.TrimSuffix(strings.Repeat("48, ", 4000), ", ")+"]\nconfigurator: nmstate\n", "config", "{raw: *a, object: null}", protocol.DefaultMaxFrame-64)
	}},
	{name: "long-string-aliases", doc: func() []byte {
		return fill("s: &s "+strings.Repeat("x", 1<<20)+"\n", "cloud-config", "[*s, *s, *s, *s]", protocol.DefaultMaxFrame-64)
	}},
	{name: "flow-zeros-full-frame", doc: func() []byte {
		return []byte("config:\n    k: [" + zeros(protocol.DefaultMaxFrame/3-8) + "]\n")
	}},
	{name: "alias-per-value-under-the-pre-check", doc: func() []byte {
		// Few enough nodes on the wire to be parsed; the expansion,
		// counted across values, is refused.
		return fill(aliasAnchors()+"configurator: nmstate\n", "config", "[0, *b]", 16<<10)
	}},
	{name: "aliases-within-budget", accepted: true, doc: func() []byte {
		// 12 keys of 10 aliases of 1000 nodes and 200 of their own:
		// 122,400 nodes (yaml.v3 refuses a value that is nearly all
		// aliases on its own).
		head := "anchors:\n    a: &a [" + zeros(1000) + "]\nconfigurator: nmstate\n"
		value := "[" + zeros(200) + ", *a, *a, *a, *a, *a, *a, *a, *a, *a, *a]"
		return []byte(head + "config:\n" + keys(12, value))
	}},
	{name: "flow-zeros-within-budget", accepted: true, doc: func() []byte {
		return []byte("cloud-config:\n    k: [" + zeros(protocol.MaxReplyNodes/2-8) + "]\n")
	}},
	{name: "upstream-encoding-within-budget", accepted: true, doc: func() []byte {
		// About 120 KiB of cloud-config in upstream's raw encoding: the
		// largest kind of reply the budget admits.
		b, err := protocol.EncodeConfigReply(&protocol.ConfigReply{Config: protocol.Config{
			CloudConfig: map[string]protocol.RawValue{"write_files": {Value: []any{map[string]any{"path": "/etc/f", "content": strings.Repeat("y", 120<<10)}}}},
		}}, protocol.Version)
		if err != nil {
			panic(err)
		}
		return b
	}},
}
