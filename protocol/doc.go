// Package protocol is the wire format of the elemental registration protocol
// (rancher/elemental-operator, docs/protocol.md): message types, framing, payload
// types, version negotiation, and both sides of the conversation. It knows
// nothing of TPMs, hardware or network configurators: those plug in through
// the Authenticator and SessionHandler seams.
package protocol
