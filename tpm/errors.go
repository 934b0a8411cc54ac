package tpm

import (
	"errors"
	"syscall"

	"github.com/google/go-tpm/tpm2"

	"github.com/nodereg/nodereg/internal/errclass"
)

// Sentinel errors the agent can classify with errors.Is. The wrapped error
// carries the details (paths tried, TPM response code).
var (
	// ErrNoDevice: no TPM could be opened at any candidate path.
	ErrNoDevice = errclass.New(errclass.Config, "TPM missing or unusable", "no TPM device")
	// ErrBusy: the TPM exists but is held by someone else or out of
	// resources; retrying later may work.
	ErrBusy = errors.New("TPM busy")
	// ErrNoEK: neither an EK certificate nor an EK created from the default
	// template could be obtained.
	ErrNoEK = errors.New("no endorsement key")
	// ErrActivation: the TPM refused to decrypt the server's challenge: it
	// was made for another TPM's EK or AK, or was tampered with.
	ErrActivation = errors.New("credential activation failed (challenge made for another TPM, or tampered)")
	// ErrEmulationNotBuilt: emulate-tpm asked of a binary built without the
	// emulatedtpm tag.
	ErrEmulationNotBuilt = errclass.New(errclass.Config, "TPM missing or unusable", "TPM emulation not compiled in: build with `make build-emulated` (go build -tags emulatedtpm, needs cgo and libssl-dev)")
	// ErrBadSeed: the emulated TPM was asked for seed 0.
	ErrBadSeed = errclass.New(errclass.Config, "TPM missing or unusable", "emulated TPM seed 0 gives a random, unstable identity; use a non-zero emulated-tpm-seed or -1")
)

// busyCodes are response codes after which the same command may succeed
// later: the TPM is occupied, not broken.
func busyCodes() []tpm2.TPMRC {
	return []tpm2.TPMRC{
		tpm2.TPMRCRetry, tpm2.TPMRCYielded, tpm2.TPMRCTesting,
		tpm2.TPMRCObjectMemory, tpm2.TPMRCSessionMemory, tpm2.TPMRCMemory,
		tpm2.TPMRCNVRate, tpm2.TPMRCLockout,
	}
}

// classify adds ErrBusy to errors that mean "try again later".
func classify(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, syscall.EBUSY) {
		return errors.Join(ErrBusy, err)
	}
	for _, rc := range busyCodes() {
		if errors.Is(err, rc) {
			return errors.Join(ErrBusy, err)
		}
	}
	return err
}
