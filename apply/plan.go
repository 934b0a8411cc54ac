package apply

import (
	"context"
	"fmt"
	"io"
	"path"
	"strconv"
	"time"

	"github.com/nodereg/nodereg/internal/host"
	"github.com/nodereg/nodereg/nmstate"
	"github.com/nodereg/nodereg/protocol"
)

// Plan is everything a persist or live apply would do, computed without side
// effects.
type Plan struct {
	Configurator string
	Digested     []byte    // nil for none
	Keyfiles     []Keyfile // in the generator's order (gc's listing order), see docs/nmstate.md
	Applicator   []byte    // yip file, nil for none
	// Generator is what produced the keyfiles (Generator* constants);
	// for nmstate it also picks the live apply: nmstatectl's checkpoint
	// for GeneratorNmstatectl, the keyfile way for GeneratorBuiltin. It
	// is not part of the digest: both write the same bytes for what the
	// built-in accepts, so a change of generator alone changes nothing on
	// the node.
	Generator string
	// Ran are the commands run while planning (side-effect free);
	// Live are the ones ApplyLive would run.
	Ran, Live []host.Command

	paths  paths
	digest string
}

// Digest is a stable hash of what would be persisted and applied, for the
// state file's "last applied" and for skipping a no-op apply.
func (p *Plan) Digest() string { return p.digest }

// digestedPath is the digested config's host path; its extension says what
// it is and is never .yaml, so yip does not load it.
func (p *Plan) digestedPath() string {
	return path.Join(p.paths.StateDir, "network-config."+p.Configurator)
}

// Plan computes keyfiles and the yip applicator for r. For nmstate it runs
// the keyfile generator (nmstatectl gc: offline, touches nothing); a tool
// the configurator needs and cannot find is reported before anything else
// happens. A keyfile that would replace a file the agent does not own is
// refused here (*NotOwnedError), so a dry run and render show it and no
// later step writes anything.
func (a *Applier) Plan(ctx context.Context, r *Rendered) (*Plan, error) {
	p, err := a.PlanKeyfiles(ctx, r)
	if err != nil {
		return nil, err
	}
	// Both checks read the manifest: once per plan, so they judge one
	// view of it (it was read three times, once per check and once for
	// the intent).
	m := a.planManifest(p)
	if err := a.checkOwnership(p, m); err != nil {
		return nil, err
	}
	if err := a.checkPolicyForeign(p, m); err != nil {
		return nil, err
	}
	return p, nil
}

// PlanKeyfiles is Plan without the ownership check of KeyfileDir, for
// keyfiles installed somewhere else under names of their own (the
// bootstrap network's runtime profiles).
func (a *Applier) PlanKeyfiles(ctx context.Context, r *Rendered) (*Plan, error) {
	p := &Plan{Configurator: r.Configurator, Digested: r.Digested, paths: a.paths(), digest: r.Digest()}
	tools := a.tools()
	var gen KeyfileGenerator
	switch r.Configurator {
	case protocol.ConfiguratorNone:
		return p, nil
	case protocol.ConfiguratorNmstate:
		nmstatectl, err := a.nmstatectl()
		if err != nil {
			return nil, fmt.Errorf("plan network (nmstate): %w", err)
		}
		if nmstatectl == "" {
			gen, p.Generator = BuiltinNmstate{}, GeneratorBuiltin
		} else {
			gen, p.Generator = NmstatectlGC{Path: nmstatectl, Run: a.runFunc(), Log: a.log()}, GeneratorNmstatectl
			p.Live = nmstateCommands(nmstatectl, a.timeoutArg(), r.Digested)
		}
	case protocol.ConfiguratorNmconnections:
		p.Keyfiles = append(p.Keyfiles, r.Keyfiles...)
	case protocol.ConfiguratorNmc:
		nmc, err := host.Lookup("nmc", tools.Nmc)
		if err != nil {
			return nil, fmt.Errorf("plan network (nmc): %w", err)
		}
		gen, p.Generator = nmcGenerator{path: nmc, run: a.runFunc()}, GeneratorNmc
	default:
		return nil, &FieldError{Path: "configurator", Reason: fmt.Sprintf("unknown configurator %q", r.Configurator)}
	}
	if err := a.checkPolicyState(r); err != nil {
		return nil, err
	}
	if gen != nil {
		kfs, ran, err := gen.Generate(ctx, r.Digested)
		p.Ran = append(p.Ran, ran...)
		if err != nil {
			return nil, fmt.Errorf("plan network (%s): %w", r.Configurator, err)
		}
		p.Keyfiles = kfs
	}
	if err := a.checkPolicyKeyfiles(p); err != nil {
		return nil, err
	}
	if !p.nmstatectlLive() {
		p.Live = a.keyfileCommands(tools.Nmcli, p.Keyfiles)
	}
	var err error
	if p.Applicator, err = buildApplicator(p.paths.KeyfileDir, p.Keyfiles); err != nil {
		return nil, fmt.Errorf("plan network (%s): %w", r.Configurator, err)
	}
	return p, nil
}

// nmstatectl resolves Applier.Nmstate: the nmstatectl executable, or ""
// for the built-in translator. Auto takes nmstatectl when it is found and
// never falls back to it afterwards: what the built-in refuses is refused
// with the key path, only --nmstate=nmstatectl hands it to the tool.
func (a *Applier) nmstatectl() (string, error) {
	choice, err := ParseNmstateChoice(string(a.Nmstate))
	if err != nil {
		return "", &FieldError{Path: "nmstate generator", Reason: err.Error()}
	}
	switch choice {
	case NmstateBuiltin:
		return "", nil
	case NmstateNmstatectl:
		return host.Lookup("nmstatectl", a.tools().Nmstatectl)
	}
	p, err := host.Lookup("nmstatectl", a.tools().Nmstatectl)
	if err != nil {
		a.log().WithField("choice", choice).Debugf("%v: nmstate keyfiles by the built-in translator", err)
		return "", nil
	}
	return p, nil
}

// nmstatectlLive says the plan goes live through nmstatectl's checkpoint;
// every other plan with keyfiles goes the keyfile way.
func (p *Plan) nmstatectlLive() bool {
	return p.Configurator == protocol.ConfiguratorNmstate && p.Generator == GeneratorNmstatectl
}

// GeneratorNote says in words what produced the keyfiles and how they go
// live, for render, --dry-run and the logs; "" when no generator ran.
func (p *Plan) GeneratorNote() string {
	switch p.Generator {
	case GeneratorBuiltin:
		return "keyfiles by the built-in nmstate translator (matches nmstatectl gc of nmstate " + nmstate.MatchedVersion + "), applied live as keyfiles (nmcli)"
	case GeneratorNmstatectl:
		return "keyfiles by nmstatectl gc, applied live by nmstatectl apply with a checkpoint"
	case GeneratorNmc:
		return "keyfiles by nmc generate, applied live as keyfiles (nmcli)"
	}
	return ""
}

func (a *Applier) timeoutArg() string {
	return strconv.Itoa(int((a.checkpointTimeout() + time.Second - 1) / time.Second))
}

// nmstateCommands are the live apply of an nmstate config: apply with a
// checkpoint, then commit.
func nmstateCommands(nmstatectl, timeout string, digested []byte) []host.Command {
	return []host.Command{
		{Name: nmstatectl, Args: []string{"apply", "--no-commit", "--timeout", timeout, "-"}, Stdin: digested},
		{Name: nmstatectl, Args: []string{"commit"}},
	}
}

// keyfileCommands are what a live keyfile apply runs, as printed by a dry
// run. Profiles are activated by UUID, looked up by the keyfile's path: an
// id may also name a profile NetworkManager made itself for an interface
// that already had an address (then `up id` would activate that one).
func (a *Applier) keyfileCommands(nmcli string, kfs []Keyfile) []host.Command {
	cmds := []host.Command{activeCommand(nmcli), reloadCommand(nmcli), profilesCommand(nmcli)}
	uuidOf := func(kf Keyfile) string { return "<UUID of " + path.Join(a.paths().KeyfileDir, kf.Name) + ">" }
	var down []host.Command
	for _, kf := range kfs {
		if autoconnects(kf.Content) {
			cmds = append(cmds, host.Command{Name: nmcli, Args: []string{"connection", "up", "uuid", uuidOf(kf)}})
		} else {
			down = append(down, host.Command{Name: nmcli, Args: []string{"device", "disconnect", "<device of " + path.Join(a.paths().KeyfileDir, kf.Name) + ", when up>"}})
		}
	}
	// As the next boot will have it: the device of an autoconnect=false
	// profile is disconnected when it is up (docs/apply.md, "The rollback
	// check tests the next boot").
	cmds = append(cmds, profilesCommand(nmcli))
	cmds = append(cmds, down...)
	return append(cmds, activeCommand(nmcli))
}

// Print writes the plan for a human: digested config, keyfiles, yip file
// and commands, each headed by where it would go.
func (p *Plan) Print(w io.Writer) {
	fmt.Fprintf(w, "# configurator: %s\n# digest: %s\n", p.Configurator, p.Digest())
	if note := p.GeneratorNote(); note != "" {
		fmt.Fprintf(w, "# %s\n", note)
	}
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
	section("digested config: "+p.digestedPath()+" (0600)", p.Digested)
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
