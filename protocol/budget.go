package protocol

import (
	"errors"
	"fmt"

	"gopkg.in/yaml.v3"
)

// One budget for everything a reply may decode to, whatever the route
// (YAML aliases, several schemaless values each decoded on its own).
// yaml.v3's own alias check restarts with every decoder, and RawValue
// needs one decoder per value, so a reply of many values, each a small
// alias bomb, passed it value by value (docs/reliability.md, "Hostile
// server": alias bombs).
const (
	// MaxReplyNodes is the most YAML nodes a reply may expand to, aliases
	// expanded: one node per 32 bytes of the frame limit (131,072).
	// Upstream's own encoding (docs/protocol.md §6.2) spends 17 bytes per byte
	// of a schemaless value, so this admits about 128 KiB of cloud-config
	// and network config JSON, far above real replies, while a reply at the
	// limit costs tens of MB to hold, not GBs.
	MaxReplyNodes = DefaultMaxFrame / 32
	// MaxReplyText is the most scalar text (keys and values, aliases
	// expanded) a reply may decode to: the frame limit itself, so aliases
	// of long strings buy nothing over a reply that spells them out.
	MaxReplyText = DefaultMaxFrame
)

// ErrReplyTooLarge marks a reply over MaxReplyNodes or MaxReplyText.
var ErrReplyTooLarge = errors.New("reply too large")

// ErrYAMLTooLarge marks a local YAML document (the config file, a drop-in,
// render's input) over the same budget as a reply (YAMLBudget).
var ErrYAMLTooLarge = errors.New("YAML document too large")

// parseBounded parses one YAML document into a node tree and checks that
// decoding it cannot exceed the reply budget.
func parseBounded(p []byte) (*yaml.Node, error) {
	b := YAMLBudget{tooLarge: ErrReplyTooLarge}
	return b.Parse(p)
}

// YAMLBudget holds every YAML document of one input, together, to the
// reply budget (MaxReplyNodes, MaxReplyText, aliases expanded): each YAML
// the agent reads, not only a server's, since a file of a few KB can
// expand to GBs once decoded value by value, and a document inside
// another (a cloud-config file's content) counts against the same budget
// as the one holding it. The zero value is a fresh budget.
type YAMLBudget struct {
	used     size
	tooLarge error // ErrYAMLTooLarge unless set
}

// ParseYAML parses one YAML document held to a fresh YAMLBudget.
func ParseYAML(p []byte) (*yaml.Node, error) {
	var b YAMLBudget
	return b.Parse(p)
}

// Parse parses one YAML document into a node tree, checking that decoding
// it, with what the budget has taken already, cannot exceed it. The
// document is first counted cheaply, so that even the node tree (about 200
// bytes a node in yaml.v3) is never built for a document of millions of
// tiny nodes. A refusal wraps ErrYAMLTooLarge (ErrReplyTooLarge for a
// reply).
func (b *YAMLBudget) Parse(p []byte) (*yaml.Node, error) {
	tooLarge := b.tooLarge
	if tooLarge == nil {
		tooLarge = ErrYAMLTooLarge
	}
	if est := estimateNodes(p); b.used.nodes+est > MaxReplyNodes {
		return nil, fmt.Errorf("%w: about %d YAML nodes before alias expansion, the limit is %d", tooLarge, b.used.nodes+est, MaxReplyNodes)
	}
	var root yaml.Node
	if err := yaml.Unmarshal(p, &root); err != nil {
		return nil, err
	}
	c := newExpansion()
	s, err := c.size(&root)
	if err != nil {
		return nil, err
	}
	if s = b.used.add(s); s.over() {
		return nil, c.tooLarge(s, tooLarge)
	}
	b.used = s
	return &root, nil
}

// checkExpanded refuses a node tree whose decoding, aliases expanded, would
// exceed the reply budget.
func checkExpanded(n *yaml.Node) error {
	c := newExpansion()
	s, err := c.size(n)
	if err != nil {
		return err
	}
	if !s.over() {
		return nil
	}
	return c.tooLarge(s, ErrReplyTooLarge)
}

// tooLarge says which of the budget's limits s is over.
func (c *expansion) tooLarge(s size, sentinel error) error {
	what, limit := "nodes", MaxReplyNodes
	if s.text > MaxReplyText {
		what, limit = "bytes of text", MaxReplyText
	}
	why := ""
	if c.aliases > 0 {
		why = " (excessive aliasing)"
	}
	return fmt.Errorf("%w: expands to more than %d %s%s", sentinel, limit, what, why)
}

func newExpansion() *expansion {
	return &expansion{memo: map[*yaml.Node]size{}, open: map[*yaml.Node]bool{}}
}

// size is what a node decodes to: nodes and scalar bytes, both saturating
// just above the limit so that counting cannot overflow.
type size struct{ nodes, text int }

func (s size) add(o size) size {
	return size{min(s.nodes+o.nodes, MaxReplyNodes+1), min(s.text+o.text, MaxReplyText+1)}
}

func (s size) over() bool { return s.nodes > MaxReplyNodes || s.text > MaxReplyText }

// expansion counts a tree with aliases expanded, in time proportional to
// the tree itself: each alias target is counted once and remembered.
type expansion struct {
	memo    map[*yaml.Node]size
	open    map[*yaml.Node]bool // alias targets being counted: a cycle
	aliases int
}

func (c *expansion) size(n *yaml.Node) (size, error) {
	if n == nil {
		return size{}, nil
	}
	if n.Kind == yaml.AliasNode {
		c.aliases++
		t := n.Alias
		if t == nil {
			return size{}, errors.New("alias without anchor")
		}
		if s, ok := c.memo[t]; ok {
			return s, nil
		}
		if c.open[t] {
			return size{}, fmt.Errorf("line %d: anchor %q contains an alias of itself", n.Line, n.Value)
		}
		c.open[t] = true
		s, err := c.size(t)
		delete(c.open, t)
		if err != nil {
			return size{}, err
		}
		c.memo[t] = s
		return s, nil
	}
	s := size{nodes: 1, text: len(n.Value)}
	for _, ch := range n.Content {
		cs, err := c.size(ch)
		if err != nil {
			return size{}, err
		}
		if s = s.add(cs); s.over() {
			return s, nil
		}
	}
	return s, nil
}

// estimateNodes bounds from above, without parsing, how many nodes yaml.v3
// builds for p (before alias expansion). Each node is charged to a byte
// that must be there for it:
//   - a scalar, alias or anchor/tag property: the first byte of its run of
//     non-blank bytes (+1 each run, so quoted text with blanks, comments and
//     multi-line scalars are counted too high, never too low);
//   - a flow collection: its '[' or '{' (+1); an entry of a flow mapping
//     without a value (an implied null): the ',' or '}' after it (+1);
//   - a block mapping, an empty key and an empty or block value: any ':'
//     (+3, whatever its role) or '?' (+3);
//   - a sequence entry '-' with nothing after it on its line (a null) or
//     opening a nested sequence (+1); an entry with content costs nothing
//     more, so upstream's raw byte lists count one per byte;
//   - the document node and the root collection or null (+2).
func estimateNodes(p []byte) int {
	n := 2
	blank := func(b byte) bool { return b == ' ' || b == '\t' || b == '\n' || b == '\r' }
	sep := func(b byte) bool {
		return blank(b) || b == ',' || b == '[' || b == ']' || b == '{' || b == '}' || b == ':'
	}
	for i := 0; i < len(p); i++ {
		b := p[i]
		switch b {
		case ' ', '\t', '\n', '\r', ']':
			continue
		case '[', '{', ',', '}':
			n++
			continue
		case ':', '?':
			n += 3
			continue
		case '-':
			if (i == 0 || blank(p[i-1])) && (i+1 == len(p) || blank(p[i+1])) {
				j := i + 1
				for j < len(p) && (p[j] == ' ' || p[j] == '\t') {
					j++
				}
				if j == len(p) || p[j] == '\n' || p[j] == '\r' || p[j] == '#' ||
					(p[j] == '-' && (j+1 == len(p) || blank(p[j+1]))) {
					n++
				}
				continue
			}
		}
		if i == 0 || sep(p[i-1]) {
			n++
		}
	}
	return n
}
