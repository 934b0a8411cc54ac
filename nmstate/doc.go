// Package nmstate turns an nmstate desired state into the NetworkManager
// keyfiles `nmstatectl gc` writes for it, byte for byte, without nmstate.
//
// It covers the subset of nmstate that docs/nmstate.md lists (its table is
// checked against the parser's key lists) and reproduces, file for file and
// in gc's listing order, the output of the nmstate version in
// MatchedVersion, as the gen_conf vectors in testdata/vectors show it.
// Every input outside that subset, and every input nmstate itself refuses,
// is refused with an *Error naming the key path and its kind: a refusal is
// always safer than a file that differs from what nmstate would have
// written.
//
// The input comes from an untrusted registration server, so sizes and counts
// are bounded (see the Max* constants) and nothing is taken from it but the
// network description.
package nmstate
