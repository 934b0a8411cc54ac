package main

import (
	"strings"

	"gopkg.in/yaml.v3"
)

// emit writes a YAML node as serde_yaml does in nmstatectl's output: two
// spaces per level, a sequence under a key not indented, "- - " for a
// sequence in a sequence, multi-line strings as literal blocks, empty
// mappings and sequences as {} and [].
func emit(n *yaml.Node) string {
	var b strings.Builder
	emitBlock(&b, n, 0)
	return b.String()
}

func pad(n int) string { return strings.Repeat(" ", n) }

// emitBlock writes n starting at column ind of a fresh line.
func emitBlock(b *strings.Builder, n *yaml.Node, ind int) {
	switch n.Kind {
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			if i > 0 {
				b.WriteString(pad(ind))
			}
			emitKeyValue(b, n.Content[i], n.Content[i+1], ind)
		}
	case yaml.SequenceNode:
		for i, it := range n.Content {
			if i > 0 {
				b.WriteString(pad(ind))
			}
			b.WriteString("- ")
			emitInline(b, it, ind+2)
		}
	default:
		emitInline(b, n, ind)
	}
}

// emitInline writes n where a value starts (after "key: " or "- ").
func emitInline(b *strings.Builder, n *yaml.Node, ind int) {
	switch {
	case (n.Kind == yaml.MappingNode || n.Kind == yaml.SequenceNode) && len(n.Content) > 0:
		emitBlock(b, n, ind)
	default:
		b.WriteString(scalar(n, ind))
		b.WriteString("\n")
	}
}

func emitKeyValue(b *strings.Builder, k, v *yaml.Node, ind int) {
	b.WriteString(scalar(k, ind))
	b.WriteString(":")
	switch {
	case v.Kind == yaml.MappingNode && len(v.Content) > 0:
		b.WriteString("\n" + pad(ind+2))
		emitBlock(b, v, ind+2)
	case v.Kind == yaml.SequenceNode && len(v.Content) > 0:
		b.WriteString("\n" + pad(ind))
		emitBlock(b, v, ind)
	default:
		b.WriteString(" ")
		b.WriteString(scalar(v, ind))
		b.WriteString("\n")
	}
}

// scalar renders a scalar (or an empty collection) at column ind.
func scalar(n *yaml.Node, ind int) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "{}"
	case yaml.SequenceNode:
		return "[]"
	case yaml.AliasNode:
		return scalar(n.Alias, ind)
	}
	if n.Tag == "!!str" || n.Tag == "" {
		if strings.Contains(n.Value, "\n") && !strings.HasPrefix(n.Value, " ") {
			head := "|"
			body := n.Value
			if !strings.HasSuffix(body, "\n") {
				head = "|-"
			} else {
				body = strings.TrimSuffix(body, "\n")
			}
			var b strings.Builder
			b.WriteString(head)
			for _, l := range strings.Split(body, "\n") {
				b.WriteString("\n")
				if l != "" {
					b.WriteString(pad(ind) + l)
				}
			}
			return b.String()
		}
		out, err := yaml.Marshal(n.Value)
		if err != nil {
			return n.Value
		}
		return strings.TrimSuffix(string(out), "\n")
	}
	return n.Value
}

func str(s string) *yaml.Node      { return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: s} }
func mapping() *yaml.Node          { return &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"} }
func sequence() *yaml.Node         { return &yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq"} }
func raw(tag, v string) *yaml.Node { return &yaml.Node{Kind: yaml.ScalarNode, Tag: tag, Value: v} }

func put(m *yaml.Node, k string, v *yaml.Node) *yaml.Node {
	m.Content = append(m.Content, str(k), v)
	return m
}

// get is the value under key k of mapping m (nil: none).
func get(m *yaml.Node, k string) *yaml.Node {
	if m == nil || m.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == k {
			return m.Content[i+1]
		}
	}
	return nil
}
