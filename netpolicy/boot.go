package netpolicy

import (
	"fmt"
	"slices"
	"strings"

	"github.com/nodereg/nodereg/internal/keyfile"
)

// OneProfile: two profiles of one config that NetworkManager could both
// autoconnect on one device. Which one a boot brings up then depends on
// autoconnect-priority and on NetworkManager's own timestamps, not on
// what the live apply activated last, so the reachability check would
// test one profile and the next boot bring up the other
// (docs/reliability.md, "The rollback check tests the next boot"). No
// config can allow it.
const OneProfile Rule = "one-profile-per-device"

// bootDevice is the device a profile binds, as far as the keyfile says:
// its kind and its interface name, MAC address, or nothing (any device of
// that kind).
type bootDevice struct {
	kind, by, value string
}

func (d bootDevice) String() string {
	if d.by == "" {
		return "any " + d.kind + " device"
	}
	return fmt.Sprintf("the %s device with %s %s", d.kind, d.by, d.value)
}

// clashes says whether NetworkManager could match one device with both.
func (d bootDevice) clashes(o bootDevice) bool {
	if d.kind != o.kind {
		return false
	}
	if d.by == "" || o.by == "" {
		return true
	}
	return d.by == o.by && d.value == o.value
}

// deviceKinds maps connection types to the device kind they activate on:
// an ethernet profile also matches a veth device.
var deviceKinds = map[string]string{"802-3-ethernet": "ethernet", "veth": "ethernet"}

// deviceOf reads the device binding of a keyfile as NetworkManager reads it.
func deviceOf(nm keyfile.Profile) bootDevice {
	kind := nm.Type
	if k, ok := deviceKinds[kind]; ok {
		kind = k
	}
	d := bootDevice{kind: kind}
	d.by, d.value = boundName(nm)
	return d
}

// CheckOneProfile refuses a config that gives one device two profiles
// (rule OneProfile), whatever their autoconnect: one interface gets one
// profile from the agent, so the profile the reachability check runs with
// is the one the next boot brings up. Keyfiles NetworkManager cannot read
// are left to CheckKeyfiles.
func CheckOneProfile(kfs []Keyfile) error {
	devs := make([]bootDevice, len(kfs))
	for i, kf := range kfs {
		_, nm, err := read(kf)
		if err != nil {
			continue
		}
		devs[i] = deviceOf(nm)
		for j := range i {
			if devs[j].kind != "" && devs[i].clashes(devs[j]) {
				return &Refusal{Path: kf.Label + " [connection]", Rule: OneProfile,
					Reason: fmt.Sprintf("binds %s, as %s does: one interface gets one profile, else the next boot may bring up another profile than the one the reachability check tested", devs[i], kfs[j].Label)}
			}
		}
	}
	return nil
}

// HandOverAutoconnect: a profile of a hand-over plan (`--install`,
// `--reset`) that NetworkManager would not autoconnect at boot. No live
// apply and no reachability check run before the boot that brings the
// plan up, so such a profile leaves its NIC without an address
// (docs/apply.md, "The rollback check tests the next boot"). No config can
// allow it.
const HandOverAutoconnect Rule = "handover-autoconnect"

// CheckHandOverAutoconnect refuses every keyfile that sets
// connection.autoconnect to anything but plainly on (rule
// HandOverAutoconnect). Pessimistic: only true, yes, on and 1 (any case,
// blanks trimmed, after GLib's escapes) pass, so no spelling NetworkManager
// might read as false gets through; no key is NetworkManager's default, on.
// Keyfiles NetworkManager cannot read are left to CheckKeyfiles.
func CheckHandOverAutoconnect(kfs []Keyfile) error {
	for _, kf := range kfs {
		f, _, err := read(kf)
		if err != nil {
			continue
		}
		raw, set := f.Value("connection", "autoconnect")
		v, _ := keyfile.Unescape(raw)
		if !set || slices.Contains([]string{"true", "yes", "on", "1"}, strings.ToLower(strings.TrimSpace(v))) {
			continue
		}
		return &Refusal{Path: kf.Label + " [connection] autoconnect", Rule: HandOverAutoconnect,
			Reason: fmt.Sprintf("is %q: the boot after the install or reset would not bring this profile up, and nothing can check the network before that boot", raw)}
	}
	return nil
}
