package bootstrap

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path"

	"github.com/nodereg/nodereg/apply"
	"github.com/nodereg/nodereg/internal/host"
)

// PrintUp is a dry run's Up: whether the network would come up, the profile
// this machine would use and the address it would try first; nothing
// probed or written.
func PrintUp(ctx context.Context, w io.Writer, c *Config, env Env) error {
	owned, err := RuntimeKeyfiles.Owned(env.Files)
	if err != nil {
		return err
	}
	d := Decide(true, env.AppliedDigest, env.applicatorOnDisk(), func() error { return env.unreachable(ctx) })
	switch {
	case len(owned) > 0:
		fmt.Fprintf(w, "# bootstrap network: %d keyfile(s) of a previous run present; this run would use them\n", len(owned))
	case d.Needed:
		fmt.Fprintf(w, "# bootstrap network: would be brought up (%s)\n", d.Reason)
	default:
		fmt.Fprintf(w, "# bootstrap network: not needed (%s); if it were:\n", d.Reason)
	}
	return PrintPlan(ctx, w, env.Files, c, env.Applier)
}

// PrintPlan prints Preview's plan and the keyfiles it renders to, with
// where they go and how they are activated.
func PrintPlan(ctx context.Context, w io.Writer, files host.FS, c *Config, a *apply.Applier) error {
	return PrintPlanNoting(ctx, w, files, "", c, a)
}

// PrintPlanNoting is PrintPlan that first says, when note is not "", the
// facts it read and where (agent render --bootstrap -f --root DIR).
func PrintPlanNoting(ctx context.Context, w io.Writer, files host.FS, note string, c *Config, a *apply.Applier) error {
	facts, err := ReadFacts(files)
	if err != nil {
		return err
	}
	if note != "" {
		fmt.Fprintf(w, "# machine: %s (%s)\n", facts, note)
	}
	return explain(files, PrintPlanFor(ctx, w, facts, c, a))
}

// PrintPlanFor is PrintPlan for a machine described by its facts rather
// than read (agent render --bootstrap -f with --set mac=...): no machine,
// no /sys, nothing on this host read but the keyfile generator.
func PrintPlanFor(ctx context.Context, w io.Writer, facts Facts, c *Config, a *apply.Applier) error {
	plan, err := Preview(c, facts)
	if err != nil {
		return err
	}
	if err := plan.Print(w); err != nil {
		return err
	}
	rendered, err := apply.Render(plan.Network)
	if err != nil {
		return err
	}
	p, err := a.PlanKeyfiles(ctx, rendered)
	var tm *host.ToolMissingError
	if errors.As(err, &tm) {
		fmt.Fprintf(w, "# bootstrap keyfiles not shown: %v\n", err)
		return nil
	}
	if err != nil {
		return err
	}
	if gen := generatorWords[p.Generator]; gen != "" {
		fmt.Fprintf(w, "# bootstrap keyfiles by %s\n", gen)
	}
	kfs := bootstrapUUIDs(p.Keyfiles)
	for _, kf := range kfs {
		fmt.Fprintf(w, "# ---- bootstrap keyfile: %s (%04o, gone at reboot)\n%s", path.Join(plan.Keyfiles.Dir, plan.Keyfiles.Prefix+kf.Name), plan.Keyfiles.Mode, kf.Content)
		if len(kf.Content) > 0 && kf.Content[len(kf.Content)-1] != '\n' {
			fmt.Fprintln(w)
		}
	}
	fmt.Fprintln(w, "# ---- bootstrap commands")
	fmt.Fprintln(w, "nmcli connection reload")
	for _, kf := range kfs {
		fmt.Fprintf(w, "nmcli connection up uuid '<UUID of %s>'\n", path.Join(plan.Keyfiles.Dir, plan.Keyfiles.Prefix+kf.Name))
	}
	return nil
}

// generatorWords name apply's keyfile generators for the bootstrap
// printout (apply.Plan.GeneratorNote's words also say how an IPAM config
// goes live, which is not how the bootstrap keyfiles do).
var generatorWords = map[string]string{
	apply.GeneratorBuiltin:    "the built-in nmstate translator",
	apply.GeneratorNmstatectl: "nmstatectl gc",
	apply.GeneratorNmc:        "nmc generate",
}
