package apply

import (
	"context"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strconv"
	"strings"

	"github.com/nodereg/nodereg/internal/host"
	"github.com/nodereg/nodereg/netpolicy"
)

func activeCommand(nmcli string) host.Command {
	return host.Command{Name: nmcli, Args: []string{"-t", "-f", "UUID", "connection", "show", "--active"}, ReadOnly: true}
}

// matchBoot leaves the running network as the next boot will bring it up,
// so that the reachability check tests what the boot brings
// (docs/apply.md, "The rollback check tests the next boot"). A live apply
// only loads a profile with autoconnect=false (nmstate's `state: down`),
// but its device keeps whatever connection is up on it (the same profile
// rewritten, or one a boot will not have: NetworkManager makes no default
// profile for a device that has one of ours): the device is disconnected
// here, which also keeps NetworkManager from autoconnecting it until the
// boot. Then every profile of the plan that autoconnects must still be
// active: one that is not lost its device to another profile of the
// config, and a boot may pick either (rule one-profile-per-device).
func (a *Applier) matchBoot(ctx context.Context, nmcli string, files []string, content map[string][]byte) (step string, err error) {
	out, err := a.run(ctx, profilesCommand(nmcli))
	if err != nil {
		return "connection show", err
	}
	byFile := parseProfiles(out)
	for _, f := range files {
		if uuid := byFile[f]; !autoconnects(content[f]) && uuid != "" {
			if step, err := a.disconnectDevice(ctx, nmcli, f, uuid, content[f]); err != nil {
				return step, err
			}
		}
	}
	if step, err := a.downTransient(ctx, nmcli); err != nil {
		return step, err
	}
	active, err := a.activeUUIDs(ctx, nmcli)
	if err != nil {
		return "connection show --active", err
	}
	for _, f := range files {
		if uuid := byFile[f]; autoconnects(content[f]) && !slices.Contains(active, uuid) {
			return "boot profiles", fmt.Errorf("%s is not active after the apply: another profile of the config took its device, and the next boot may bring up either (rule %s)", f, netpolicy.OneProfile)
		}
	}
	return "", nil
}

// disconnectDevice disconnects the device the profile in file (uuid)
// binds, when it is connected: the device named by interface-name, else
// (a profile bound by MAC) the one NetworkManager activates it on; a
// profile that activates on no device has nothing to take down.
func (a *Applier) disconnectDevice(ctx context.Context, nmcli, file, uuid string, content []byte) (step string, err error) {
	dev := readProfile(file, content).InterfaceName
	if dev == "" {
		if _, err := a.run(ctx, host.Command{Name: nmcli, Args: []string{"connection", "up", "uuid", uuid}}); err != nil {
			a.log().WithField("keyfile", file).WithError(err).Debug("autoconnect=false profile activates on no device")
			return "", nil
		}
		out, err := a.run(ctx, host.Command{Name: nmcli, Args: []string{"-g", "GENERAL.DEVICES", "connection", "show", "uuid", uuid}, ReadOnly: true})
		if err != nil {
			return "connection show", err
		}
		if dev = strings.TrimSpace(string(out)); dev == "" {
			return "", nil
		}
	}
	out, err := a.run(ctx, host.Command{Name: nmcli, Args: []string{"-g", "GENERAL.STATE", "device", "show", dev}, ReadOnly: true})
	if err != nil {
		return "", nil // no such device now: nothing is up on it
	}
	// NetworkManager's device states: below 40 (prepare) nothing is up.
	if n, _, _ := strings.Cut(strings.TrimSpace(string(out)), " "); atoi(n) < 40 {
		return "", nil
	}
	a.log().WithField("keyfile", file).WithField("device", dev).Info("autoconnect=false: the device is disconnected, as the next boot will not bring it up")
	if _, err := a.run(ctx, host.Command{Name: nmcli, Args: []string{"device", "disconnect", dev}}); err != nil {
		return "device disconnect", err
	}
	return "", nil
}

// downTransient takes down the active connections of the agent's own
// profiles under /run (its bootstrap network, Policy.OwnedPrefixes): the
// next boot does not have them, so a config that reaches the server only
// through one of them (a profile for another NIC) would pass the check and
// leave the node cut off after the boot. A rollback brings them back (the
// agent's bootstrap Restore); after a success the agent drops them.
func (a *Applier) downTransient(ctx context.Context, nmcli string) (step string, err error) {
	var prefixes []string
	for _, p := range a.Policy.OwnedPrefixes {
		if strings.HasPrefix(p, "/run/") && a.anyFile(p) {
			prefixes = append(prefixes, p)
		}
	}
	if len(prefixes) == 0 {
		return "", nil // none on disk: nothing to ask NetworkManager
	}
	out, err := a.run(ctx, activeFilesCommand(nmcli))
	if err != nil {
		return "connection show --active", err
	}
	for file, uuid := range parseProfiles(out) {
		if !slices.ContainsFunc(prefixes, func(p string) bool { return strings.HasPrefix(file, p) }) {
			continue
		}
		a.log().WithField("keyfile", file).Info("a runtime profile of ours is taken down for the reachability check: the next boot does not have it")
		if _, err := a.run(ctx, host.Command{Name: nmcli, Args: []string{"connection", "down", "uuid", uuid}}); err != nil {
			return "connection down", err
		}
	}
	return "", nil
}

// anyFile says whether a file whose host path starts with prefix exists.
func (a *Applier) anyFile(prefix string) bool {
	entries, err := a.files().ReadDir(path.Dir(prefix))
	if err != nil {
		return false
	}
	return slices.ContainsFunc(entries, func(e fs.DirEntry) bool { return strings.HasPrefix(e.Name(), path.Base(prefix)) })
}

func activeFilesCommand(nmcli string) host.Command {
	return host.Command{Name: nmcli, Args: []string{"-t", "-f", "UUID,FILENAME", "connection", "show", "--active"}, ReadOnly: true}
}

// activeUUIDs lists the UUIDs of the active connections.
func (a *Applier) activeUUIDs(ctx context.Context, nmcli string) ([]string, error) {
	out, err := a.run(ctx, activeCommand(nmcli))
	if err != nil {
		return nil, err
	}
	return strings.Fields(string(out)), nil
}

func atoi(s string) int {
	n, err := strconv.Atoi(s)
	if err != nil {
		return 0
	}
	return n
}

// reactivate brings up again those of the connections that were active
// before the apply (uuids) and are not now. One that cannot come up (its
// profile went with the config) is only logged: the previous profiles of
// ours are the rollback's to restore.
func (a *Applier) reactivate(ctx context.Context, nmcli string, uuids []string) {
	now, err := a.activeUUIDs(ctx, nmcli)
	if err != nil {
		a.log().WithError(err).Warn("listing the active connections after the rollback")
		return
	}
	for _, u := range uuids {
		if slices.Contains(now, u) {
			continue
		}
		if _, err := a.run(ctx, host.Command{Name: nmcli, Args: []string{"connection", "up", "uuid", u}}); err != nil {
			a.log().WithError(err).WithField("uuid", u).Warn("a connection active before the apply did not come back")
		}
	}
}
