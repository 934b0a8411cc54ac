package verify

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/nodereg/nodereg/internal/host"
	"github.com/nodereg/nodereg/internal/state"
	"github.com/nodereg/nodereg/protocol"
)

// maxFile bounds every file verify reads: applicator, keyfile.
const maxFile = 1 << 20

// readManifest reads apply's manifest; nil with no error when there is none.
func readManifest(files host.FS) (*state.Manifest, error) {
	return state.ReadManifest(files, state.ManifestPath(host.StateDir))
}

// checkApplicator: the manifest is the applied config's, and the
// applicator and digested config under /oem are the bytes it lists.
func checkApplicator(r *Report, files host.FS, st *state.State) {
	if st.NetworkError != "" {
		r.add(Applicator, Failed, "the last network config was not applied (%s, phase %s): %s", orUnknown(st.NetworkErrorKind), orUnknown(st.NetworkErrorPhase), st.NetworkError)
		return
	}
	if st.NetworkDigest == "" {
		r.add(Applicator, NotChecked, "not checked: the state file records no network config applied")
		return
	}
	m, err := readManifest(files)
	switch {
	case err != nil:
		r.add(Applicator, Failed, "network manifest unreadable: %v", err)
		return
	case m == nil:
		r.add(Applicator, Failed, "no network manifest under %s, the applied config %s is not persisted", host.StateDir, st.NetworkDigest)
		return
	case m.Digest != st.NetworkDigest:
		r.add(Applicator, Failed, "persisted config %s is not the applied one %s", m.Digest, st.NetworkDigest)
		return
	}
	for _, f := range m.Files {
		if f.Kind == state.KindKeyfile {
			continue // NetworkManager's own copy: the profiles finding
		}
		b, err := files.ReadFile(f.Path, maxFile)
		if err != nil {
			r.add(Applicator, Failed, "%s %s: %v", f.Kind, files.Path(f.Path), err)
			return
		}
		if sum := sha256.Sum256(b); hex.EncodeToString(sum[:]) != f.SHA256 {
			r.add(Applicator, Failed, "%s %s changed since it was written (digest %s)", f.Kind, files.Path(f.Path), st.NetworkDigest)
			return
		}
	}
	r.add(Applicator, OK, "%s present, digest %s", files.Path(host.Applicator), st.NetworkDigest)
}

// checkAddresses: every address of the applied config is on its interface,
// and the interface is up with a carrier.
func checkAddresses(r *Report, in Input) {
	if len(in.addresses) == 0 {
		r.add(Addresses, NotChecked, "not checked: the state file records no addresses")
		return
	}
	links := in.Links
	if links == nil {
		links = netlinkLink
	}
	var problems []string
	n := 0
	for _, name := range sortedKeys(in.addresses) {
		dev := in.device(name)
		label := name
		if dev != name {
			label = fmt.Sprintf("%s (device %s, by MAC)", name, dev)
		}
		l, err := links(dev)
		if err != nil {
			problems = append(problems, fmt.Sprintf("%s: %v", label, err))
			continue
		}
		if !l.Up {
			problems = append(problems, label+" is down")
		} else if !l.Running {
			problems = append(problems, label+" has no carrier")
		}
		for _, want := range in.addresses[name] {
			n++
			if !hasAddr(l.Addrs, want) {
				problems = append(problems, fmt.Sprintf("%s missing on %s", want, label))
			}
		}
	}
	if len(problems) > 0 {
		r.add(Addresses, Failed, "%s", strings.Join(problems, "; "))
		return
	}
	r.add(Addresses, OK, "%d addresses on %d interfaces, all up", n, len(in.addresses))
}

func hasAddr(have []string, want string) bool {
	w, err := netip.ParsePrefix(want)
	if err != nil {
		return false
	}
	for _, h := range have {
		if p, err := netip.ParsePrefix(h); err == nil && p.Addr().Unmap() == w.Addr().Unmap() && p.Bits() == w.Bits() {
			return true
		}
	}
	return false
}

// activeProfile is one line of `nmcli -t -f NAME,DEVICE,FILENAME
// connection show --active`.
type activeProfile struct{ Name, Device, File string }

// nmcliFields are the fields asked of nmcli, in this order.
const nmcliFields = "NAME,DEVICE,FILENAME"

// parseActive reads nmcli's terse output, where ':' in a value is "\:"
// and '\' is "\\".
func parseActive(out []byte) []activeProfile {
	var ps []activeProfile
	for _, line := range strings.Split(string(out), "\n") {
		if line == "" {
			continue
		}
		var fields []string
		var cur strings.Builder
		for i := 0; i < len(line); i++ {
			switch {
			case line[i] == '\\' && i+1 < len(line):
				i++
				cur.WriteByte(line[i])
			case line[i] == ':':
				fields = append(fields, cur.String())
				cur.Reset()
			default:
				cur.WriteByte(line[i])
			}
		}
		fields = append(fields, cur.String())
		if len(fields) == 3 {
			ps = append(ps, activeProfile{Name: fields[0], Device: fields[1], File: fields[2]})
		}
	}
	return ps
}

// checkNM makes the profiles and bootstrap findings: both read the active
// profiles once.
func checkNM(ctx context.Context, r *Report, in Input) {
	var active []activeProfile
	nmErr := ""
	nmcli, err := host.Lookup("nmcli", in.Nmcli)
	if err != nil {
		nmErr = "not checked: nmcli not found"
	} else {
		ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		out, err := in.Runner.Run(ctx, host.Command{Name: nmcli, Args: []string{"-t", "-f", nmcliFields, "connection", "show", "--active"}, ReadOnly: true})
		cancel()
		if err != nil {
			nmErr = fmt.Sprintf("nmcli failed: %v", err)
		}
		active = parseActive(out)
	}
	checkProfiles(r, in, active, nmErr)
	checkBootstrap(r, in.Files, in.BootstrapKeyfiles, active, nmErr)
}

func checkProfiles(r *Report, in Input, active []activeProfile, nmErr string) {
	switch {
	case len(in.addresses) == 0:
		r.add(Profiles, NotChecked, "not checked: the state file records no interfaces")
		return
	case strings.HasPrefix(nmErr, "not checked"):
		r.add(Profiles, NotChecked, "%s", nmErr)
		return
	case nmErr != "":
		r.add(Profiles, Failed, "%s", nmErr)
		return
	}
	ours := map[string]bool{}
	if m, err := readManifest(in.Files); err == nil && m != nil {
		for _, f := range m.Files {
			if f.Kind == state.KindKeyfile {
				ours[in.Files.Path(f.Path)] = true
			}
		}
	}
	var problems []string
	for _, name := range sortedKeys(in.addresses) {
		dev := in.device(name)
		i := slices.IndexFunc(active, func(p activeProfile) bool { return p.Device == dev })
		switch {
		case i < 0:
			problems = append(problems, "no active profile on "+dev)
		case !ours[active[i].File]:
			r.ForeignActive = true
			problems = append(problems, fmt.Sprintf("%s: active profile %q (%s) is not ours", dev, active[i].Name, active[i].File))
		}
	}
	if len(problems) > 0 {
		r.add(Profiles, Failed, "%s", strings.Join(problems, "; "))
		return
	}
	r.add(Profiles, OK, "the active profile of each of %d interfaces is ours", len(in.addresses))
}

func checkBootstrap(r *Report, files host.FS, bk BootstrapKeyfiles, active []activeProfile, nmErr string) {
	if bk.Owned == nil {
		r.add(Bootstrap, NotChecked, "not checked: no bootstrap keyfile target given")
		return
	}
	left, err := bk.Owned(files)
	if err != nil {
		r.add(Bootstrap, Failed, "%v", err)
		return
	}
	for _, p := range active {
		if strings.HasPrefix(path.Base(p.File), bk.Prefix) {
			left = append(left, fmt.Sprintf("active profile %q on %s", p.Name, p.Device))
		}
	}
	switch {
	case len(left) > 0:
		r.add(Bootstrap, Failed, "bootstrap network left up: %s", strings.Join(left, ", "))
	case strings.HasPrefix(nmErr, "not checked"):
		// The agent activates a bootstrap profile with nmcli: an image
		// without it has none active, and the keyfiles were looked at.
		r.add(Bootstrap, OK, "no bootstrap keyfile, and no nmcli on this node to activate a bootstrap profile")
	case nmErr != "":
		r.add(Bootstrap, NotChecked, "the active profiles could not be read (%s); no bootstrap keyfile is left", nmErr)
	default:
		r.add(Bootstrap, OK, "no bootstrap keyfile, no bootstrap profile active")
	}
}

// checkServer: a TCP connect and, for https, a TLS handshake verified by
// the stored CA; nothing is sent, so nothing registers.
func checkServer(ctx context.Context, r *Report, in Input) {
	if in.ConfigProblem != "" {
		r.add(Server, Failed, "%s", in.ConfigProblem)
		return
	}
	u, err := url.Parse(in.ServerURL)
	if err != nil || u.Host == "" {
		r.add(Server, Failed, "registration URL %q is not a URL", protocol.RedactURL(in.ServerURL))
		return
	}
	port := u.Port()
	if port == "" {
		port = map[string]string{"https": "443", "wss": "443"}[u.Scheme]
		if port == "" {
			port = "80"
		}
	}
	addr := net.JoinHostPort(u.Hostname(), port)
	timeout := in.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	conn, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
	if err != nil {
		r.add(Server, Failed, "%s unreachable: %v", addr, err)
		return
	}
	defer conn.Close()
	if u.Scheme != "https" && u.Scheme != "wss" {
		r.add(Server, OK, "%s reachable (plain %s: no TLS to verify)", addr, u.Scheme)
		return
	}
	tc, err := protocol.TLSConfig(in.CA, false)
	if err != nil {
		r.add(Server, Failed, "CA: %v", err)
		return
	}
	tc.ServerName = u.Hostname()
	tconn := tls.Client(conn, tc)
	if err := tconn.HandshakeContext(ctx); err != nil {
		r.add(Server, Failed, "%s: TLS handshake: %v", addr, err)
		return
	}
	r.add(Server, OK, "%s reachable, TLS verified by the stored CA", addr)
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}

func sortedKeys(m map[string][]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
