// Package nmstate turns an nmstate desired state into the NetworkManager
// keyfiles `nmstatectl gc` writes for it, byte for byte, without nmstate.
//
// It covers the subset of nmstate that docs/nmstate.md lists (ethernet,
// bond, linux-bridge, vlan and dummy interfaces; state, mtu, mac-address,
// description; static and dynamic IPv4/IPv6 addresses; routes.config;
// dns-resolver.config) and reproduces the output of the nmstate version in
// MatchedVersion, as documented in the team's NMSTATE.md. Every input
// outside that subset, and every input nmstate itself refuses, is refused
// with an *Error naming the key path: a refusal is always safer than a file
// that differs from what nmstate would have written.
//
// The input comes from an untrusted registration server, so sizes and counts
// are bounded (see the Max* constants) and nothing is taken from it but the
// network description.
package nmstate
