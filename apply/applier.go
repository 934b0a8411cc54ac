package apply

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/nodereg/nodereg/internal/atomicfile"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/sirupsen/logrus"
	"gopkg.in/yaml.v3"

	"github.com/nodereg/nodereg/protocol"
)

// Paths is the one table of host paths this package writes, relative to
// Applier.Root.
type Paths struct {
	// KeyfileDir is where NetworkManager reads persistent profiles.
	KeyfileDir string
	// Applicator is the yip file. Upstream's name, so upstream's
	// --reset-network and its reset plan remove it too, and an image
	// installed by elemental-register is taken over instead of getting a
	// second applicator for the same NIC.
	Applicator string
	// StateDir holds the digested config and the manifest. No file in it
	// ends in .yaml/.yml: yip loads those from /oem recursively.
	StateDir string
}

// DefaultPaths are the Elemental locations (REFERENCE.md 2.6).
func DefaultPaths() Paths {
	return Paths{
		KeyfileDir: "/etc/NetworkManager/system-connections",
		Applicator: "/oem/elemental-network.yaml",
		StateDir:   "/oem/nodereg",
	}
}

const (
	manifestName = "network-manifest.json"
	// DefaultCheckpointTimeout is nmstatectl's own default rollback time.
	DefaultCheckpointTimeout = 60 * time.Second
	defaultCommandTimeout    = 2 * time.Minute
)

// digestedName is the digested config's file name; the extension says what
// it is and is never .yaml, so yip does not load it.
func digestedName(configurator string) string {
	return "network-config." + configurator
}

// ErrRolledBack marks a live apply that was undone: the previous network and
// the previous applicator are in place, trying again later may work (the
// agent exits 75).
var ErrRolledBack = errors.New("network change rolled back")

// LiveApplyError is a failed live apply; Step names what failed.
type LiveApplyError struct {
	Step        string
	Err         error
	RollbackErr error // non-nil when the way back failed too
}

func (e *LiveApplyError) Error() string {
	msg := fmt.Sprintf("apply network live: %s: %v", e.Step, e.Err)
	if e.RollbackErr != nil {
		msg += "; rolling back also failed: " + e.RollbackErr.Error()
	} else {
		msg += "; rolled back"
	}
	return msg
}

func (e *LiveApplyError) Unwrap() []error { return []error{e.Err, ErrRolledBack} }

// Applier plans, persists and applies rendered network configs on the host
// below Root. The zero value of every field but Root is usable.
type Applier struct {
	Root   string // "/" on the node, a temp dir in tests
	Runner Runner // nil: ExecRunner
	Tools  Tools  // zero: DefaultTools
	Paths  Paths  // zero: DefaultPaths
	Log    *logrus.Entry
	// DryRun, when non-nil, receives what would be written and run;
	// nothing is written and only side-effect-free commands run
	// (nmstatectl gc).
	DryRun io.Writer
	// Env is added to every command (e.g. DBUS_SYSTEM_BUS_ADDRESS).
	Env []string
	// CheckpointTimeout is nmstatectl apply --timeout; the reachability
	// check gets half of it so the commit lands before NetworkManager's
	// own rollback.
	CheckpointTimeout time.Duration
	// CommandTimeout bounds every other command.
	CommandTimeout time.Duration
}

// Plan is everything a persist or live apply would do, computed without side
// effects.
type Plan struct {
	Configurator string
	Digested     []byte    // nil for none
	Keyfiles     []Keyfile // sorted by name
	Applicator   []byte    // yip file, nil for none
	// Ran are the commands run while planning (side-effect free);
	// Live are the ones ApplyLive would run.
	Ran, Live []Command

	paths  Paths
	digest string
}

func (a *Applier) paths() Paths {
	p := a.Paths
	d := DefaultPaths()
	if p.KeyfileDir == "" {
		p.KeyfileDir = d.KeyfileDir
	}
	if p.Applicator == "" {
		p.Applicator = d.Applicator
	}
	if p.StateDir == "" {
		p.StateDir = d.StateDir
	}
	return p
}

func (a *Applier) tools() Tools {
	t := a.Tools
	d := DefaultTools()
	if t.Nmstatectl == "" {
		t.Nmstatectl = d.Nmstatectl
	}
	if t.Nmcli == "" {
		t.Nmcli = d.Nmcli
	}
	if t.Nmc == "" {
		t.Nmc = d.Nmc
	}
	if t.Systemctl == "" {
		t.Systemctl = d.Systemctl
	}
	if t.Elemental == "" {
		t.Elemental = d.Elemental
	}
	return t
}

func (a *Applier) runner() Runner {
	if a.Runner == nil {
		return ExecRunner{}
	}
	return a.Runner
}

func (a *Applier) log() *logrus.Entry {
	if a.Log == nil {
		l := logrus.New()
		l.SetOutput(io.Discard)
		return logrus.NewEntry(l)
	}
	return a.Log
}

// host maps an absolute host path below Root.
func (a *Applier) host(p string) string {
	root := a.Root
	if root == "" {
		root = "/"
	}
	return filepath.Join(root, filepath.FromSlash(p))
}

func (a *Applier) checkpointTimeout() time.Duration {
	if a.CheckpointTimeout > 0 {
		return a.CheckpointTimeout
	}
	return DefaultCheckpointTimeout
}

func (a *Applier) run(ctx context.Context, c Command) ([]byte, error) {
	c.Env = append(append([]string(nil), a.Env...), c.Env...)
	t := a.CommandTimeout
	if t <= 0 {
		t = defaultCommandTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, t)
	defer cancel()
	a.log().WithField("command", c.String()).Debug("running")
	return a.runner().Run(ctx, c)
}

// Plan computes keyfiles and the yip applicator for r. For nmstate it runs
// nmstatectl gc (offline, touches nothing); a tool the configurator needs
// and cannot find is reported before anything else happens.
func (a *Applier) Plan(ctx context.Context, r *Rendered) (*Plan, error) {
	p := &Plan{Configurator: r.Configurator, Digested: r.Digested, paths: a.paths(), digest: r.Digest()}
	tools := a.tools()
	var err error
	switch r.Configurator {
	case protocol.ConfiguratorNone:
		return p, nil
	case protocol.ConfiguratorNmstate:
		var nmstatectl string
		if nmstatectl, err = resolve("nmstatectl", tools.Nmstatectl); err != nil {
			return nil, fmt.Errorf("plan network (nmstate): %w", err)
		}
		gc := Command{Name: nmstatectl, Args: []string{"gc", "-"}, Stdin: r.Digested}
		out, err := a.run(ctx, gc)
		p.Ran = append(p.Ran, gc)
		if err != nil {
			return nil, fmt.Errorf("plan network (nmstate): generating keyfiles: %w", err)
		}
		if p.Keyfiles, err = parseGC(out); err != nil {
			return nil, fmt.Errorf("plan network (nmstate): %w", err)
		}
		stdin := Command{Name: nmstatectl, Args: []string{"apply", "--no-commit", "--timeout", a.timeoutArg(), "-"}, Stdin: r.Digested}
		p.Live = []Command{stdin, {Name: nmstatectl, Args: []string{"commit"}}}
	case protocol.ConfiguratorNmconnections:
		p.Keyfiles = append(p.Keyfiles, r.Keyfiles...)
		p.Live = a.keyfileCommands(tools.Nmcli, p.Keyfiles)
	case protocol.ConfiguratorNmc:
		var nmc string
		if nmc, err = resolve("nmc", tools.Nmc); err != nil {
			return nil, fmt.Errorf("plan network (nmc): %w", err)
		}
		if p.Keyfiles, p.Ran, err = a.nmcGenerate(ctx, nmc, r.Digested); err != nil {
			return nil, fmt.Errorf("plan network (nmc): %w", err)
		}
		p.Live = a.keyfileCommands(tools.Nmcli, p.Keyfiles)
	default:
		return nil, &FieldError{Path: "configurator", Reason: fmt.Sprintf("unknown configurator %q", r.Configurator)}
	}
	sort.Slice(p.Keyfiles, func(i, j int) bool { return p.Keyfiles[i].Name < p.Keyfiles[j].Name })
	if p.Applicator, err = buildApplicator(p.paths.KeyfileDir, p.Keyfiles); err != nil {
		return nil, fmt.Errorf("plan network (%s): %w", r.Configurator, err)
	}
	return p, nil
}

func (a *Applier) timeoutArg() string {
	return strconv.Itoa(int((a.checkpointTimeout() + time.Second - 1) / time.Second))
}

// keyfileCommands are what a live keyfile apply runs, as printed by a dry
// run. Profiles are activated by UUID, looked up by the keyfile's path: an
// id may also name a profile NetworkManager made itself for an interface
// that already had an address (then `up id` would activate that one).
func (a *Applier) keyfileCommands(nmcli string, kfs []Keyfile) []Command {
	cmds := []Command{{Name: nmcli, Args: []string{"connection", "reload"}}, profilesCommand(nmcli)}
	for _, kf := range kfs {
		cmds = append(cmds, Command{Name: nmcli, Args: []string{"connection", "up", "uuid", "<UUID of " + path.Join(a.paths().KeyfileDir, kf.Name) + ">"}})
	}
	return cmds
}

func profilesCommand(nmcli string) Command {
	return Command{Name: nmcli, Args: []string{"-t", "-f", "UUID,FILENAME", "connection", "show"}}
}

// activate reloads NetworkManager's profiles and brings up the ones stored
// in files (host paths), by UUID.
func (a *Applier) activate(ctx context.Context, nmcli string, files []string) (step string, err error) {
	if _, err := a.run(ctx, Command{Name: nmcli, Args: []string{"connection", "reload"}}); err != nil {
		return "connection reload", err
	}
	out, err := a.run(ctx, profilesCommand(nmcli))
	if err != nil {
		return "connection show", err
	}
	byFile := parseProfiles(out)
	for _, f := range files {
		uuid, ok := byFile[f]
		if !ok {
			return "connection up", fmt.Errorf("NetworkManager did not load %s (check its keyfile directory and the file's contents)", f)
		}
		if _, err := a.run(ctx, Command{Name: nmcli, Args: []string{"connection", "up", "uuid", uuid}}); err != nil {
			return "connection up", err
		}
	}
	return "", nil
}

// parseProfiles reads `nmcli -t -f UUID,FILENAME connection show`: one
// profile a line, fields split at the first colon (a UUID has none), the
// terse format's escapes (\: and \\) undone in the file name.
func parseProfiles(out []byte) map[string]string {
	m := map[string]string{}
	for _, line := range strings.Split(string(out), "\n") {
		uuid, file, ok := strings.Cut(line, ":")
		if !ok || file == "" {
			continue
		}
		file = strings.NewReplacer(`\:`, ":", `\\`, `\`).Replace(file)
		m[file] = uuid
	}
	return m
}

// parseGC reads nmstatectl gc's YAML: NetworkManager -> [[name, text], ...].
func parseGC(out []byte) ([]Keyfile, error) {
	var doc map[string][][]string
	if err := yaml.Unmarshal(out, &doc); err != nil {
		return nil, fmt.Errorf("nmstatectl gc output is not the expected YAML: %w", err)
	}
	list, ok := doc["NetworkManager"]
	if !ok {
		return nil, fmt.Errorf("nmstatectl gc output has no NetworkManager key")
	}
	var kfs []Keyfile
	seen := map[string]bool{}
	for i, e := range list {
		path := fmt.Sprintf("nmstatectl gc output NetworkManager[%d]", i)
		if len(e) != 2 {
			return nil, &FieldError{Path: path, Reason: fmt.Sprintf("want [name, content], got %d elements", len(e))}
		}
		if err := checkFileName(path, e[0]); err != nil {
			return nil, err
		}
		if seen[e[0]] {
			return nil, &FieldError{Path: path, Reason: "duplicate keyfile " + e[0]}
		}
		seen[e[0]] = true
		if err := ParseKeyfile(path, []byte(e[1])); err != nil {
			return nil, err
		}
		kfs = append(kfs, Keyfile{Name: e[0], Content: []byte(e[1])})
	}
	return kfs, nil
}

// nmcGenerate runs nm-configurator on the digested state in a private temp
// directory and collects the keyfiles it generates.
func (a *Applier) nmcGenerate(ctx context.Context, nmc string, digested []byte) ([]Keyfile, []Command, error) {
	tmp, err := os.MkdirTemp("", "nodereg-nmc-")
	if err != nil {
		return nil, nil, err
	}
	defer os.RemoveAll(tmp)
	in, out := filepath.Join(tmp, "desired-states"), filepath.Join(tmp, "network-config")
	if err := os.Mkdir(in, 0o700); err != nil {
		return nil, nil, err
	}
	if err := os.WriteFile(filepath.Join(in, "_all.yaml"), digested, 0o600); err != nil {
		return nil, nil, err
	}
	gen := Command{Name: nmc, Args: []string{"generate", "--config-dir", in, "--output-dir", out}}
	if _, err := a.run(ctx, gen); err != nil {
		return nil, []Command{gen}, fmt.Errorf("generating keyfiles: %w", err)
	}
	var kfs []Keyfile
	seen := map[string]bool{}
	err = filepath.WalkDir(out, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(d.Name(), keyfileSuffix) {
			return err
		}
		name := d.Name()
		if err := checkFileName("nmc output "+name, name); err != nil {
			return err
		}
		if seen[name] {
			return fmt.Errorf("nmc generated %s twice", name)
		}
		seen[name] = true
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if err := ParseKeyfile("nmc output "+name, b); err != nil {
			return err
		}
		kfs = append(kfs, Keyfile{Name: name, Content: b})
		return nil
	})
	return kfs, []Command{gen}, err
}

// Digest is a stable hash of what would be persisted and applied, for the
// state file's "last applied" and for skipping a no-op apply.
func (p *Plan) Digest() string { return p.digest }

// Manifest lists the files the agent owns, as host paths (without Root).
type Manifest struct {
	Version      int            `json:"version"`
	Configurator string         `json:"configurator"`
	Digest       string         `json:"digest"`
	Files        []ManifestFile `json:"files"`
}

// ManifestFile is one owned file. Kind is applicator, digested or keyfile.
type ManifestFile struct {
	Path   string `json:"path"`
	Kind   string `json:"kind"`
	SHA256 string `json:"sha256"`
}

func (p *Plan) files() []ManifestFile {
	sum := func(b []byte) string { s := sha256.Sum256(b); return hex.EncodeToString(s[:]) }
	var fs []ManifestFile
	for _, kf := range p.Keyfiles {
		fs = append(fs, ManifestFile{Path: path.Join(p.paths.KeyfileDir, kf.Name), Kind: "keyfile", SHA256: sum(kf.Content)})
	}
	fs = append(fs,
		ManifestFile{Path: path.Join(p.paths.StateDir, digestedName(p.Configurator)), Kind: "digested", SHA256: sum(p.Digested)},
		ManifestFile{Path: p.paths.Applicator, Kind: "applicator", SHA256: sum(p.Applicator)})
	return fs
}

func (a *Applier) manifestPath() string {
	return a.host(path.Join(a.paths().StateDir, manifestName))
}

// readManifest returns the current manifest; a missing one is empty.
func (a *Applier) readManifest() (*Manifest, error) {
	b, err := os.ReadFile(a.manifestPath())
	if errors.Is(err, fs.ErrNotExist) {
		return &Manifest{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading network manifest: %w", err)
	}
	var m Manifest
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("reading network manifest %s: %w", a.manifestPath(), err)
	}
	return &m, nil
}

// ownedPaths are the host files Persist may replace: the current owned set
// plus what the plan writes, so a failed change can restore all of them.
func (a *Applier) persistTargets(p *Plan) []string {
	pp := a.paths()
	return []string{
		a.host(p.paths.Applicator),
		a.host(path.Join(pp.StateDir, digestedName(p.Configurator))),
		a.manifestPath(),
	}
}

// Persist writes the digested config, the yip applicator and the manifest
// under Root/oem, each atomically. The manifest is written first with the
// union of old and new files, so an interruption never leaves an owned file
// unlisted. A none plan persists nothing.
func (a *Applier) Persist(p *Plan) error {
	if p.Configurator == protocol.ConfiguratorNone {
		return nil
	}
	if p.Applicator == nil {
		return fmt.Errorf("persist network: plan for %s has no applicator", p.Configurator)
	}
	files := p.files()
	if a.DryRun != nil {
		for _, f := range files {
			fmt.Fprintf(a.DryRun, "# would write %s (0600)\n", a.host(f.Path))
		}
		fmt.Fprintf(a.DryRun, "# would write %s (0600)\n", a.manifestPath())
		return nil
	}
	log := a.log().WithField("configurator", p.Configurator)
	old, err := a.readManifest()
	if err != nil {
		return fmt.Errorf("persist network: %w", err)
	}
	m := Manifest{Version: 1, Configurator: p.Configurator, Digest: p.Digest(), Files: files}
	union := m
	union.Files = mergeFiles(old.Files, files)
	stateDir := a.host(a.paths().StateDir)
	if err := os.MkdirAll(stateDir, 0o700); err != nil {
		return fmt.Errorf("persist network: creating %s: %w", stateDir, err)
	}
	if err := os.MkdirAll(filepath.Dir(a.host(p.paths.Applicator)), 0o755); err != nil {
		return fmt.Errorf("persist network: %w", err)
	}
	if err := a.writeManifest(&union); err != nil {
		return fmt.Errorf("persist network: %w", err)
	}
	if err := atomicfile.Write(a.host(files[len(files)-2].Path), p.Digested, 0o600); err != nil {
		return fmt.Errorf("persist network: digested config: %w", err)
	}
	if err := atomicfile.Write(a.host(p.paths.Applicator), p.Applicator, 0o600); err != nil {
		return fmt.Errorf("persist network: yip applicator: %w", err)
	}
	if err := a.writeManifest(&m); err != nil {
		return fmt.Errorf("persist network: %w", err)
	}
	log.WithField("digest", m.Digest).Info("network config persisted")
	return nil
}

func (a *Applier) writeManifest(m *Manifest) error {
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return fmt.Errorf("encoding network manifest: %w", err)
	}
	return atomicfile.Write(a.manifestPath(), append(b, '\n'), 0o600)
}

func mergeFiles(a, b []ManifestFile) []ManifestFile {
	seen := map[string]bool{}
	var out []ManifestFile
	for _, f := range append(append([]ManifestFile(nil), b...), a...) {
		if !seen[f.Path] {
			seen[f.Path] = true
			out = append(out, f)
		}
	}
	return out
}

// ApplyLive makes the plan the running network with a way back, then
// persists it. nmstate: apply with a checkpoint, check reachable, persist,
// commit. nmconnections/nmc: install the keyfiles, reload, bring the
// connections up, check reachable, persist. Any failure restores the
// previous network and the previous applicator byte for byte and returns a
// *LiveApplyError (errors.Is ErrRolledBack). reachable gets a context whose
// deadline ends before the checkpoint would expire.
func (a *Applier) ApplyLive(ctx context.Context, p *Plan, reachable func(context.Context) error) error {
	switch p.Configurator {
	case protocol.ConfiguratorNone:
		return nil
	case protocol.ConfiguratorNmstate:
		return a.applyNmstate(ctx, p, reachable)
	case protocol.ConfiguratorNmconnections, protocol.ConfiguratorNmc:
		return a.applyKeyfiles(ctx, p, reachable)
	}
	return &FieldError{Path: "configurator", Reason: fmt.Sprintf("unknown configurator %q", p.Configurator)}
}

func (a *Applier) checkReachable(ctx context.Context, reachable func(context.Context) error) error {
	if reachable == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, a.checkpointTimeout()/2)
	defer cancel()
	if err := reachable(ctx); err != nil {
		return fmt.Errorf("registration server not reachable after the change: %w", err)
	}
	return nil
}

func (a *Applier) applyNmstate(ctx context.Context, p *Plan, reachable func(context.Context) error) error {
	nmstatectl, err := resolve("nmstatectl", a.tools().Nmstatectl)
	if err != nil {
		return fmt.Errorf("apply network live (nmstate): %w", err)
	}
	apply := Command{Name: nmstatectl, Args: []string{"apply", "--no-commit", "--timeout", a.timeoutArg(), "-"}, Stdin: p.Digested}
	commit := Command{Name: nmstatectl, Args: []string{"commit"}}
	if a.DryRun != nil {
		for _, c := range []Command{apply, commit} {
			fmt.Fprintf(a.DryRun, "# would run %s\n", c)
		}
		return a.Persist(p)
	}
	log := a.log().WithField("configurator", p.Configurator)
	prev, err := takeSnapshot(a.persistTargets(p)...)
	if err != nil {
		return fmt.Errorf("apply network live (nmstate): %w", err)
	}
	back := func(step string, cause error, restoreFiles bool) error {
		// A fresh context: the caller's may be what just expired.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), a.checkpointTimeout())
		defer cancel()
		var errs []error
		if _, err := a.run(rctx, Command{Name: nmstatectl, Args: []string{"rollback"}}); err != nil {
			if step == "nmstatectl apply" {
				// A failed apply rolls its own checkpoint back, so there
				// may be nothing left to roll back; a killed one leaves
				// the checkpoint, which this call then removes.
				log.WithError(err).Debug("rollback after a failed apply")
			} else {
				errs = append(errs, err)
			}
		}
		if restoreFiles {
			errs = append(errs, prev.restore())
		}
		log.WithError(cause).WithField("step", step).Warn("network change rolled back")
		return &LiveApplyError{Step: step, Err: cause, RollbackErr: errors.Join(errs...)}
	}
	log.Info("applying network config with a checkpoint")
	if _, err := a.run(ctx, apply); err != nil {
		return back("nmstatectl apply", err, false)
	}
	if err := a.checkReachable(ctx, reachable); err != nil {
		return back("reachability check", err, false)
	}
	if err := a.Persist(p); err != nil {
		return back("persist", err, true)
	}
	if _, err := a.run(ctx, commit); err != nil {
		return back("nmstatectl commit", err, true)
	}
	log.Info("network config committed")
	return nil
}

func (a *Applier) applyKeyfiles(ctx context.Context, p *Plan, reachable func(context.Context) error) error {
	nmcli, err := resolve("nmcli", a.tools().Nmcli)
	if err != nil {
		return fmt.Errorf("apply network live (%s): %w", p.Configurator, err)
	}
	dir := a.host(p.paths.KeyfileDir)
	var targets []string
	for _, kf := range p.Keyfiles {
		t, err := within(dir, kf.Name)
		if err != nil {
			return fmt.Errorf("apply network live (%s): %w", p.Configurator, err)
		}
		targets = append(targets, t)
	}
	cmds := a.keyfileCommands(nmcli, p.Keyfiles)
	if a.DryRun != nil {
		for _, t := range targets {
			fmt.Fprintf(a.DryRun, "# would write %s (0600)\n", t)
		}
		for _, c := range cmds {
			fmt.Fprintf(a.DryRun, "# would run %s\n", c)
		}
		return a.Persist(p)
	}
	log := a.log().WithField("configurator", p.Configurator)
	// Keyfiles owned by the previous config and not by this one go away
	// too, else NetworkManager keeps two profiles for one device.
	old, err := a.readManifest()
	if err != nil {
		return fmt.Errorf("apply network live (%s): %w", p.Configurator, err)
	}
	var stale []string
	for _, f := range old.Files {
		if f.Kind != "keyfile" || path.Dir(f.Path) != p.paths.KeyfileDir {
			continue
		}
		h := a.host(f.Path)
		if !contains(targets, h) {
			stale = append(stale, h)
		}
	}
	prevKeyfiles, err := takeSnapshot(append(append([]string(nil), targets...), stale...)...)
	if err != nil {
		return fmt.Errorf("apply network live (%s): %w", p.Configurator, err)
	}
	prevFiles, err := takeSnapshot(a.persistTargets(p)...)
	if err != nil {
		return fmt.Errorf("apply network live (%s): %w", p.Configurator, err)
	}
	var prevFilesUp []string
	for _, f := range append(append([]string(nil), stale...), targets...) {
		if prevKeyfiles[f] != nil {
			prevFilesUp = append(prevFilesUp, f)
		}
	}
	back := func(step string, cause error) error {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), a.checkpointTimeout())
		defer cancel()
		errs := []error{prevKeyfiles.restore(), prevFiles.restore()}
		if _, err := a.activate(rctx, nmcli, prevFilesUp); err != nil {
			errs = append(errs, err)
		}
		log.WithError(cause).WithField("step", step).Warn("network change rolled back")
		return &LiveApplyError{Step: step, Err: cause, RollbackErr: errors.Join(errs...)}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("apply network live (%s): %w", p.Configurator, err)
	}
	for i, t := range targets {
		if err := atomicfile.Write(t, p.Keyfiles[i].Content, 0o600); err != nil {
			return back("installing keyfiles", err)
		}
	}
	for _, s := range stale {
		if err := atomicfile.Remove(s); err != nil {
			return back("removing stale keyfiles", err)
		}
	}
	if step, err := a.activate(ctx, nmcli, targets); err != nil {
		return back(step, err)
	}
	if err := a.checkReachable(ctx, reachable); err != nil {
		return back("reachability check", err)
	}
	if err := a.Persist(p); err != nil {
		return back("persist", err)
	}
	log.Info("network keyfiles applied")
	return nil
}

func contains(l []string, s string) bool {
	for _, e := range l {
		if e == s {
			return true
		}
	}
	return false
}

// ResetNetwork is RemoveNetwork without the list of removed files.
func (a *Applier) ResetNetwork(ctx context.Context) error {
	_, err := a.RemoveNetwork(ctx)
	return err
}

// ReloadError says the agent's network files are removed but
// NetworkManager could not be told (not installed, not running): the next
// `nmcli connection reload` or boot picks the change up.
type ReloadError struct{ Err error }

func (e *ReloadError) Error() string {
	return "files removed, NetworkManager not reloaded: " + e.Err.Error()
}
func (e *ReloadError) Unwrap() error { return e.Err }

// RemoveNetwork removes the network config this agent wrote: the files in
// its manifest (only inside its own directories), the applicator and the
// manifest, and returns those that existed. Nothing there is not an error,
// and NetworkManager is then left alone. The files are removed before
// NetworkManager is reloaded, so a NetworkManager that is down costs only a
// *ReloadError.
func (a *Applier) RemoveNetwork(ctx context.Context) ([]string, error) {
	pp := a.paths()
	m, err := a.readManifest()
	if err != nil {
		return nil, fmt.Errorf("reset network: %w", err)
	}
	var candidates []string
	for _, f := range m.Files {
		dir := path.Dir(path.Clean(f.Path))
		if path.Clean(f.Path) != pp.Applicator && dir != pp.KeyfileDir && dir != pp.StateDir {
			a.log().WithField("path", f.Path).Warn("reset network: manifest entry outside the agent's directories ignored")
			continue
		}
		candidates = append(candidates, a.host(path.Clean(f.Path)))
	}
	candidates = append(candidates, a.host(pp.Applicator), a.manifestPath())
	var present []string
	for _, c := range candidates {
		if _, err := os.Lstat(c); err == nil && !contains(present, c) {
			present = append(present, c)
		}
	}
	nmcli, nmcliErr := resolve("nmcli", a.tools().Nmcli)
	if nmcliErr != nil {
		nmcli = a.tools().Nmcli
	}
	reload := Command{Name: nmcli, Args: []string{"connection", "reload"}}
	if a.DryRun != nil {
		if len(present) == 0 {
			fmt.Fprintln(a.DryRun, "# nothing to remove")
			return nil, nil
		}
		for _, r := range present {
			fmt.Fprintf(a.DryRun, "# would remove %s\n", r)
		}
		fmt.Fprintf(a.DryRun, "# would run %s\n", reload)
		return present, nil
	}
	var removed []string
	var errs []error
	for _, r := range present {
		if err := atomicfile.Remove(r); err != nil {
			errs = append(errs, err)
			continue
		}
		removed = append(removed, r)
		a.log().WithField("path", r).Info("removed")
	}
	if err := errors.Join(errs...); err != nil {
		return removed, fmt.Errorf("reset network: %w", err)
	}
	if len(removed) == 0 {
		return nil, nil
	}
	if nmcliErr != nil {
		return removed, &ReloadError{Err: nmcliErr}
	}
	if _, err := a.run(ctx, reload); err != nil {
		return removed, &ReloadError{Err: err}
	}
	return removed, nil
}

// Print writes the plan for a human: digested config, keyfiles, yip file
// and commands, each headed by where it would go.
func (p *Plan) Print(w io.Writer) {
	fmt.Fprintf(w, "# configurator: %s\n# digest: %s\n", p.Configurator, p.Digest())
	if p.Configurator == protocol.ConfiguratorNone {
		fmt.Fprintln(w, "# nothing to render, persist or apply")
		return
	}
	section := func(title string, body []byte) {
		fmt.Fprintf(w, "# ---- %s\n", title)
		w.Write(body)
		if len(body) > 0 && body[len(body)-1] != '\n' {
			fmt.Fprintln(w)
		}
	}
	section("digested config: "+path.Join(p.paths.StateDir, digestedName(p.Configurator))+" (0600)", p.Digested)
	for _, kf := range p.Keyfiles {
		section("keyfile: "+path.Join(p.paths.KeyfileDir, kf.Name)+" (0600, written at every boot by the applicator)", kf.Content)
	}
	section("yip applicator: "+p.paths.Applicator+" (0600)", p.Applicator)
	fmt.Fprintln(w, "# ---- commands")
	for _, c := range p.Ran {
		fmt.Fprintf(w, "%s    # ran while planning, no side effects\n", c)
	}
	for _, c := range p.Live {
		fmt.Fprintf(w, "%s\n", c)
	}
}
