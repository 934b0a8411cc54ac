package protocol

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"gopkg.in/yaml.v3"
)

// Config is the elemental configuration: the local config file of the agent
// (elemental.registration.*, docs/protocol.md §8.2) and the server's MsgConfig
// reply (§6.1) share this shape. YAML field names are upstream's.
type Config struct {
	Elemental   Elemental           `yaml:"elemental" json:"elemental"`
	CloudConfig map[string]RawValue `yaml:"cloud-config,omitempty" json:"cloud-config,omitempty"`
}

// Elemental is the elemental: block.
type Elemental struct {
	Install      Install      `yaml:"install,omitempty" json:"install,omitempty"`
	Reset        *Reset       `yaml:"reset,omitempty" json:"reset,omitempty"`
	Registration Registration `yaml:"registration,omitempty" json:"registration,omitempty"`
	SystemAgent  SystemAgent  `yaml:"system-agent,omitempty" json:"system-agent,omitempty"`
}

// Registration is elemental.registration.
type Registration struct {
	URL             string `yaml:"url,omitempty" json:"url,omitempty"`
	CACert          string `yaml:"ca-cert,omitempty" json:"ca-cert,omitempty"`
	EmulateTPM      bool   `yaml:"emulate-tpm,omitempty" json:"emulate-tpm,omitempty"`
	EmulatedTPMSeed int64  `yaml:"emulated-tpm-seed,omitempty" json:"emulated-tpm-seed,omitempty"`
	NoSMBIOS        bool   `yaml:"no-smbios,omitempty" json:"no-smbios,omitempty"`
	Auth            string `yaml:"auth,omitempty" json:"auth,omitempty"`
	// Local-only keys: the server never sends them (§6.5).
	NoToolkit bool              `yaml:"no-toolkit,omitempty" json:"no-toolkit,omitempty"`
	Labels    map[string]string `yaml:"labels,omitempty" json:"labels,omitempty"`
	// NetworkConfig is nodereg's extension: how to ask for the network
	// config ("auto", "embedded", "explicit"); see docs/protocol.md §7.4. Upstream
	// clients ignore the key.
	NetworkConfig string `yaml:"network-config,omitempty" json:"network-config,omitempty"`
	// TPMDevice is nodereg's extension: "" picks /dev/tpmrm0 then
	// /dev/tpm0; "unix:///path" is swtpm's data socket.
	TPMDevice string `yaml:"tpm-device,omitempty" json:"tpm-device,omitempty"`
}

// Install is elemental.install.
type Install struct {
	Firmware         string           `yaml:"firmware,omitempty" json:"firmware,omitempty"`
	Device           string           `yaml:"device,omitempty" json:"device,omitempty"`
	DeviceSelector   []DeviceSelector `yaml:"device-selector,omitempty" json:"device-selector,omitempty"`
	NoFormat         bool             `yaml:"no-format,omitempty" json:"no-format,omitempty"`
	ConfigURLs       []string         `yaml:"config-urls,omitempty" json:"config-urls,omitempty"`
	ISO              string           `yaml:"iso,omitempty" json:"iso,omitempty"`
	SystemURI        string           `yaml:"system-uri,omitempty" json:"system-uri,omitempty"`
	Debug            bool             `yaml:"debug,omitempty" json:"debug,omitempty"`
	TTY              string           `yaml:"tty,omitempty" json:"tty,omitempty"`
	PowerOff         bool             `yaml:"poweroff,omitempty" json:"poweroff,omitempty"`
	Reboot           bool             `yaml:"reboot,omitempty" json:"reboot,omitempty"`
	EjectCD          bool             `yaml:"eject-cd,omitempty" json:"eject-cd,omitempty"`
	DisableBootEntry bool             `yaml:"disable-boot-entry,omitempty" json:"disable-boot-entry,omitempty"`
	ConfigDir        string           `yaml:"config-dir,omitempty" json:"config-dir,omitempty"`
	Snapshotter      *Snapshotter     `yaml:"snapshotter,omitempty" json:"snapshotter,omitempty"`
}

// DeviceSelector is one install.device-selector rule.
type DeviceSelector struct {
	Key      string   `yaml:"key" json:"key"`
	Operator string   `yaml:"operator" json:"operator"`
	Values   []string `yaml:"values,omitempty" json:"values,omitempty"`
}

// Snapshotter is install.snapshotter.
type Snapshotter struct {
	Type     string `yaml:"type,omitempty" json:"type,omitempty"`
	MaxSnaps int    `yaml:"maxSnaps,omitempty" json:"maxSnaps,omitempty"`
}

// Reset is elemental.reset; Enabled has no omitempty upstream.
type Reset struct {
	Enabled          bool     `yaml:"enabled" json:"enabled"`
	ResetPersistent  bool     `yaml:"reset-persistent,omitempty" json:"reset-persistent,omitempty"`
	ResetOEM         bool     `yaml:"reset-oem,omitempty" json:"reset-oem,omitempty"`
	ConfigURLs       []string `yaml:"config-urls,omitempty" json:"config-urls,omitempty"`
	SystemURI        string   `yaml:"system-uri,omitempty" json:"system-uri,omitempty"`
	Debug            bool     `yaml:"debug,omitempty" json:"debug,omitempty"`
	PowerOff         bool     `yaml:"poweroff,omitempty" json:"poweroff,omitempty"`
	Reboot           bool     `yaml:"reboot,omitempty" json:"reboot,omitempty"`
	DisableBootEntry bool     `yaml:"disable-boot-entry,omitempty" json:"disable-boot-entry,omitempty"`
}

// SystemAgent is elemental.system-agent. Token is a secret: never log it.
type SystemAgent struct {
	StrictTLSMode   bool   `yaml:"strictTLSMode,omitempty" json:"strictTLSMode,omitempty"`
	URL             string `yaml:"url,omitempty" json:"url,omitempty"`
	Token           string `yaml:"token,omitempty" json:"token,omitempty"`
	SecretName      string `yaml:"secret-name,omitempty" json:"secret-name,omitempty"`
	SecretNamespace string `yaml:"secret-namespace,omitempty" json:"secret-namespace,omitempty"`
}

// Network configurators (docs/protocol.md §7.1).
const (
	ConfiguratorNone          = "none"
	ConfiguratorNmc           = "nmc"
	ConfiguratorNmstate       = "nmstate"
	ConfiguratorNmconnections = "nmconnections"
)

// NetworkConfig is the inventory's network config as it reaches the node:
// appended to MsgConfig (§6.3) or sent as JSON in MsgNetworkConfig (§7.3).
type NetworkConfig struct {
	Configurator string              `yaml:"configurator,omitempty" json:"configurator,omitempty"`
	IPAddresses  map[string]string   `yaml:"ipAddresses,omitempty" json:"ipAddresses,omitempty"`
	Config       map[string]RawValue `yaml:"config,omitempty" json:"config,omitempty"`
}

// IsReal reports whether the configurator does something (not "" or none).
func (n *NetworkConfig) IsReal() bool {
	return n != nil && n.Configurator != "" && n.Configurator != ConfiguratorNone
}

// RawValue is a schemaless value (a Kubernetes RawExtension upstream). On the
// wire yaml.v3 writes it as {raw: [byte, ...], object: null}, the bytes being
// the JSON text (docs/protocol.md §6.2). Decoding accepts that form and plain YAML
// alike; encoding to YAML always writes the raw form, so upstream clients
// decode what we send; encoding to JSON writes the plain value.
type RawValue struct {
	// Value is the decoded tree: map[string]any, []any, string, float64,
	// int, bool or nil.
	Value any
}

// UnmarshalYAML decodes either the raw byte-list form or plain YAML. Each
// value gets a decoder of its own, whose alias budget starts afresh: the
// value is first held to the reply budget, and DecodeConfigReply holds the
// whole reply to it before any value is decoded.
func (r *RawValue) UnmarshalYAML(n *yaml.Node) error {
	if err := checkExpanded(n); err != nil {
		return fmt.Errorf("line %d: %w", n.Line, err)
	}
	if raw, ok, err := rawBytes(n); ok {
		if err != nil {
			return err
		}
		var v any
		if len(bytes.TrimSpace(raw)) == 0 {
			r.Value = nil
			return nil
		}
		if err := json.Unmarshal(raw, &v); err != nil {
			return fmt.Errorf("line %d: raw value is not JSON: %w", n.Line, err)
		}
		r.Value = v
		return nil
	}
	var v any
	if err := n.Decode(&v); err != nil {
		return err
	}
	r.Value = v
	return nil
}

// rawBytes recognises the {raw: [ints], object: null} mapping. ok is false
// when the node is some other value, which is then taken as plain YAML.
func rawBytes(n *yaml.Node) (raw []byte, ok bool, err error) {
	if n.Kind != yaml.MappingNode || len(n.Content) == 0 || len(n.Content) > 4 {
		return nil, false, nil
	}
	var seq *yaml.Node
	for i := 0; i+1 < len(n.Content); i += 2 {
		switch n.Content[i].Value {
		case "raw":
			seq = n.Content[i+1]
		case "object":
			if v := n.Content[i+1]; v.Kind != yaml.ScalarNode || v.Tag != "!!null" {
				return nil, false, nil
			}
		default:
			return nil, false, nil
		}
	}
	if seq == nil || (seq.Kind != yaml.SequenceNode && !(seq.Kind == yaml.ScalarNode && seq.Tag == "!!null")) {
		return nil, false, nil
	}
	raw = make([]byte, 0, len(seq.Content))
	for _, item := range seq.Content {
		if item.Kind != yaml.ScalarNode || item.Tag != "!!int" {
			return nil, true, fmt.Errorf("line %d: raw byte %q is not an integer", item.Line, item.Value)
		}
		// Plain decimal is what every server writes; a decoder per byte
		// (item.Decode) would cost more than the rest of the reply.
		b, err := strconv.Atoi(item.Value)
		if err != nil {
			err = item.Decode(&b)
		}
		if err != nil || b < 0 || b > 255 {
			return nil, true, fmt.Errorf("line %d: raw byte %q out of range", item.Line, item.Value)
		}
		raw = append(raw, byte(b))
	}
	return raw, true, nil
}

// MarshalYAML writes the raw byte-list form, as elemental-operator does.
func (r RawValue) MarshalYAML() (any, error) {
	js, err := json.Marshal(r.Value)
	if err != nil {
		return nil, err
	}
	ints := make([]int, len(js))
	for i, b := range js {
		ints[i] = int(b)
	}
	return struct {
		Raw    []int `yaml:"raw"`
		Object any   `yaml:"object"`
	}{ints, nil}, nil
}

// MarshalJSON writes the plain value.
func (r RawValue) MarshalJSON() ([]byte, error) { return json.Marshal(r.Value) }

// UnmarshalJSON reads a plain value.
func (r *RawValue) UnmarshalJSON(b []byte) error { return json.Unmarshal(b, &r.Value) }

// ErrorReply is the MsgError payload: upstream's one-field YAML plus
// nodereg's machine-readable reason and retry hint, which upstream clients
// ignore (docs/protocol.md §7.5).
type ErrorReply struct {
	Message           string `yaml:"message"`
	Reason            string `yaml:"reason,omitempty"`
	RetryAfterSeconds int    `yaml:"retryAfterSeconds,omitempty"`
}

// Reasons carried in ErrorReply.Reason.
const (
	ReasonWaitingForIPAddress = "WaitingForIPAddress"
	ReasonPoolExhausted       = "PoolExhausted"
	ReasonAllocationFailed    = "AllocationFailed"
	ReasonInventoryNotFound   = "InventoryNotFound"
	// A new machine refused by regserver's per-client limits; both carry
	// RetryAfterSeconds and are worth another attempt then.
	ReasonRateLimited    = "RateLimited"
	ReasonTooManyPending = "TooManyPendingInventories"
)

func (e *ErrorReply) Error() string {
	if e.Reason != "" {
		return e.Reason + ": " + e.Message
	}
	return e.Message
}

// RetryAfter is the server's hint of when to ask again (agent/retry reads
// it through errors.As).
func (e *ErrorReply) RetryAfter() time.Duration {
	return time.Duration(e.RetryAfterSeconds) * time.Second
}
