//go:build emulatedtpm && cgo

package tpm

import (
	"fmt"

	"github.com/google/go-tpm-tools/simulator"
	"github.com/google/go-tpm/tpm2/transport"
)

// EmulationAvailable reports whether this binary can emulate a TPM.
const EmulationAvailable = true

// openEmulated starts the in-process reference TPM with all hierarchy seeds
// drawn from seed, as elemental-register does, so the EK (and TPM hash) is
// the one upstream derives for the same seed. The simulator is a process-wide
// singleton: a second open blocks until the first is closed.
func openEmulated(seed int64) (transport.TPMCloser, error) {
	sim, err := simulator.GetWithFixedSeedInsecure(seed)
	if err != nil {
		return nil, fmt.Errorf("starting emulated TPM: %w", err)
	}
	return transport.FromReadWriteCloser(sim), nil
}
