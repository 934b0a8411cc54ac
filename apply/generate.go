package apply

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strings"

	"github.com/sirupsen/logrus"
	"gopkg.in/yaml.v3"

	"github.com/nodereg/nodereg/internal/host"
	"github.com/nodereg/nodereg/nmstate"
)

// KeyfileGenerator turns a digested config into NetworkManager keyfiles
// without side effects, and says which commands it ran to do so (a dry run
// prints them). nmstate's keyfiles come from NmstatectlGC or
// BuiltinNmstate, as Applier.Nmstate chooses.
type KeyfileGenerator interface {
	Generate(ctx context.Context, digested []byte) ([]Keyfile, []host.Command, error)
}

// BuiltinNmstate generates nmstate's keyfiles with package nmstate, the
// translator in Go that writes what `nmstatectl gc` of nmstate.MatchedVersion
// writes; it runs no command. A refusal is a *FieldError naming the key
// (config.<path>) that unwraps to the *nmstate.Error, so
// errors.Is(err, nmstate.ErrUnsupported) tells "outside the subset" from
// "nmstate refuses it too".
type BuiltinNmstate struct{}

// Generate implements KeyfileGenerator.
func (BuiltinNmstate) Generate(_ context.Context, digested []byte) ([]Keyfile, []host.Command, error) {
	out, err := nmstate.GenerateKeyfiles(digested)
	var ne *nmstate.Error
	if errors.As(err, &ne) {
		fe := &FieldError{Path: "config", Reason: ne.Kind + ": " + ne.Reason, Err: err}
		if ne.Path != "" {
			fe.Path += "." + ne.Path
		}
		if errors.Is(err, nmstate.ErrUnsupported) {
			fe.Reason += " (outside the built-in nmstate translator's subset, docs/nmstate.md; nmstatectl gc may take it: install nmstatectl, --nmstate=nmstatectl)"
		}
		return nil, nil, fmt.Errorf("built-in nmstate translator: %w", fe)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("built-in nmstate translator: %w", err)
	}
	// The same checks as gc's output: the translator is ours, but what
	// reaches the keyfile directory passes one gate whoever wrote it.
	kfs := make([]Keyfile, 0, len(out))
	seen := map[string]bool{}
	for i, kf := range out {
		path := fmt.Sprintf("built-in nmstate translator output [%d]", i)
		if err := checkFileName(path, kf.Name); err != nil {
			return nil, nil, err
		}
		if seen[kf.Name] {
			return nil, nil, &FieldError{Path: path, Reason: "duplicate keyfile " + kf.Name}
		}
		seen[kf.Name] = true
		if err := ParseKeyfile(path, kf.Content); err != nil {
			return nil, nil, err
		}
		kfs = append(kfs, Keyfile{Name: kf.Name, Content: kf.Content})
	}
	return kfs, nil, nil
}

// NmstateChoice picks what turns an nmstate config into keyfiles, and with
// it the way of the live apply.
type NmstateChoice string

// NmstateChoice values. Auto is nmstatectl when the tool is found, else the
// built-in translator; the empty choice is Auto.
const (
	NmstateAuto       NmstateChoice = "auto"
	NmstateBuiltin    NmstateChoice = "builtin"
	NmstateNmstatectl NmstateChoice = "nmstatectl"
)

// NmstateChoices are the valid values, for flags and the config file.
var NmstateChoices = []NmstateChoice{NmstateAuto, NmstateBuiltin, NmstateNmstatectl}

// ParseNmstateChoice accepts one of NmstateChoices ("" is auto).
func ParseNmstateChoice(s string) (NmstateChoice, error) {
	if s == "" {
		return NmstateAuto, nil
	}
	if c := NmstateChoice(s); slices.Contains(NmstateChoices, c) {
		return c, nil
	}
	return "", fmt.Errorf("%q is not auto, builtin or nmstatectl", s)
}

// Generators: what produced a plan's keyfiles (Plan.Generator).
const (
	GeneratorNone       = ""           // none, or keyfiles given by the config (nmconnections)
	GeneratorNmstatectl = "nmstatectl" // nmstatectl gc
	GeneratorBuiltin    = "builtin"    // package nmstate
	GeneratorNmc        = "nmc"        // nmc generate
)

// NmstatectlGC generates keyfiles with `nmstatectl gc -` (offline, touches
// nothing).
type NmstatectlGC struct {
	Path string // the nmstatectl executable
	Run  host.RunFunc
	Log  *logrus.Entry // nmstatectl's log lines, at debug; nil: discarded
}

// Generate implements KeyfileGenerator.
func (g NmstatectlGC) Generate(ctx context.Context, digested []byte) ([]Keyfile, []host.Command, error) {
	gc := host.Command{Name: g.Path, Args: []string{"gc", "-"}, Stdin: digested, ReadOnly: true}
	out, err := runNmstatectl(ctx, g.Run, g.Log, gc)
	if err != nil {
		return nil, []host.Command{gc}, fmt.Errorf("generating keyfiles: %w", err)
	}
	kfs, err := parseGC(out)
	return kfs, []host.Command{gc}, err
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

// nmcGenerator runs nm-configurator on the digested state in a private temp
// directory and collects the keyfiles it generates.
type nmcGenerator struct {
	path string
	run  host.RunFunc
}

func (g nmcGenerator) Generate(ctx context.Context, digested []byte) ([]Keyfile, []host.Command, error) {
	tmp, remove, err := host.TempDir("nodereg-nmc-")
	if err != nil {
		return nil, nil, err
	}
	defer remove()
	const in, out = "/desired-states", "/network-config"
	if err := tmp.MkdirAll(in, 0o700); err != nil {
		return nil, nil, err
	}
	if err := tmp.WriteFile(path.Join(in, "_all.yaml"), digested, 0o600); err != nil {
		return nil, nil, err
	}
	// ReadOnly for the host: it writes only into the private directory.
	gen := host.Command{Name: g.path, Args: []string{"generate", "--config-dir", tmp.Path(in), "--output-dir", tmp.Path(out)}, ReadOnly: true}
	if _, err := g.run(ctx, gen); err != nil {
		return nil, []host.Command{gen}, fmt.Errorf("generating keyfiles: %w", err)
	}
	var kfs []Keyfile
	seen := map[string]bool{}
	err = host.Walk(tmp, out, func(p string, d fs.DirEntry) error {
		if d.IsDir() || !strings.HasSuffix(d.Name(), keyfileSuffix) {
			return nil
		}
		name := d.Name()
		if err := checkFileName("nmc output "+name, name); err != nil {
			return err
		}
		if seen[name] {
			return fmt.Errorf("nmc generated %s twice", name)
		}
		seen[name] = true
		b, err := tmp.ReadFile(p, maxOwnedFile)
		if err != nil {
			return err
		}
		if err := ParseKeyfile("nmc output "+name, b); err != nil {
			return err
		}
		kfs = append(kfs, Keyfile{Name: name, Content: b})
		return nil
	})
	return kfs, []host.Command{gen}, err
}
