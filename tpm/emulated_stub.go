//go:build !(emulatedtpm && cgo)

package tpm

import "github.com/google/go-tpm/tpm2/transport"

// EmulationAvailable reports whether this binary can emulate a TPM.
const EmulationAvailable = false

func openEmulated(int64) (transport.TPMCloser, error) {
	return nil, ErrEmulationNotBuilt
}
