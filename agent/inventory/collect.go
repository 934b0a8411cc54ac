package inventory

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/netip"
	"runtime/debug"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/jaypipes/ghw"
	"github.com/jaypipes/ghw/pkg/baseboard"
	"github.com/jaypipes/ghw/pkg/bios"
	"github.com/jaypipes/ghw/pkg/block"
	"github.com/jaypipes/ghw/pkg/chassis"
	"github.com/jaypipes/ghw/pkg/cpu"
	"github.com/jaypipes/ghw/pkg/gpu"
	"github.com/jaypipes/ghw/pkg/memory"
	"github.com/jaypipes/ghw/pkg/net"
	"github.com/jaypipes/ghw/pkg/product"
	"github.com/jaypipes/ghw/pkg/topology"
	"github.com/sirupsen/logrus"

	"github.com/nodereg/nodereg/internal/host"
	"github.com/nodereg/nodereg/internal/logx"
)

// DefaultDeadline bounds a whole collection when Options.Deadline is zero.
const DefaultDeadline = 10 * time.Second

// Family names, as they appear in Inventory.Degraded and in the logs. The
// ghw ones are the top-level keys of the MsgSystemDataV2 map.
const (
	FamilySMBIOS    = "SMBIOS"
	FamilyProduct   = "Product"
	FamilyBIOS      = "BIOS"
	FamilyBaseBoard = "BaseBoard"
	FamilyChassis   = "Chassis"
	FamilyMemory    = "Memory"
	FamilyCPU       = "CPU"
	FamilyGPU       = "GPU"
	FamilyNetwork   = "Network"
	FamilyStorage   = "Storage"
	FamilyRuntime   = "Runtime"
	FamilyTopology  = "Topology" // legacy MsgSystemData only, read when it is asked for
)

// Options configures Collect.
type Options struct {
	Files    host.FS       // the machine (required): the run's, a temp dir in tests
	NoSMBIOS bool          // skip the SMBIOS map entirely
	Deadline time.Duration // whole collection; 0 means DefaultDeadline
	Log      *logrus.Entry

	// Dmidecode is the tool table's entry (host.Tools.Dmidecode): a name
	// looked up in PATH or a path. "" or the default name "dmidecode"
	// runs on the live system only (it reads the running machine, not a
	// root prefix), and not where it cannot work: no DMI table and no
	// /dev/mem. Without it, or when it fails, the DMI tables under /sys
	// are decoded instead. NoDmidecode never runs it
	// (NODEREG_DMIDECODE set and empty).
	Dmidecode   string
	NoDmidecode bool
	// Runner runs dmidecode (nil: host.ExecRunner).
	Runner host.Runner

	// InterfaceAddrs returns the addresses of a network interface, in the
	// order the kernel lists them. nil means: the live interfaces when Files
	// is "/", none otherwise (a fake tree has no live interfaces).
	InterfaceAddrs func(name string) ([]netip.Addr, error)
}

// Inventory is what a node sends about its hardware.
type Inventory struct {
	SMBIOS       map[string]any // MsgSmbios payload (docs/protocol.md §5.1 shape)
	SystemDataV2 map[string]any // MsgSystemDataV2 label map (§5.2), with the "System Data" legacy tree
	Degraded     []string       // families that failed, each logged once

	legacy func() (json.RawMessage, error)
}

// LegacySystemData is MsgSystemData (docs/protocol.md §5.3), for servers
// negotiating 6..10: ghw's data as JSON, encoded the first time it is
// asked for. A current server never asks, and the encoding (reflection
// over ghw's types, cold in a new process) was a twentieth of a PLAIN dry
// run's CPU. Nil for an inventory without ghw data.
func (inv *Inventory) LegacySystemData() (json.RawMessage, error) {
	if inv.legacy == nil {
		return nil, nil
	}
	return inv.legacy()
}

// ghwHost holds what the ghw modules returned; a nil field is a failed module.
type ghwHost struct {
	Memory    *memory.Info    `json:"memory"`
	Block     *block.Info     `json:"block"`
	CPU       *cpu.Info       `json:"cpu"`
	Topology  *topology.Info  `json:"topology"`
	Network   *net.Info       `json:"network"`
	GPU       *gpu.Info       `json:"gpu"`
	Chassis   *chassis.Info   `json:"chassis"`
	BIOS      *bios.Info      `json:"bios"`
	Baseboard *baseboard.Info `json:"baseboard"`
	Product   *product.Info   `json:"product"`
	Runtime   *runtimeInfo    `json:"runtime"`

	addrs map[string][]netip.Addr
}

type runtimeInfo struct {
	Hostname string `json:"hostname"`
}

type result struct {
	family string
	apply  func(*ghwHost, *Inventory)
	err    error
}

// Collect gathers SMBIOS and ghw data concurrently under o.Deadline. A module
// that fails or does not finish in time is named in Degraded and logged once;
// the rest is returned. The error is non-nil only when the options are
// unusable.
func Collect(ctx context.Context, o Options) (*Inventory, error) {
	log := logx.OrDiscard(o.Log)
	if o.Files == nil {
		return nil, errors.New("inventory: no host.FS given: the caller hands the machine's")
	}
	// One pass over the machine: every family reads sysfs, procfs and
	// the udev database through this snapshot, each file once per run
	// however many families or fields want it.
	files := host.NewSnapshot(o.Files)
	// ghw reads below a directory of its own (its chroot): the one place
	// the edge's root is needed as a path.
	root := files.Path("/")
	if fi, err := files.Stat("/"); err != nil || !fi.IsDir() {
		if err == nil {
			err = errors.New("not a directory")
		}
		return nil, fmt.Errorf("inventory: root %q: %w", root, err)
	}
	deadline := o.Deadline
	if deadline <= 0 {
		deadline = DefaultDeadline
	}
	ctx, cancel := context.WithTimeout(ctx, deadline)
	defer cancel()
	start := time.Now()
	gate := &logGate{}
	defer gate.close()

	ghwOpts := ghwOptions(files, log, gate)
	jobs := ghwJobs(files, ghwOpts, o.InterfaceAddrs, log)
	if !o.NoSMBIOS {
		jobs[FamilySMBIOS] = func() (func(*ghwHost, *Inventory), error) {
			m, err := collectSMBIOS(ctx, files, o, log)
			return func(_ *ghwHost, inv *Inventory) { inv.SMBIOS = m }, err
		}
	}
	h, inv := gather(ctx, jobs, deadline, log)
	if inv.SMBIOS == nil && !o.NoSMBIOS {
		// Still sendable: the server merges whatever keys there are.
		inv.SMBIOS = map[string]any{}
	}

	inv.SystemDataV2 = systemDataV2(h)
	inv.legacy = sync.OnceValues(func() (json.RawMessage, error) {
		// Only the legacy tree has the topology: read when an old
		// server asks for it, not on every run.
		h.Topology = legacyTopology(ghwOpts, deadline, log)
		b, err := legacySystemData(h)
		if err != nil {
			return nil, fmt.Errorf("inventory: encoding legacy system data: %w", err)
		}
		return b, nil
	})
	log.WithField("duration", time.Since(start).Round(time.Microsecond)).
		Debugf("inventory: collected (%d families left out)", len(inv.Degraded))
	return inv, nil
}

// job is one family's collection: it returns what to store, or an error.
type job func() (func(*ghwHost, *Inventory), error)

// ghwOptions are the options of the families still read by ghw itself
// (CPU, the legacy topology, and the DMI identity where the kernel
// exports no DMI).
func ghwOptions(files host.FS, log *logrus.Entry, gate *logGate) []any {
	return []any{
		// ghw reads below a directory of its own (its chroot): the one
		// place the edge's root is needed as a path.
		ghw.WithChroot(files.Path("/")),
		// ethtool per NIC is slow and its output differs between versions;
		// speed and duplex then come from sysfs.
		ghw.WithDisableTools(),
		ghw.WithDisableTopology(),
		ghw.WithLogger(slog.New(logrusHandler{log, gate})),
	}
}

// legacyTopology is ghw's NUMA topology, bounded by the collection's
// deadline; nil (the legacy tree's "topology": null) when it fails.
func legacyTopology(ghwOpts []any, deadline time.Duration, log *logrus.Entry) *topology.Info {
	type answer struct {
		i   *topology.Info
		err error
	}
	done := make(chan answer, 1)
	go func() {
		defer func() {
			if p := recover(); p != nil {
				done <- answer{err: fmt.Errorf("panic: %v", p)}
			}
		}()
		i, err := topology.New(ghwOpts...)
		done <- answer{i, err}
	}()
	select {
	case a := <-done:
		if a.err != nil {
			log.WithField("family", FamilyTopology).Warnf("inventory: %s left out: %v", FamilyTopology, a.err)
		}
		return a.i
	case <-time.After(deadline):
		log.WithField("family", FamilyTopology).Warnf("inventory: %s left out: not finished before the %s deadline", FamilyTopology, deadline)
		return nil
	}
}

// ghwJobs is the table of the families, each read from files (a
// snapshot) or by ghw with ghwOpts; addrs (nil: the live interfaces' on
// the live system) gives the NICs' addresses.
func ghwJobs(files host.FS, ghwOpts []any, addrs func(string) ([]netip.Addr, error), log *logrus.Entry) map[string]job {
	if addrs == nil && host.Live(files) {
		addrs = liveInterfaceAddrs
	}
	tree := func(p, what string) error { return readableTree(files, p, what) }
	return map[string]job{
		FamilyProduct: func() (func(*ghwHost, *Inventory), error) {
			i, err := collectProduct(files, ghwOpts)
			return func(h *ghwHost, _ *Inventory) { h.Product = i }, err
		},
		FamilyBIOS: func() (func(*ghwHost, *Inventory), error) {
			i, err := collectBIOS(files, ghwOpts)
			return func(h *ghwHost, _ *Inventory) { h.BIOS = i }, err
		},
		FamilyBaseBoard: func() (func(*ghwHost, *Inventory), error) {
			i, err := collectBaseboard(files, ghwOpts)
			return func(h *ghwHost, _ *Inventory) { h.Baseboard = i }, err
		},
		FamilyChassis: func() (func(*ghwHost, *Inventory), error) {
			i, err := collectChassis(files, ghwOpts)
			return func(h *ghwHost, _ *Inventory) { h.Chassis = i }, err
		},
		FamilyMemory: func() (func(*ghwHost, *Inventory), error) {
			i, err := collectMemory(files)
			return func(h *ghwHost, _ *Inventory) { h.Memory = i }, err
		},
		FamilyCPU: func() (func(*ghwHost, *Inventory), error) {
			if err := tree(host.SysCPU, "CPU"); err != nil {
				return nil, err
			}
			i, err := cpu.New(ghwOpts...)
			if err == nil && len(i.Processors) == 0 {
				err = errors.New("no processor found")
			}
			return func(h *ghwHost, _ *Inventory) { h.CPU = i }, err
		},
		FamilyStorage: func() (func(*ghwHost, *Inventory), error) {
			if err := tree(host.SysBlock, "block"); err != nil {
				return nil, err
			}
			i := collectBlock(files, log)
			return func(h *ghwHost, _ *Inventory) { h.Block = i }, nil
		},
		FamilyNetwork: func() (func(*ghwHost, *Inventory), error) {
			if err := tree(host.SysClassNet, "network"); err != nil {
				return nil, err
			}
			return collectNetwork(files, addrs)
		},
		FamilyGPU: func() (func(*ghwHost, *Inventory), error) {
			i, err := collectGPU(files, log)
			return func(h *ghwHost, _ *Inventory) { h.GPU = i }, err
		},
		FamilyRuntime: func() (func(*ghwHost, *Inventory), error) {
			name, err := hostname(files)
			return func(h *ghwHost, _ *Inventory) { h.Runtime = &runtimeInfo{Hostname: name} }, err
		},
	}
}

// readableTree refuses a family whose sysfs tree cannot be read: ghw
// reports an unreadable /sys/block as "no disks", and a broken tree must
// not pass for a diskless machine.
func readableTree(files host.FS, p, what string) error {
	if _, err := files.ReadDir(p); err != nil {
		return fmt.Errorf("reading the %s tree: %w", what, err)
	}
	return nil
}

// collectNetwork is ghw's NICs and, through addrs, their addresses.
func collectNetwork(files host.FS, addrs func(string) ([]netip.Addr, error)) (func(*ghwHost, *Inventory), error) {
	i := collectNICs(files)
	m := map[string][]netip.Addr{}
	if addrs != nil {
		for _, nic := range i.NICs {
			// An interface that vanished since the sysfs walk just has
			// no address.
			if a, err := addrs(nic.Name); err == nil {
				m[nic.Name] = a
			}
		}
	}
	return func(h *ghwHost, _ *Inventory) { h.Network, h.addrs = i, m }, nil
}

// gather runs the jobs concurrently and keeps what finished before ctx
// ends; the families that failed or did not finish are named in Degraded,
// each logged once.
func gather(ctx context.Context, jobs map[string]job, deadline time.Duration, log *logrus.Entry) (*ghwHost, *Inventory) {
	// Buffered so that a module still running at the deadline can finish
	// and exit without anyone listening.
	results := make(chan result, len(jobs))
	for family, job := range jobs {
		go func() {
			defer func() {
				if p := recover(); p != nil {
					results <- result{family: family, err: fmt.Errorf("panic: %v\n%s", p, debug.Stack())}
				}
			}()
			apply, err := job()
			results <- result{family: family, apply: apply, err: err}
		}()
	}

	h := &ghwHost{}
	inv := &Inventory{}
	pending := map[string]bool{}
	for f := range jobs {
		pending[f] = true
	}
	failed := map[string]error{}
	for len(pending) > 0 {
		select {
		case r := <-results:
			delete(pending, r.family)
			if r.err != nil {
				failed[r.family] = r.err
				continue
			}
			r.apply(h, inv)
		case <-ctx.Done():
			for f := range pending {
				failed[f] = fmt.Errorf("not finished before the %s deadline", deadline)
			}
			pending = nil
		}
	}
	if stoppedEarly(ctx) {
		// The caller stopped the collection (its run ended, say a phase
		// failed in 35 ms): the inventory will not be sent, and neither a
		// deadline nor a family's failure is news. One debug line, so
		// nothing is logged after the run's final line.
		log.WithField("families", len(failed)).Debug("inventory: stopped before it finished: not sent")
		inv.Degraded = slices.Sorted(maps.Keys(failed))
		return h, inv
	}
	for f, err := range failed {
		inv.Degraded = append(inv.Degraded, f)
		log.WithField("family", f).Warnf("inventory: %s left out: %v", f, err)
	}
	sort.Strings(inv.Degraded)
	return h, inv
}

// stoppedEarly: ctx ended by a cancellation, not by a deadline (ours, or
// the caller's, which is a deadline all the same).
func stoppedEarly(ctx context.Context) bool {
	return ctx.Err() != nil && !errors.Is(ctx.Err(), context.DeadlineExceeded)
}

// Stopped reports whether Collect ended because ctx was cancelled: its
// inventory is partial and nothing about it was logged above debug.
func Stopped(ctx context.Context) bool { return stoppedEarly(ctx) }

// collectSMBIOS prefers dmidecode, whose text is what upstream sends; without
// it (or when it fails) the DMI tables exported by the kernel are decoded
// here (Options.Dmidecode says when it is run).
func collectSMBIOS(ctx context.Context, files host.FS, o Options, log *logrus.Entry) (map[string]any, error) {
	var dmiErr error
	run, named, why := dmidecodeRuns(files, o)
	if why != "" {
		log.Debugf("inventory: dmidecode not run: %s", why)
	}
	if run {
		out, err := runDmidecode(ctx, o.Runner, o.Dmidecode)
		if err == nil {
			return ParseDmidecode(out)
		}
		var missing *host.ToolMissingError
		if named || !errors.As(err, &missing) {
			dmiErr = err
			log.Debugf("inventory: dmidecode failed, decoding the DMI tables under /sys: %v", err)
		}
	}
	m, err := sysfsSMBIOS(files)
	if err != nil && dmiErr != nil {
		return nil, fmt.Errorf("%w; %w", dmiErr, err)
	}
	return m, err
}

// dmidecodeRuns says whether dmidecode is run, whether the tool table
// named one of its own (a path or another name: run wherever the root is,
// as it was asked for), and why not when it is not. The default name runs
// on the live system only, and only where it can read something: it reads
// the kernel's DMI table, else /dev/mem, and with neither (a container, a
// machine without SMBIOS) it would fail on every run.
func dmidecodeRuns(files host.FS, o Options) (run, named bool, why string) {
	named = o.Dmidecode != "" && o.Dmidecode != host.DefaultTools().Dmidecode
	switch {
	case o.NoDmidecode:
		return false, named, "turned off (NODEREG_DMIDECODE is set and empty)"
	case named:
		return true, true, ""
	case !host.Live(files):
		return false, false, "" // it would read the running machine, not the root
	}
	for _, p := range []string{host.DMITable, host.DevMem} {
		if _, err := files.Stat(p); err == nil {
			return true, false, ""
		}
	}
	return false, false, fmt.Sprintf("neither %s nor %s exists", host.DMITable, host.DevMem)
}

func hostname(files host.FS) (string, error) {
	var errs []error
	for _, p := range []string{host.HostnameProc, host.HostnameFile} {
		b, err := files.ReadFile(p, host.MaxAttr)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if s := strings.TrimSpace(string(b)); s != "" {
			return s, nil
		}
	}
	return "", fmt.Errorf("reading the hostname: %w", errors.Join(errs...))
}

func liveInterfaceAddrs(name string) ([]netip.Addr, error) {
	return interfaceAddrs(name)
}
