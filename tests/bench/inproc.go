package main

import (
	"context"
	"errors"
	"fmt"
	"github.com/nodereg/nodereg/internal/testutil/node"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/nodereg/nodereg/agent"
	"github.com/nodereg/nodereg/agent/inventory"
	"github.com/nodereg/nodereg/apply"
	"github.com/nodereg/nodereg/internal/host"
	"github.com/nodereg/nodereg/protocol"
	"github.com/nodereg/nodereg/tpm"
)

// runInProcess is one agent.Run on m, for what only the library reports
// (the TPM counts of the counting transport).
func runInProcess(m *machine) (*agent.Result, time.Duration, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	start := time.Now()
	res, err := agent.Run(ctx, agent.Options{
		Root:           m.root,
		Deadline:       20 * time.Second,
		NetworkTimeout: 20 * time.Second,
		Out:            io.Discard,
		Version:        "bench",
	})
	d := time.Since(start)
	if err != nil {
		return nil, d, fmt.Errorf("in-process agent run on %s: %w", m.root, err)
	}
	return res, d, nil
}

// tpmCounts registers a new machine (cold) and runs it again (warm).
type tpmCounts struct {
	cold, warm         tpm.Counts
	coldTime, warmTime time.Duration
}

func measureTPM(m *machine) (*tpmCounts, error) {
	cold, dc, err := runInProcess(m)
	if err != nil {
		return nil, fmt.Errorf("cold: %w", err)
	}
	warm, dw, err := runInProcess(m)
	if err != nil {
		return nil, fmt.Errorf("warm: %w", err)
	}
	if !warm.Updated {
		return nil, fmt.Errorf("warm run on %s was not an update: the state was not kept", m.root)
	}
	return &tpmCounts{cold: cold.TPM, warm: warm.TPM, coldTime: dc, warmTime: dw}, nil
}

// measureInventory collects the inventory of root n times.
func measureInventory(root string, n int) ([]time.Duration, []string, error) {
	var ds []time.Duration
	var degraded []string
	for range n {
		start := time.Now()
		inv, err := inventory.Collect(context.Background(), inventory.Options{Files: host.Root(root)})
		ds = append(ds, time.Since(start))
		if err != nil {
			return nil, nil, fmt.Errorf("inventory of %s: %w", root, err)
		}
		degraded = inv.Degraded
	}
	return ds, degraded, nil
}

// benchNetwork is the server's template (node.NmstateTemplate) with its
// address filled in, as the agent receives it.
var benchNetwork = strings.ReplaceAll(
	strings.ReplaceAll(node.NmstateTemplate, "\n    ", "\n"),
	"inventory-ip: pool-a", "inventory-ip: 10.88.0.2")

const benchKeyfile = `
configurator: nmconnections
ipAddresses:
  inventory-ip: 10.88.0.2
config:
  enp1s0: |
    [connection]
    id=enp1s0
    type=ethernet
    interface-name=enp1s0

    [ipv4]
    method=manual
    address1={inventory-ip}/24,192.168.122.1
    dns=192.168.122.1;

    [ipv6]
    method=disabled
`

// measureSeedKeyfiles times the seed template's keyfile generation alone,
// n times, with gen: the built-in translator, or nmstatectl gc (the
// stand-in: a process round trip and YAML decoding, as the agent does it).
func measureSeedKeyfiles(gen apply.KeyfileGenerator, n int) ([]time.Duration, error) {
	var nc protocol.NetworkConfig
	if err := yaml.Unmarshal([]byte(benchNetwork), &nc); err != nil {
		return nil, fmt.Errorf("seed keyfiles: decoding the network config: %w", err)
	}
	r, err := apply.Render(&nc)
	if err != nil {
		return nil, fmt.Errorf("seed keyfiles: render: %w", err)
	}
	var ds []time.Duration
	for range n {
		start := time.Now()
		kfs, _, err := gen.Generate(context.Background(), r.Digested)
		if err != nil {
			return nil, fmt.Errorf("seed keyfiles: %w", err)
		}
		ds = append(ds, time.Since(start))
		if len(kfs) != 1 {
			return nil, fmt.Errorf("seed keyfiles: %d keyfiles, want 1", len(kfs))
		}
	}
	return ds, nil
}

// measureRenderPersist renders the config, plans it (keyfiles by the
// generator nmstate chooses) and persists it under a scratch root, n times.
func measureRenderPersist(dir, doc string, nmstate apply.NmstateChoice, n int) ([]time.Duration, error) {
	var nc protocol.NetworkConfig
	if err := yaml.Unmarshal([]byte(doc), &nc); err != nil {
		return nil, fmt.Errorf("render+persist: decoding the network config: %w", err)
	}
	root, err := os.MkdirTemp(dir, "persist-")
	if err != nil {
		return nil, fmt.Errorf("render+persist: %w", err)
	}
	a := &apply.Applier{Files: host.Root(root), Tools: host.ToolsFromEnv(os.LookupEnv), Nmstate: nmstate}
	var ds []time.Duration
	for range n {
		start := time.Now()
		r, err := apply.Render(&nc)
		if err != nil {
			return nil, fmt.Errorf("render+persist: render: %w", err)
		}
		p, err := a.Plan(context.Background(), r)
		if err != nil {
			return nil, fmt.Errorf("render+persist: plan: %w", err)
		}
		if err := a.Persist(p); err != nil {
			return nil, fmt.Errorf("render+persist: persist: %w", err)
		}
		ds = append(ds, time.Since(start))
	}
	if _, err := os.Stat(host.Root(root).Path(host.Applicator)); err != nil {
		return nil, fmt.Errorf("render+persist: no applicator written: %w", err)
	}
	return ds, nil
}

// gpuRoot copies the q35 VM fixture of agent/inventory (it has a DRM card)
// to dir and puts this host's pci.ids in it, so the GPU name lookup reads a
// full-size database.
func gpuRoot(dir string) (string, error) {
	const fixture = "agent/inventory/testdata/vm1"
	root := filepath.Join(dir, "vm1")
	if out, err := exec.Command("cp", "-a", fixture, root).CombinedOutput(); err != nil {
		return "", fmt.Errorf("copying %s (run from the repository root): %w: %s", fixture, err, out)
	}
	for _, p := range []string{"/usr/share/hwdata/pci.ids", "/usr/share/misc/pci.ids"} {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		dst := host.Root(root).Path("usr/share/misc/pci.ids")
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return "", err
		}
		return root, os.WriteFile(dst, b, 0o644)
	}
	return "", errNoPCIIDs
}

var errNoPCIIDs = errors.New("no pci.ids on this host (apt-get install pci.ids)")
