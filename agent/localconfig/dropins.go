package localconfig

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"syscall"

	"gopkg.in/yaml.v3"

	"github.com/nodereg/nodereg/internal/errclass"
	"github.com/nodereg/nodereg/internal/host"
	"github.com/nodereg/nodereg/internal/safefile"
	"github.com/nodereg/nodereg/protocol"
)

// Drop-ins (docs/config.md, "Drop-ins"): *.yaml files beside the config
// file in config.d/ and in host.RuntimeConfigDropIns, read in that order
// and by name in each, merged key by key under elemental.registration.
// They carry what the operator's generated file cannot (Rancher's
// Registration type drops unknown keys, so bootstrap-network never reaches
// the file): the config file itself wins over every drop-in, a later
// drop-in over an earlier one, and each key set twice is reported.
const (
	// MaxDropIns bounds the drop-ins read from each directory, and
	// MaxDropInBytes their sum (each is also at most MaxFileBytes).
	MaxDropIns     = 32
	MaxDropInBytes = MaxFileBytes
	dropInSuffix   = ".yaml"
)

// dropIn is one drop-in as read: its path on this machine and its YAML.
type dropIn struct {
	Path string
	doc  yaml.Node
}

// DropInDirs are the directories whose drop-ins apply to the config file
// at configPath (host paths), in the order they are merged.
func DropInDirs(configPath string) []string {
	return []string{path.Join(path.Dir(configPath), "config.d"), host.RuntimeConfigDropIns}
}

// readDropIns reads the drop-ins of configPath: regular files only, from
// directories that are not links, each of them and every directory above
// them up to "/" (the root of files) owned by root and writable by no one
// else (trusted): a drop-in decides the registration URL, the network
// policy and the bootstrap network. A missing directory has none. Each is
// parsed within budget, the one the config file took its share of: the
// drop-ins are merged into one config.
func readDropIns(files host.FS, configPath string, budget *protocol.YAMLBudget) ([]dropIn, error) {
	var out []dropIn
	var total int64
	for _, dir := range DropInDirs(configPath) {
		names, err := dropInNames(files, dir)
		if err != nil {
			return nil, err
		}
		for _, name := range names {
			p := path.Join(dir, name)
			if err := checkDropIn(files, p, false); err != nil {
				return nil, err
			}
			b, err := files.ReadFile(p, min(MaxFileBytes, MaxDropInBytes-total))
			if err != nil {
				return nil, errclass.Configf("drop-in %s: %w (at most %d bytes in all)", files.Path(p), err, MaxDropInBytes)
			}
			total += int64(len(b))
			d := dropIn{Path: files.Path(p)}
			doc, err := budget.Parse(b)
			if err != nil {
				return nil, errclass.Configf("drop-in %s: %w", d.Path, err)
			}
			d.doc = *doc
			out = append(out, d)
		}
	}
	return out, nil
}

// dropInNames lists dir's *.yaml names, sorted, after checking dir itself;
// names starting with a dot (editors' temporary files) are not drop-ins.
func dropInNames(files host.FS, dir string) ([]string, error) {
	if _, err := files.Lstat(dir); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, nil
		}
		return nil, errclass.Configf("drop-in directory %s: %w", files.Path(dir), err)
	}
	if err := checkDropIn(files, dir, true); err != nil {
		return nil, err
	}
	if err := checkAbove(files, dir); err != nil {
		return nil, err
	}
	entries, err := files.ReadDir(dir)
	if err != nil {
		return nil, errclass.Configf("drop-in directory %s: %w", files.Path(dir), err)
	}
	var names []string
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), dropInSuffix) && !strings.HasPrefix(e.Name(), ".") {
			names = append(names, e.Name())
		}
	}
	if len(names) > MaxDropIns {
		return nil, errclass.Configf("drop-in directory %s: %d drop-ins, at most %d are read", files.Path(dir), len(names), MaxDropIns)
	}
	sort.Strings(names)
	return names, nil
}

// checkDropIn refuses a link, the wrong kind of file, and a file or
// directory that is not trusted (another owner than root, or writable by
// group or others).
func checkDropIn(files host.FS, p string, dir bool) error {
	fi, err := files.Lstat(p)
	if err != nil {
		return errclass.Configf("drop-in %s: %w", files.Path(p), err)
	}
	want, kind := fs.FileMode(0), "a regular file"
	if dir {
		want, kind = fs.ModeDir, "a directory"
	}
	switch {
	case fi.Mode().Type() != want:
		return errclass.Configf("drop-in %s: not %s (%s): drop-ins are read only from real files and directories", files.Path(p), kind, safefile.Kind(fi.Mode()))
	}
	return trusted(files, p, fi, "drop-in")
}

// checkAbove checks every directory above the drop-in directory dir, up to
// "/" of files (--root, or the host's own "/"), as trusted does: whoever
// may write one of them may rename the drop-in directory away and put one
// of their own in its place. A directory on the way that is a link is
// judged by what it leads to (Stat), which must be a directory.
func checkAbove(files host.FS, dir string) error {
	if !path.IsAbs(dir) {
		// A relative --config on the host: the directories above it are
		// the working directory's; below a root, p is taken from its "/".
		dir = path.Join("/", dir)
		if host.Live(files) {
			abs, err := filepath.Abs(filepath.FromSlash(dir))
			if err != nil {
				return errclass.Configf("drop-in directory %s: %w", dir, err)
			}
			dir = filepath.ToSlash(abs)
		}
	}
	for p := path.Dir(dir); ; p = path.Dir(p) {
		fi, err := files.Stat(p)
		if err != nil {
			return errclass.Configf("drop-in directory %s: %w", files.Path(dir), err)
		}
		what := "drop-in directory " + files.Path(dir) + ": the directory above it"
		if !fi.IsDir() {
			return errclass.Configf("%s %s is not a directory", what, files.Path(p))
		}
		if err := trusted(files, p, fi, what); err != nil {
			return err
		}
		if p == "/" {
			return nil
		}
	}
}

// trusted refuses p (the config file, a drop-in, its directory or a
// directory above them, as what says) unless it is writable by its owner only and that owner is
// root, or the uid the agent runs as (a test's or an image build's
// unprivileged run trusts itself, never another user). Under --root the
// uid is the one on this machine's disk.
func trusted(files host.FS, p string, fi fs.FileInfo, what string) error {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return errclass.Configf("%s %s: its owner cannot be read: refused", what, files.Path(p))
	}
	const why = "refused (the config file, drop-ins, their directories and the directories above them must be root's and writable by no one else)"
	switch {
	case fi.Mode().Perm()&0o022 != 0:
		return errclass.Configf("%s %s: writable by group or others (%04o, owner uid %d): %s", what, files.Path(p), fi.Mode().Perm(), st.Uid, why)
	case st.Uid != 0 && int(st.Uid) != os.Geteuid():
		return errclass.Configf("%s %s: owned by uid %d, not root: %s", what, files.Path(p), st.Uid, why)
	}
	return nil
}

// mergeDropIns merges the drop-ins into doc (the config file's, from
// file) under elemental.registration and returns one note per key set
// twice, and where each merged key came from. A drop-in holding anything
// but elemental.registration is a configuration error: what it sets would
// otherwise silently not apply.
func mergeDropIns(file string, doc *yaml.Node, ins []dropIn) (notes []string, from map[string]string, err error) {
	from = map[string]string{}
	if len(ins) == 0 {
		return nil, from, nil
	}
	reg, err := registrationNode(file, doc, true)
	if err != nil {
		return nil, nil, err
	}
	for i := 0; i+1 < len(reg.Content); i += 2 {
		from[reg.Content[i].Value] = file
	}
	for _, d := range ins {
		src, err := registrationNode(d.Path, &d.doc, false)
		if err != nil || src == nil {
			return nil, nil, err
		}
		for i := 0; i+1 < len(src.Content); i += 2 {
			k, v := src.Content[i], src.Content[i+1]
			key := "elemental.registration." + k.Value
			switch prev, set := from[k.Value]; {
			case set && prev == file:
				notes = append(notes, fmt.Sprintf("drop-in %s:%d: %s is set in the config file %s too: the config file's is kept", d.Path, k.Line, key, file))
				continue
			case set:
				notes = append(notes, fmt.Sprintf("drop-in %s:%d: %s replaces the one of the earlier drop-in %s", d.Path, k.Line, key, prev))
				replaceValue(reg, k.Value, v)
			default:
				reg.Content = append(reg.Content, k, v)
			}
			from[k.Value] = d.Path
		}
	}
	return notes, from, nil
}

// registrationNode is doc's elemental.registration mapping; with create,
// the config file's, made when it has none. A drop-in (create false) must
// hold nothing else; an empty one has none (nil).
func registrationNode(file string, doc *yaml.Node, create bool) (*yaml.Node, error) {
	if doc.Kind == 0 {
		if !create {
			return nil, nil
		}
		doc.Kind = yaml.DocumentNode
	}
	if len(doc.Content) == 0 {
		doc.Content = []*yaml.Node{{Kind: yaml.MappingNode, Tag: "!!map"}}
	}
	n, prefix := doc.Content[0], ""
	for _, name := range []string{"elemental", "registration"} {
		if n.Kind != yaml.MappingNode {
			return nil, errclass.Configf("%s:%d: not a mapping where %s is expected", file, n.Line, name)
		}
		var next *yaml.Node
		for i := 0; i+1 < len(n.Content); i += 2 {
			switch k := n.Content[i]; {
			case k.Value == name:
				next = n.Content[i+1]
			case !create:
				return nil, errclass.Configf("drop-in %s:%d: %s%s: a drop-in holds only keys under elemental.registration", file, k.Line, prefix, k.Value)
			}
		}
		if next == nil {
			next = &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
			n.Content = append(n.Content, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: name}, next)
		}
		if next.Kind == yaml.ScalarNode && next.Tag == "!!null" {
			*next = yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
		}
		n, prefix = next, prefix+name+"."
	}
	if n.Kind != yaml.MappingNode {
		return nil, errclass.Configf("%s:%d: elemental.registration is not a mapping", file, n.Line)
	}
	return n, nil
}

func replaceValue(m *yaml.Node, key string, v *yaml.Node) {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			m.Content[i+1] = v
		}
	}
}
