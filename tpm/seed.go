package tpm

import (
	"math/big"
	"math/rand/v2"
	"strings"
)

// RandomSeed is the emulated-tpm-seed value that asks for a seed derived
// from the machine (upstream's TPMRandomSeedValue).
const RandomSeed = -1

// ResolveSeed picks the emulated TPM's seed as elemental-register's
// GetTPMSeed does (docs/protocol.md §4.2). The caller stores the result in the
// state file with stateEmulated = emulate.
func ResolveSeed(emulate bool, cfgSeed int64, stateEmulated bool, stateSeed int64, smbiosUUID string) int64 {
	switch {
	case emulate && cfgSeed == RandomSeed && !stateEmulated:
		return SeedFromUUID(smbiosUUID)
	case emulate && cfgSeed != RandomSeed && !stateEmulated:
		return cfgSeed
	default:
		return stateSeed
	}
}

// SeedFromUUID is the low 64 bits of the UUID read as a hex number,
// reinterpreted as int64 (big.Int.Int64), as upstream does. When the UUID is
// unreadable upstream draws a random seed; so do we, and also when the UUID
// gives 0, which would select a random simulator on every open.
func SeedFromUUID(uuid string) int64 {
	if n, ok := new(big.Int).SetString(strings.ReplaceAll(uuid, "-", ""), 16); ok {
		if s := n.Int64(); s != 0 {
			return s
		}
	}
	for {
		if s := rand.Int64(); s != 0 && s != RandomSeed {
			return s
		}
	}
}
