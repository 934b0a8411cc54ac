// Package verify is `agent verify`: read-only checks that the node is what
// its last run left (registered, its network config persisted and live,
// the server reachable, no bootstrap network left up), each a named finding
// with its own bit of the exit status (docs/verify.md). It writes nothing
// and talks to the server only as far as a TLS handshake.
package verify

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"slices"
	"strings"
	"time"

	"github.com/nodereg/nodereg/internal/host"
	"github.com/nodereg/nodereg/internal/nic"
	"github.com/nodereg/nodereg/internal/state"
)

// Names of the findings, in the order of their bits (and of the report).
const (
	Registered = "registered"
	Applicator = "applicator"
	Addresses  = "addresses"
	Profiles   = "profiles"
	Server     = "server"
	Bootstrap  = "bootstrap"
)

// Bits are the exit-status bits of the findings (docs/verify.md): a failed
// finding sets its bit, so the status says which ones failed. Every
// combination stays below 64, the first code of agent/exitcode's table.
var Bits = map[string]int{
	Registered: 1, Applicator: 2, Addresses: 4, Profiles: 8, Server: 16, Bootstrap: 32,
}

// Status is a finding's outcome.
type Status string

// Statuses. NotChecked is never a failure and always says why.
const (
	OK         Status = "ok"
	Failed     Status = "failed"
	NotChecked Status = "not checked"
)

// notCheckedPrefix leads the detail of every NotChecked finding.
const notCheckedPrefix = string(NotChecked) + ": "

// Finding is one check's result; Detail says what was found.
type Finding struct {
	Name   string `json:"name"`
	Status Status `json:"status"`
	Detail string `json:"detail"`
	Bit    int    `json:"bit"`
}

// Report is every finding and the exit status they make.
type Report struct {
	Findings []Finding `json:"findings"`
	Exit     int       `json:"exit"`
	// ForeignActive: a profile that is not ours is active on an
	// interface of the applied config; drift repair leaves it alone.
	ForeignActive bool `json:"-"`
}

// Failed lists the names of the failed findings.
func (r *Report) Failed() []string {
	var out []string
	for _, f := range r.Findings {
		if f.Status == Failed {
			out = append(out, f.Name)
		}
	}
	return out
}

// Find returns the finding called name (zero if none).
func (r *Report) Find(name string) Finding {
	for _, f := range r.Findings {
		if f.Name == name {
			return f
		}
	}
	return Finding{}
}

func (r *Report) add(name string, st Status, format string, a ...any) {
	f := Finding{Name: name, Status: st, Detail: fmt.Sprintf(format, a...), Bit: Bits[name]}
	// A finding that could not be made leads with why: "not checked:
	// nmcli not found", said once (Write prints it in the status column).
	if st == NotChecked && !strings.HasPrefix(f.Detail, notCheckedPrefix) {
		f.Detail = notCheckedPrefix + f.Detail
	}
	r.Findings = append(r.Findings, f)
	if st == Failed {
		r.Exit |= f.Bit
	}
}

// Input is what the checks read. Files and Runner are the host edge
// (internal/host); a scratch root is a temp dir.
type Input struct {
	Files  host.FS
	Runner host.Runner
	// Nmcli is the tool table's nmcli (name or path).
	Nmcli string
	// State is the state file as read (state.Inspect); nil when it could
	// not be, and StateProblem says why.
	State        *state.State
	StateProblem string
	// BootstrapKeyfiles are where a bootstrap network's runtime keyfiles
	// are (bootstrap.RuntimeKeyfiles), for the bootstrap finding.
	BootstrapKeyfiles BootstrapKeyfiles
	// ServerURL and CA are the registration URL and its CA (PEM text, as
	// localconfig.CA reads it); ConfigProblem
	// says why the config could not be read.
	ServerURL, CA, ConfigProblem string
	// Timeout bounds the server check (default DefaultTimeout).
	Timeout time.Duration
	// Links reads an interface's flags and addresses; nil: the kernel's,
	// over netlink (nic.ByName).
	Links func(name string) (Link, error)

	// ByMAC is the kernel's name of the device with a MAC address; nil:
	// the kernel's interface table (nic.Interfaces).
	ByMAC func(mac string) (string, error)

	// addresses are the state file's, decoded once by Run; devices the
	// kernel's names of their interfaces (deviceNames).
	addresses map[string][]string
	devices   map[string]string
}

// device is the kernel's name of the state file's interface name.
func (in Input) device(name string) string {
	if d, ok := in.devices[name]; ok {
		return d
	}
	return name
}

// BootstrapKeyfiles recognise a bootstrap network's runtime keyfiles: the
// file name prefix, and the list of those present in files, as paths on
// its machine.
type BootstrapKeyfiles struct {
	Prefix string
	Owned  func(files host.FS) ([]string, error)
}

// DefaultTimeout bounds the server check: TCP connect and TLS handshake.
const DefaultTimeout = 5 * time.Second

// Link is what the address finding needs of an interface.
type Link struct {
	Up, Running bool
	Addrs       []string // CIDR
}

// Run makes every check and returns the report. It never writes.
func Run(ctx context.Context, in Input) *Report {
	r := &Report{}
	if in.State == nil {
		in.State = &state.State{}
	}
	in.addresses = in.State.Addresses()
	in.devices = deviceNames(in)
	checkRegistered(r, in)
	checkApplicator(r, in.Files, in.State)
	checkAddresses(r, in)
	checkNM(ctx, r, in)
	checkServer(ctx, r, in)
	slices.SortStableFunc(r.Findings, func(a, b Finding) int { return a.Bit - b.Bit })
	return r
}

func checkRegistered(r *Report, in Input) {
	switch {
	case in.StateProblem != "":
		r.add(Registered, Failed, "%s", in.StateProblem)
	case !in.State.Registered():
		r.add(Registered, Failed, "the state file records no registration")
	default:
		r.add(Registered, OK, "registered")
	}
}

// Write prints the report as text (one line a finding) or json.
func (r *Report) Write(w io.Writer, format string) error {
	if format == "json" {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(r)
	}
	for _, f := range r.Findings {
		line := fmt.Sprintf("%-10s %-12s %s\n", f.Name, f.Status, f.Detail)
		if f.Status == NotChecked {
			line = fmt.Sprintf("%-10s %s\n", f.Name, f.Detail) // the detail says "not checked: why"
		}
		if _, err := io.WriteString(w, line); err != nil {
			return err
		}
	}
	verdict := "all checks passed"
	if r.Exit != 0 {
		verdict = "failed: " + strings.Join(r.Failed(), ", ")
	}
	_, err := fmt.Fprintf(w, "verify: %s (exit %d)\n", verdict, r.Exit)
	return err
}

// netlinkLink reads an interface through the standard library, which asks
// the kernel over rtnetlink (RTM_GETLINK, RTM_GETADDR) on Linux.
func netlinkLink(name string) (Link, error) {
	ifc, err := nic.ByName(name)
	if err != nil {
		return Link{}, err
	}
	addrs, err := ifc.Addrs()
	if err != nil {
		return Link{}, err
	}
	l := Link{Up: ifc.Flags&net.FlagUp != 0, Running: ifc.Flags&net.FlagRunning != 0}
	for _, a := range addrs {
		l.Addrs = append(l.Addrs, a.String())
	}
	return l, nil
}
