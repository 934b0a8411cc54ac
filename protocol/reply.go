package protocol

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"
)

// DecodeError decodes a MsgError payload. A payload that is not the
// expected YAML still yields an error carrying its text, so the operator
// sees what the server said.
func DecodeError(p []byte) *ErrorReply {
	var e ErrorReply
	if err := yaml.Unmarshal(p, &e); err != nil || e.Message == "" {
		return &ErrorReply{Message: string(bytes.TrimSpace(p))}
	}
	return &e
}

// EncodeError encodes a MsgError payload. Plain errors become upstream's
// one-field form.
func EncodeError(err error) []byte {
	var er *ErrorReply
	if !errors.As(err, &er) {
		er = &ErrorReply{Message: err.Error()}
	}
	b, mErr := yaml.Marshal(er)
	if mErr != nil {
		b, _ = yaml.Marshal(ErrorReply{Message: er.Message})
	}
	return b
}

// EncodeConfigReply builds the MsgConfig payload for a client that negotiated
// version v: the config YAML, then (v >= 12, real configurator) the network
// config appended to the same document, then the announcement key
// (docs/protocol.md §6.3, §6.4).
func EncodeConfigReply(r *ConfigReply, v byte) ([]byte, error) {
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(4)
	if err := enc.Encode(&r.Config); err != nil {
		return nil, fmt.Errorf("encoding config: %w", err)
	}
	if v >= versionNetworkConfig && r.Network.IsReal() {
		if err := enc.Encode(r.Network); err != nil {
			return nil, fmt.Errorf("encoding network config: %w", err)
		}
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	// The encoder separates documents with "---"; upstream appends raw
	// bytes into one document, so join the parts without separators.
	out := bytes.ReplaceAll(buf.Bytes(), []byte("\n---\n"), []byte("\n"))
	if v >= versionNetworkConfig && r.ExplicitNetworkConfig {
		out = append(out, AnnounceKey+": true\n"...)
	}
	return out, nil
}

// Reply is a decoded MsgConfig.
type Reply struct {
	// Network is nil when the reply carries no network section.
	Network *NetworkConfig
	// ExplicitNetworkConfig is the server's announcement that it answers
	// MsgNetworkConfig.
	ExplicitNetworkConfig bool
	// Payload is the MsgConfig payload as received (bounded by the
	// message size), and Doc the same parsed, within the reply budget:
	// checks of keys protocol.Config does not know walk Doc rather than
	// parse the payload again.
	Payload []byte
	Doc     *yaml.Node
}

// DecodeConfigReply decodes a MsgConfig payload on top of cfg, so keys the
// server does not send (no-toolkit, labels) keep their local values, as
// upstream does (docs/protocol.md §6.1); the same document is decoded again for
// the network section and the announcement. The document is parsed once and
// held to one budget (MaxReplyNodes, MaxReplyText) before anything is
// decoded; on error cfg is unchanged.
func DecodeConfigReply(p []byte, cfg *Config) (*Reply, error) {
	root, err := parseBounded(p)
	if err != nil {
		return nil, fmt.Errorf("decoding config reply: %w", err)
	}
	next := cfg.clone()
	if err := root.Decode(&next); err != nil {
		return nil, fmt.Errorf("decoding config reply: %w", err)
	}
	var tail struct {
		NetworkConfig `yaml:",inline"`
		Explicit      bool `yaml:"explicitNetworkConfig"`
	}
	if err := root.Decode(&tail); err != nil {
		return nil, fmt.Errorf("decoding network config in reply: %w", err)
	}
	*cfg = next
	r := &Reply{ExplicitNetworkConfig: tail.Explicit, Payload: p, Doc: root}
	if tail.Configurator != "" || tail.IPAddresses != nil || tail.Config != nil {
		nc := tail.NetworkConfig
		r.Network = &nc
	}
	return r, nil
}

// clone copies c deeply enough that decoding on top of the copy leaves c as
// it was: yaml.v3 decodes into existing maps and pointees.
func (c *Config) clone() Config {
	n := *c
	n.CloudConfig = maps.Clone(c.CloudConfig)
	reg := &n.Elemental.Registration
	reg.Labels = maps.Clone(reg.Labels)
	if c.Elemental.Reset != nil {
		r := *c.Elemental.Reset
		n.Elemental.Reset = &r
	}
	if c.Elemental.Install.Snapshotter != nil {
		s := *c.Elemental.Install.Snapshotter
		n.Elemental.Install.Snapshotter = &s
	}
	return n
}

// DecodeNetworkConfigJSON decodes a MsgNetworkConfig payload, held to the
// reply budget. The seed PR's server (commit 342bba26, docs/protocol.md §7.3)
// sends {"ipAddresses":{...},"config":{...}} with no configurator, from a
// time when nmstate was the only one: a config without configurator is
// therefore nmstate here (and only here; in MsgConfig, see Unused).
func DecodeNetworkConfigJSON(p []byte) (*NetworkConfig, error) {
	if est := estimateJSONNodes(p); est > MaxReplyNodes {
		return nil, fmt.Errorf("decoding network config: %w: about %d JSON values, the limit is %d", ErrReplyTooLarge, est, MaxReplyNodes)
	}
	var nc NetworkConfig
	if err := json.Unmarshal(p, &nc); err != nil {
		return nil, fmt.Errorf("decoding network config: %w", err)
	}
	if nc.Configurator == "" && len(nc.Config) > 0 {
		nc.Configurator = ConfiguratorNmstate
	}
	return &nc, nil
}

// estimateJSONNodes bounds from above the values json.Unmarshal builds for
// p: every value but the first follows a ',' or ':', every container opens
// with '[' or '{'.
func estimateJSONNodes(p []byte) int {
	n := 1
	for _, b := range p {
		switch b {
		case ',', ':', '[', '{':
			n++
		}
	}
	return n
}

// Unused explains, for the agent to log as a warning, a network config that
// carries a config no configurator will apply (configurator "" or none);
// "" when there is nothing to say. Such a config is not applied: a server
// that means it must name its configurator.
func (n *NetworkConfig) Unused() string {
	if n == nil || n.IsReal() || len(n.Config) == 0 {
		return ""
	}
	c := "no configurator"
	if n.Configurator != "" {
		c = fmt.Sprintf("configurator %q", n.Configurator)
	}
	return fmt.Sprintf("the server sent a network config (%s) with %s: it is not applied", strings.Join(slices.Sorted(maps.Keys(n.Config)), ", "), c)
}
