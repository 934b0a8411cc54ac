// Package tpm proves a node's identity with its TPM 2.0, wire-compatible
// with elemental-register's "tpm" authentication (docs/protocol.md §4.1, §4.4), using go-tpm's
// tpm2 API directly.
//
// One *TPM is opened per run and keeps what it creates (EK, AK) loaded until
// Close, so no key is made twice in a run. The AK is cached by the caller
// (AKBlob) and reloaded on later runs instead of being recreated. The
// emulated TPM (go-tpm-tools' simulator, cgo + OpenSSL) is only compiled in
// with the build tag emulatedtpm; the default build stays cgo-free.
package tpm
