// Package state owns the state file (docs/cli.md, "State file"): its keys, the
// address encoding, reading it (a corrupt file is kept aside) and writing
// it atomically, and the manifest apply's persist writes beside it. Every
// reader of these files goes through here, so a format change is one
// change. A leaf: the host edge and the safe reads only.
package state

import (
	"encoding/base64"
	"time"
)

// State is the state file: elemental-register's keys (docs/protocol.md
// §8.3), so an existing node keeps its registration when the binary is
// swapped, plus nodereg's own, which upstream readers ignore. The field
// order is the file's key order.
type State struct {
	InitialRegistration time.Time `yaml:"initialRegistration,omitempty"`
	EmulatedTPM         bool      `yaml:"emulatedTPM,omitempty"`
	EmulatedTPMSeed     int64     `yaml:"emulatedTPMSeed,omitempty"`

	// AK is the cached attestation key blob (base64), reused across boots
	// so no key is created twice.
	AK string `yaml:"nodereg-ak,omitempty"`

	Network `yaml:",inline"`

	// LastPhase is where the previous run saved this file: "finish", or
	// "hand-over" when it handed over to the toolkit (install, reset),
	// which the first run after it logs.
	LastPhase string `yaml:"nodereg-last-phase,omitempty"`

	// loaded is the file as read: an unchanged state is not written
	// again (two fsyncs saved on every warm boot).
	loaded []byte
}

// Network is what the state file keeps of the network config: what is
// reported back to the server as annotations (docs/annotations.md).
type Network struct {
	// NetworkDigest identifies the network config last persisted and
	// applied: an unchanged config is not applied again.
	NetworkDigest string `yaml:"nodereg-network-digest,omitempty"`
	// NetworkState and NetworkAddresses (FormatAddresses) say what this
	// node did with its network config.
	NetworkState     string `yaml:"nodereg-network-state,omitempty"`
	NetworkAddresses string `yaml:"nodereg-network-addresses,omitempty"`
	// NetworkError* keep a failed plan or apply until a later apply
	// succeeds: reported back at every registration meanwhile. The kind
	// and reason are netreport.Classify's, the phase is plan or apply,
	// NetworkErrorInterfaces are the failed config's, by comma.
	NetworkError           string `yaml:"nodereg-network-error,omitempty"`
	NetworkErrorKind       string `yaml:"nodereg-network-error-kind,omitempty"`
	NetworkErrorPhase      string `yaml:"nodereg-network-error-phase,omitempty"`
	NetworkErrorInterfaces string `yaml:"nodereg-network-error-interfaces,omitempty"`
	// NetworkDrift is what the last drift repair put back (the update
	// run); cleared by the next apply of a new config.
	NetworkDrift string `yaml:"nodereg-network-drift-repaired,omitempty"`
}

// Addresses decodes NetworkAddresses.
func (n *Network) Addresses() map[string][]string { return ParseAddresses(n.NetworkAddresses) }

// ClearError forgets a recorded error: a later apply succeeded.
func (n *Network) ClearError() {
	n.NetworkError, n.NetworkErrorKind, n.NetworkErrorPhase, n.NetworkErrorInterfaces = "", "", "", ""
}

// Registered reports whether a registration succeeded before.
func (s *State) Registered() bool { return !s.InitialRegistration.IsZero() }

// AKBlob decodes the cached AK; a broken value is dropped (a new AK is made).
func (s *State) AKBlob() []byte {
	b, err := base64.StdEncoding.DecodeString(s.AK)
	if err != nil {
		return nil
	}
	return b
}

// SetAKBlob stores the AK blob.
func (s *State) SetAKBlob(b []byte) {
	if len(b) == 0 {
		s.AK = ""
		return
	}
	s.AK = base64.StdEncoding.EncodeToString(b)
}
