package netpolicy

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strings"
	"syscall"

	"github.com/nodereg/nodereg/internal/host"
	"github.com/nodereg/nodereg/internal/keyfile"
)

// ProfileDirs are the directories NetworkManager loads keyfiles from
// (nm-settings-keyfile(5)); a profile in an earlier one hides one of the same
// UUID in a later one.
var ProfileDirs = []string{host.RuntimeKeyfileDir, host.KeyfileDir, host.LibKeyfileDir}

// Bounds on reading the profile directories: far above a real node, far
// below what would make a plan slow.
const (
	maxProfiles    = 4096
	maxProfileSize = 1 << 20
)

// Profile is a profile NetworkManager loads from a keyfile on disk.
type Profile struct {
	Path     string // host path, without the root
	ID, UUID string // as NetworkManager reads them; UUID lower-case
}

// Foreign lists the profiles NetworkManager would load from files that are
// not the agent's: neither ours(host path) nor under one of
// p.OwnedPrefixes. It skips what NetworkManager skips: hidden, backup and
// temporary names, certificates, files not ending in .nmconnection outside
// /etc, anything that is not, once its symlinks are followed, a regular
// file owned by root and private to it, and files it cannot parse.
func (p Policy) Foreign(files host.FS, ours func(hostPath string) bool) ([]Profile, error) {
	var out []Profile
	for _, dir := range ProfileDirs {
		entries, err := files.ReadDir(dir)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("network policy: listing %s: %w", dir, err)
		}
		for _, e := range entries {
			hp := path.Join(dir, e.Name())
			if ignoredName(e.Name(), dir != host.KeyfileDir) || ours(hp) || p.owned(hp) {
				continue
			}
			if len(out) == maxProfiles {
				return nil, fmt.Errorf("network policy: more than %d profiles under %v", maxProfiles, ProfileDirs)
			}
			if pr, ok := loadProfile(files, hp); ok {
				out = append(out, pr)
			}
		}
	}
	return out, nil
}

func (p Policy) owned(hostPath string) bool {
	return slices.ContainsFunc(p.OwnedPrefixes, func(pre string) bool { return strings.HasPrefix(hostPath, pre) })
}

// ignoredName is NetworkManager's rule for file names it never loads.
func ignoredName(name string, requireExt bool) bool {
	switch {
	case strings.HasPrefix(name, "."), strings.HasSuffix(name, "~"),
		strings.HasSuffix(name, ".pem"), strings.HasSuffix(name, ".der"), mkstempSuffix(name):
		return true
	case requireExt:
		return len(name) <= len(".nmconnection") || !strings.HasSuffix(name, ".nmconnection")
	}
	return false
}

// mkstempSuffix: a name ending in '.' and six letters or digits (a
// temporary file of g_file_set_contents).
func mkstempSuffix(name string) bool {
	if len(name) < 7 || name[len(name)-7] != '.' {
		return false
	}
	for _, c := range name[len(name)-6:] {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

func loadProfile(files host.FS, hostPath string) (Profile, bool) {
	// NetworkManager stat()s a profile, following a symlink wherever it
	// points (nms-keyfile-utils): the target must be a regular file owned
	// by root and private to it.
	target, err := resolve(files, hostPath)
	if err != nil {
		return Profile{}, false
	}
	fi, err := files.Lstat(target)
	if err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm()&0o077 != 0 {
		return Profile{}, false
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && st.Uid != 0 {
		return Profile{}, false
	}
	b, err := files.ReadFile(target, maxProfileSize)
	if err != nil {
		return Profile{}, false
	}
	f, err := keyfile.Parse(b)
	if err != nil || !f.HasGroup("connection") || generated(f) {
		return Profile{}, false
	}
	// The entry's own name, not the target's, gives the id and the UUID.
	e := keyfile.ReadProfile(f, path.Base(hostPath))
	return Profile{Path: hostPath, ID: e.ID, UUID: e.UUID}, true
}

// maxLinks is the kernel's bound on symlinks followed in one lookup.
const maxLinks = 40

// resolve follows the symlinks of hostPath, every component, below the
// root of files: an absolute target is taken from the root's "/", so the
// lookup sees the node's tree (a --root included), never the machine's.
func resolve(files host.FS, hostPath string) (string, error) {
	todo := strings.Split(strings.TrimPrefix(path.Clean("/"+hostPath), "/"), "/")
	cur, links := "/", 0
	for len(todo) > 0 {
		part := todo[0]
		todo = todo[1:]
		switch part {
		case "", ".":
			continue
		case "..":
			cur = path.Dir(cur)
			continue
		}
		next := path.Join(cur, part)
		fi, err := files.Lstat(next)
		if err != nil {
			return "", err
		}
		if fi.Mode()&fs.ModeSymlink == 0 {
			cur = next
			continue
		}
		if links++; links > maxLinks {
			return "", fmt.Errorf("%s: more than %d symlinks", hostPath, maxLinks)
		}
		t, err := files.Readlink(next)
		if err != nil {
			return "", err
		}
		if strings.HasPrefix(t, "/") {
			cur = "/"
		}
		todo = append(strings.Split(t, "/"), todo...)
	}
	return cur, nil
}

// generated: a profile NetworkManager made itself and keeps under /run
// ([.nmmeta] nm-generated or external), such as the one for a device
// configured outside it (an initrd's or DHCP client's address). It yields
// to any real profile for the device, and its id is the interface name, as
// a template's often is: it is not a profile a server config could hide
// (docs/boot-simulation.md, "profile id equal to the interface name").
func generated(f *keyfile.File) bool {
	for _, k := range []string{"nm-generated", "external"} {
		if b, err := f.Boolean(".nmmeta", k); err == nil && b {
			return true
		}
	}
	return false
}

// CheckForeign refuses a keyfile of the config whose UUID or id a foreign
// profile already has: NetworkManager would show one of the two and hide the
// other (docs/reliability.md, "Network-config policy", rule unique), naming
// both.
func CheckForeign(kfs []Keyfile, foreign []Profile) error {
	for _, kf := range kfs {
		_, nm, err := read(kf)
		if err != nil {
			return &Refusal{Path: kf.Label, Rule: Names, Reason: "NetworkManager cannot read this keyfile: " + err.Error()}
		}
		e := effective(nm)
		for _, f := range foreign {
			if e.uuid != "" && e.uuid == f.UUID {
				return &Refusal{Path: kf.Label + " [connection] uuid", Rule: Unique,
					Reason: fmt.Sprintf("uuid %s is the uuid of %s (id %q), a profile that is not the agent's: NetworkManager would hide one of them", e.uuid, f.Path, f.ID)}
			}
			if e.id == f.ID {
				return &Refusal{Path: kf.Label + " [connection] id", Rule: Unique,
					Reason: fmt.Sprintf("id %q is the id of %s (uuid %s), a profile that is not the agent's", e.id, f.Path, f.UUID)}
			}
		}
	}
	return nil
}
