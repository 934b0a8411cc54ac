package bootstrap

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strings"

	"github.com/nodereg/nodereg/internal/errclass"
	"github.com/nodereg/nodereg/internal/host"
	"github.com/nodereg/nodereg/internal/nic"
)

// Facts are what a static entry can match and what seeds a range's start:
// values that identify the hardware and do not change between boots.
type Facts struct {
	// MACs are the permanent MAC addresses of the physical NICs, lower
	// case with colons, sorted.
	MACs []string
	// Serial is the SMBIOS system serial number; "" when the firmware
	// leaves a placeholder there.
	Serial string
	// UUID is the SMBIOS system UUID, lower case; "" when unusable.
	UUID string
}

// Identity is the value a range's start offset is derived from: the system
// UUID, else the smallest permanent MAC, else the serial. It errors when
// the machine has none of them, since every such machine would start at
// the same address.
func (f Facts) Identity() (string, error) {
	switch {
	case f.UUID != "":
		return "uuid:" + f.UUID, nil
	case len(f.MACs) > 0:
		return "mac:" + slices.Min(f.MACs), nil
	case f.Serial != "":
		return "serial:" + f.Serial, nil
	}
	return "", &NoIdentityError{}
}

// NoIdentityError: a range needs a fact that tells this machine from the
// others, and it has none. No later attempt can change that, so it is a
// configuration error (78), not a transient one.
type NoIdentityError struct{}

// Class: the machine or the command line must change.
func (e *NoIdentityError) Class() errclass.Class { return errclass.Config }

// Cause names it on the outcome line.
func (e *NoIdentityError) Cause() string { return "bootstrap network config" }

func (e *NoIdentityError) Error() string {
	return "bootstrap: this machine has no system UUID, permanent MAC or serial to derive a range start from"
}

// explain adds to a *NoIdentityError that --root moved /sys, when it did.
func explain(files host.FS, err error) error {
	var ne *NoIdentityError
	if !errors.As(err, &ne) {
		return err
	}
	if _, serr := files.Stat(host.SysClassNet); serr == nil {
		return err
	}
	if h := host.MovedHint(files, host.SysClassNet); h != "" {
		return fmt.Errorf("%w; %s", err, h)
	}
	return err
}

// String lists the facts for error messages and logs.
func (f Facts) String() string {
	macs := "none"
	if len(f.MACs) > 0 {
		macs = strings.Join(f.MACs, ",")
	}
	return fmt.Sprintf("mac=%s serial=%q uuid=%q", macs, f.Serial, f.UUID)
}

// ReadFacts reads the facts of the machine files reaches (the agent's
// --root; host.Root("/") for the real system). The MACs follow
// nic.PermanentMACs, the rule the PLAIN mac identifier uses too; a machine
// without /sys/class/net has none.
func ReadFacts(files host.FS) (Facts, error) {
	var f Facts
	macs, err := nic.PermanentMACs(files)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return f, fmt.Errorf("bootstrap: reading %s: %w", files.Path(host.SysClassNet), err)
	}
	f.MACs = macs
	const dmi = host.DMIIDDir
	f.Serial = usableDMI(host.ReadAttr(files, path.Join(dmi, "product_serial")))
	f.UUID = strings.ToLower(usableDMI(host.ReadAttr(files, path.Join(dmi, "product_uuid"))))
	return f, nil
}

// usableDMI drops what firmware writes when it has no value: such a value
// is shared by many machines and would make one static entry match them all.
func usableDMI(v string) string {
	switch strings.ToLower(v) {
	case "", "0", "none", "unspecified", "not specified", "not available", "not applicable",
		"default string", "to be filled by o.e.m.", "system serial number", "0123456789",
		"00000000-0000-0000-0000-000000000000", "ffffffff-ffff-ffff-ffff-ffffffffffff",
		"03000200-0400-0500-0006-000700080009":
		return ""
	}
	return v
}

// normaliseMAC is nic.Normalise: a static entry's MAC is compared with the
// facts in the same spelling.
func normaliseMAC(s string) (string, error) { return nic.Normalise(s) }

// FactsOf are the facts of a machine described rather than read (agent
// render --bootstrap -f with --set): spelt and filtered as ReadFacts
// spells and filters what it reads, so the preview picks what the
// machine itself would.
func FactsOf(macs []string, serial, uuid string) (Facts, error) {
	var f Facts
	for _, m := range macs {
		n, err := normaliseMAC(m)
		if err != nil {
			return f, errclass.Configf("mac: %w", err)
		}
		f.MACs = append(f.MACs, n)
	}
	slices.Sort(f.MACs)
	f.MACs = slices.Compact(f.MACs)
	f.Serial = usableDMI(strings.TrimSpace(serial))
	f.UUID = strings.ToLower(usableDMI(strings.TrimSpace(uuid)))
	return f, nil
}
