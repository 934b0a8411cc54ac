package apply

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/nodereg/nodereg/internal/safefile"
)

// KeyfileGenerator turns a digested config into NetworkManager keyfiles
// without side effects, and says which commands it ran to do so (a dry run
// prints them). It is the seam where nmstate's keyfiles are produced:
// NmstatectlGC today, a translator in Go can take its place.
type KeyfileGenerator interface {
	Generate(ctx context.Context, digested []byte) ([]Keyfile, []Command, error)
}

// NmstatectlGC generates keyfiles with `nmstatectl gc -` (offline, touches
// nothing).
type NmstatectlGC struct {
	Path string // the nmstatectl executable
	Run  RunFunc
}

// Generate implements KeyfileGenerator.
func (g NmstatectlGC) Generate(ctx context.Context, digested []byte) ([]Keyfile, []Command, error) {
	gc := Command{Name: g.Path, Args: []string{"gc", "-"}, Stdin: digested, ReadOnly: true}
	out, err := g.Run(ctx, gc)
	if err != nil {
		return nil, []Command{gc}, fmt.Errorf("generating keyfiles: %w", err)
	}
	kfs, err := parseGC(out)
	return kfs, []Command{gc}, err
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
	run  RunFunc
}

func (g nmcGenerator) Generate(ctx context.Context, digested []byte) ([]Keyfile, []Command, error) {
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
	// ReadOnly for the host: it writes only into the private directory.
	gen := Command{Name: g.path, Args: []string{"generate", "--config-dir", in, "--output-dir", out}, ReadOnly: true}
	if _, err := g.run(ctx, gen); err != nil {
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
		b, err := safefile.ReadFile(p, maxOwnedFile)
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
