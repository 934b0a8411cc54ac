package protocol

import (
	"bytes"
	"errors"
	"fmt"

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
// (PROTOCOL.md 7.3, DESIGN.md).
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
	// message size), for checks of keys protocol.Config does not know.
	Payload []byte
}

// DecodeConfigReply decodes a MsgConfig payload on top of cfg, so keys the
// server does not send (no-toolkit, labels) keep their local values, as
// upstream does (PROTOCOL.md 7.1); the same bytes are decoded again for the
// network section and the announcement.
func DecodeConfigReply(p []byte, cfg *Config) (*Reply, error) {
	if err := yaml.Unmarshal(p, cfg); err != nil {
		return nil, fmt.Errorf("decoding config reply: %w", err)
	}
	var tail struct {
		NetworkConfig `yaml:",inline"`
		Explicit      bool `yaml:"explicitNetworkConfig"`
	}
	if err := yaml.Unmarshal(p, &tail); err != nil {
		return nil, fmt.Errorf("decoding network config in reply: %w", err)
	}
	r := &Reply{ExplicitNetworkConfig: tail.Explicit, Payload: p}
	if tail.Configurator != "" || tail.IPAddresses != nil || tail.Config != nil {
		nc := tail.NetworkConfig
		r.Network = &nc
	}
	return r, nil
}
