package hostile

import (
	"bytes"
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/nodereg/nodereg/internal/keyfile"
	"github.com/nodereg/nodereg/netpolicy"
)

// The differential test of docs/reliability.md's keyfile reading: NetworkManager's own loader
// (nmcli --offline connection modify, NetworkManager 1.42: it reads one
// keyfile on stdin and prints the profile it loaded, normalised, as a
// keyfile; no daemon) against internal/keyfile and the network policy, on
// generated keyfiles and on every keyfile of this package's tests. For each
// keyfile: GLib refuses it exactly when our parser does; a keyfile the
// policy accepts is one NetworkManager loads, with the same reading of
// every key the policy judges or an identity uses; the id and uuid
// (the identity of a profile on disk, read without the policy) agree
// always.

var keyfileSamples = flag.Int("keyfile.samples", 2000, "generated keyfiles checked against nmcli --offline")

func TestKeyfileReadingIsNetworkManagers(t *testing.T) {
	nmcli, err := exec.LookPath("nmcli")
	if err != nil {
		t.Skip("needs nmcli (Debian's network-manager, installed by .ci/run) for nmcli --offline")
	}
	if out, err := runNmcli(nmcli, "[connection]\nid=p\ntype=dummy\ninterface-name=p\nuuid=a1a58a18-f3f3-5eef-9811-1bf9cc86631c\n"); err != nil {
		t.Skipf("this nmcli lacks --offline (NetworkManager < 1.42): %v: %s", err, out)
	}
	tricks := hostileKeyfiles(t)
	if len(tricks) < 20 {
		t.Fatalf("found only %d keyfiles in tests/hostile: the source scan is broken", len(tricks))
	}
	r := rand.New(rand.NewPCG(37, 2))
	inputs := append(slices.Clone(fixedTricks), tricks...)
	for range *keyfileSamples {
		inputs = append(inputs, genKeyfile(r))
	}
	type result struct {
		out []byte
		err error
	}
	results := make([]result, len(inputs))
	var wg sync.WaitGroup
	next := make(chan int)
	for range max(2, runtime.NumCPU()) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				results[i].out, results[i].err = runNmcli(nmcli, inputs[i])
			}
		}()
	}
	go func() {
		for i := range inputs {
			next <- i
		}
		close(next)
	}()
	// Parallel only once the nmcli processes are under way: they then run
	// beside the serial tests after this one, which mostly wait, and the
	// other parallel tests, instead of after them all.
	t.Parallel()
	wg.Wait()

	permissive := netpolicy.Policy{Allow: netpolicy.OptIn}
	var disagree, accepted, loaded, compared int
	for i, in := range inputs {
		res := results[i]
		why := judge(in, res.out, res.err, permissive)
		if res.err == nil && len(bytes.TrimSpace(res.out)) > 0 {
			loaded++
			if permissive.CheckKeyfiles([]netpolicy.Keyfile{{Label: "k", Name: "k.nmconnection", Content: []byte(in)}}) == nil {
				compared++
			}
		}
		if (netpolicy.Policy{}).CheckKeyfiles([]netpolicy.Keyfile{{Label: "k", Name: "k.nmconnection", Content: []byte(in)}}) == nil {
			accepted++
		}
		if why != "" {
			disagree++
			if disagree <= 25 {
				t.Errorf("keyfile %d %q:\n%s\nnmcli: %v\n%s", i, in, why, res.err, res.out)
			}
		}
	}
	t.Logf("%d keyfiles (%d generated, %d from tests/hostile, %d fixed): NetworkManager loaded %d, the default policy accepted %d, "+
		"readings compared key by key (loaded and accepted with every opt-in) %d; %d disagreements",
		len(inputs), *keyfileSamples, len(tricks), len(fixedTricks), loaded, accepted, compared, disagree)
}

func runNmcli(nmcli, keyfileText string) ([]byte, error) {
	cmd := exec.Command(nmcli, "--offline", "connection", "modify")
	cmd.Stdin = strings.NewReader(keyfileText)
	cmd.Env = append(os.Environ(), "LC_ALL=C")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.Bytes(), err
}

var uuidText = regexp.MustCompile(`(?i)[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}|[0-9a-f]{40}`)

// judge says how our reading of in differs from NetworkManager's (out,
// err of nmcli), "" when it does not.
func judge(in string, out []byte, nmErr error, permissive netpolicy.Policy) string {
	kfs := []netpolicy.Keyfile{{Label: "k", Name: "k.nmconnection", Content: []byte(in)}}
	f, perr := keyfile.Parse([]byte(in))
	if nmErr == nil && len(bytes.TrimSpace(out)) == 0 {
		// nmcli 1.42 prints nothing and exits 0 when GLib refuses the
		// file's Encoding.
		nmErr = fmt.Errorf("nmcli loaded nothing")
		out = []byte("Key file contains an unsupported encoding")
	}
	if nmErr != nil {
		switch {
		case perr == nil && bytes.Contains(out, []byte("connection.id: property is missing")) && !hasKey(f, "connection", "id"):
			return "" // offline only: on disk the file name gives the id
		case perr == nil && bytes.Contains(out, []byte("Key file contains")):
			return "GLib refuses the file, our parser reads it"
		}
		if err := (netpolicy.Policy{}).CheckKeyfiles(kfs); err == nil {
			return "NetworkManager refuses the profile, the default policy accepts it"
		}
		return ""
	}
	if perr != nil {
		return fmt.Sprintf("our parser refuses what GLib reads: %v", perr)
	}
	ours := keyfile.ReadProfile(f, "k.nmconnection")
	nf, err := keyfile.Parse(out)
	if err != nil {
		return fmt.Sprintf("cannot read nmcli's output: %v", err)
	}
	nm := keyfile.ReadProfile(nf, "k.nmconnection")
	var diffs []string
	differ := func(key string, a, b any) {
		if fmt.Sprint(a) != fmt.Sprint(b) {
			diffs = append(diffs, fmt.Sprintf("%s: ours %q, NetworkManager's %q", key, a, b))
		}
	}
	// Identity, as a profile on disk is read (no policy involved).
	if hasKey(f, "connection", "id") {
		differ("id", ours.ID, nm.ID)
	}
	if _, err := f.String("connection", "uuid"); err == nil {
		differ("uuid", ours.UUID, nm.UUID)
	} else {
		for _, u := range uuidText.FindAllString(in, -1) {
			if keyfile.NormalUUID(u) == nm.UUID {
				diffs = append(diffs, fmt.Sprintf("uuid: ours derived from the file name, NetworkManager's %s is in the file", nm.UUID))
			}
		}
	}
	if permissive.CheckKeyfiles(kfs) != nil {
		return strings.Join(diffs, "\n") // refused: nothing else to agree on
	}
	differ("type", ours.Type, nm.Type)
	differ("interface-name", ours.InterfaceName, nm.InterfaceName)
	differ("mac-address", ours.MAC, nm.MAC)
	for _, k := range slices.Sorted(slices.Values(append(nf.Keys("match"), f.Keys("match")...))) {
		differ("[match] "+k, fmt.Sprintf("%q", ours.Match[k]), fmt.Sprintf("%q", nm.Match[k]))
	}
	differ("autoconnect", ours.Autoconnect, nm.Autoconnect)
	differ("autoconnect-priority", ours.AutoconnectPriority, nm.AutoconnectPriority)
	if ours.Method4 != "" {
		differ("ipv4.method", ours.Method4, nm.Method4)
	}
	if ours.Method6 != "" {
		differ("ipv6.method", ours.Method6, nm.Method6)
	}
	differ("master", ours.Master, nm.Master)
	differ("slave-type", ours.SlaveType, nm.SlaveType)
	differ("ipv4 addresses", ours.Addresses4, nm.Addresses4)
	differ("ipv6 addresses", ours.Addresses6, nm.Addresses6)
	differ("vlan.parent", ours.VLANParent, nm.VLANParent)
	return strings.Join(diffs, "\n")
}

func hasKey(f *keyfile.File, g, k string) bool {
	_, ok := f.Value(g, k)
	return ok
}

// fixedTricks are the keyfile spellings of the holes docs/reliability.md lists and their
// neighbours, beside what genKeyfile draws at random.
var fixedTricks = func() []string {
	const head = "[connection]\nid=t\nuuid=0f2e8c2e-6b1d-4a0e-9a8e-3b5c2d7f1a01\ntype=ethernet\n"
	var out []string
	for _, tail := range []string{
		"[match]\ninterface-name=eth\\x2a\n", "[match]\ninterface-name=eth0\\!\n", "[match]\ninterface-name=*\n",
		"[match]\ninterface-name=\n", "[match]\ninterface-name=eth0\n", "[match]\ninterface-name=eth0;eth1\n",
		"[match]\ninterface-name=eth0\\;eth1\n", "[match]\ninterface-name=\\\\!eth0\n", "[match]\ninterface-name=&eth0\n",
		"[match]\ninterface-name=|eth0\n", "[match]\ninterface-name=!eth0\n", "[match]\ndriver=virtio_net\n", "",
		"interface-name=eth0\n; comment\n", "interface-name=eth0\n;uuid=c0ffee00-0000-4000-8000-000000000001\n",
		"[802-3-ethernet]\ninterface-name=eth9\n", "[ethernet]\ninterface-name=eth9\n",
		"[ethernet]\nmac-address=52:54:00:aa:bb:cc\n", "[ethernet]\nmac-address=52-54-00-aa-bb-cc\n",
		"interface-name=eth0\ncontroller=br0\nport-type=bridge\n", "interface-name=eth0\nautoconnect=no\n",
	} {
		out = append(out, head+tail)
	}
	return out
}()

// hostileKeyfiles are the keyfiles this package's tests send: every string
// expression of its sources (literals, the constants, '+' and
// strings.Replace of them) whose value holds a [connection] group, with
// the server's placeholders filled in.
func hostileKeyfiles(t *testing.T) []string {
	t.Helper()
	fset := token.NewFileSet()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	consts := map[string]ast.Expr{}
	var exprs []ast.Expr
	for _, name := range files {
		af, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(af, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.ValueSpec:
				for i, id := range n.Names {
					if i < len(n.Values) {
						consts[id.Name] = n.Values[i]
					}
				}
			case ast.Expr:
				exprs = append(exprs, n)
			}
			return true
		})
	}
	placeholder := regexp.MustCompile(`\{[a-z0-9-]+\}`)
	seen := map[string]bool{}
	var out []string
	for _, e := range exprs {
		s, ok := evalString(e, consts, 0)
		if !ok || !strings.Contains(s, "[connection]") {
			continue
		}
		s = placeholder.ReplaceAllString(s, "192.168.122.150")
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}

func evalString(e ast.Expr, consts map[string]ast.Expr, depth int) (string, bool) {
	if depth > 20 {
		return "", false
	}
	switch e := e.(type) {
	case *ast.BasicLit:
		if e.Kind != token.STRING {
			return "", false
		}
		s, err := strconv.Unquote(e.Value)
		return s, err == nil
	case *ast.Ident:
		if v, ok := consts[e.Name]; ok {
			return evalString(v, consts, depth+1)
		}
	case *ast.ParenExpr:
		return evalString(e.X, consts, depth+1)
	case *ast.BinaryExpr:
		if e.Op != token.ADD {
			return "", false
		}
		a, ok1 := evalString(e.X, consts, depth+1)
		b, ok2 := evalString(e.Y, consts, depth+1)
		return a + b, ok1 && ok2
	case *ast.CallExpr:
		sel, ok := e.Fun.(*ast.SelectorExpr)
		if !ok || len(e.Args) != 4 || sel.Sel.Name != "Replace" {
			return "", false
		}
		if x, ok := sel.X.(*ast.Ident); !ok || x.Name != "strings" {
			return "", false
		}
		var args [3]string
		for i := range args {
			s, ok := evalString(e.Args[i], consts, depth+1)
			if !ok {
				return "", false
			}
			args[i] = s
		}
		n := -1
		if l, ok := e.Args[3].(*ast.BasicLit); ok {
			n, _ = strconv.Atoi(l.Value)
		}
		return strings.Replace(args[0], args[1], args[2], n), true
	}
	return "", false
}

// genKeyfile draws a keyfile: a profile of a supported kind whose judged
// keys take spellings from NetworkManager's writer and from every corner of
// GLib's format (escapes, lists, blanks, comments, duplicates, locales,
// repeated and aliased groups, CRLF, NUL), each line at random.
func genKeyfile(r *rand.Rand) string {
	pick := func(vs ...string) string { return vs[r.IntN(len(vs))] }
	maybe := func(p float64) bool { return r.Float64() < p }
	// usual is the value NetworkManager writes most of the time, a trick
	// otherwise, so that many keyfiles load and their readings compare.
	trickP := []float64{0.005, 0.01, 0.03, 0.1, 0.3}[r.IntN(5)]
	usual := func(v string, tricks ...string) string {
		if !maybe(trickP) {
			return v
		}
		return pick(tricks...)
	}
	type line struct{ group, text string }
	var lines []line
	add := func(g, k, v string) {
		lines = append(lines, line{g, k + usual("=", " = ", "\t=", "=  ") + v})
	}
	typ := usual(pick("ethernet", "802-3-ethernet", "bond", "bridge", "vlan", "dummy"), "ethernet ", "Ethernet", "eth\\sernet", "", "wifi")
	if maybe(0.95) {
		add("connection", "id", usual(pick("eth0", "my profile", "a\\sb"), "a\\sb", "x\\ty", "a\\\\b", "bad\\x", "end\\", "", "id;x", "\\seth0", "e;"))
	}
	if maybe(0.9) {
		add("connection", "uuid", usual("3f1c0d52-9b7e-4d1a-8f52-6a0c2d7e1b01", "3F1C0D52-9B7E-4D1A-8F52-6A0C2D7E1B01",
			strings.Repeat("ab", 20), "3f1c0d52-9b7e-4d1a-8f52-6a0c2d7e1b0", "3f1c0d52-9b7e-4d1a-8f52-6a0c2d7e1b01 ",
			"3f1c0d52\\s9b7e", "\\x3f1c0d52-9b7e-4d1a-8f52-6a0c2d7e1b01", "3f1c0d52-9b7e-4d1a-8f52-6a0c2d7e1b01;"))
	}
	if typ != "" {
		add("connection", "type", typ)
	}
	ifn := usual(pick("eth0", "eth1", "bond0"), "eth0\\s", "eth\\x2a", "eth0\\!", "eth\\;0", "e\\\\th", "eth0 ", "\\seth0",
		"averyveryverylongname", "eth%d", "eth:0", "", "bond0", "eth0;", "eth\\t0")
	if maybe(0.7) {
		add("connection", "interface-name", ifn)
	}
	if maybe(trickP) {
		add("connection", "interface-name", pick("eth2", "eth\\x2a"))
	}
	if maybe(trickP) {
		add("connection", "interface-name["+pick("de", "C", "en_US.UTF-8", "x y", "")+"]", "eth7")
	}
	if maybe(0.3) {
		add("connection", "autoconnect", usual(pick("true", "false", "0", "1"), "yes", "no", "on", "off", "True", "false ", "\\sfalse", "", "2", "FALSE"))
	}
	if maybe(0.3) {
		add("connection", "autoconnect-priority", usual(pick("0", "-5", "-999", "-1"), "5", "010", "-010", "0x10", "+5", " 5", "5 ", "-999", "-1000", "1000", "", "\\s-3", "-0", "5x", "-1"))
	}
	if maybe(0.2) {
		ctl := usual(pick("br0", "bond0", "3f1c0d52-9b7e-4d1a-8f52-6a0c2d7e1b02"), "br\\x30", "")
		kind := usual(pick("bridge", "bond"), "bridg\\se", "team")
		switch usual("0", "1", "2") {
		case "0":
			add("connection", "master", ctl)
			add("connection", "slave-type", kind)
		case "1":
			add("connection", "controller", ctl)
			add("connection", "port-type", kind)
		default:
			add("connection", "master", ctl)
			add("connection", "slave-type", kind)
			add("connection", "controller", pick(ctl, "br9"))
			add("connection", "port-type", kind)
		}
	}
	if maybe(0.3) {
		g := usual("match", "Match")
		add(g, usual("interface-name", "driver", "path", "kernel-command-line"),
			usual(pick("eth0", "eth1"), "*", "eth*", "!eth0", "eth0;eth1", "eth0;", ";", "", "eth\\x2a", "eth0\\!", "&eth0", "|eth0", "~eth0",
				"eth\\\\*", "a b", "eth0\\;eth1", "eth0", "eth1;;", "e1000", "pci-0000:00:03.0", "\\\\!eth0", "eth0\\s"))
	}
	if maybe(trickP) {
		add(pick("802-3-ethernet", "ethernet", "bond", "vlan"), "interface-name", pick("eth5", "eth\\x2a"))
	}
	if maybe(0.25) {
		add(usual("ethernet", "802-3-ethernet", "infiniband"), "mac-address", usual(pick("52:54:00:aa:bb:cc", "52:54:00:AA:BB:CC"),
			"52-54-00-aa-bb-cc", "5254.00aa.bbcc", "52:54:00:aa:bb", "52:54:00:aa:bb:cc\\s", "82;84;0;170;187;204;", "zz:54:00:aa:bb:cc"))
	}
	switch typ {
	case "bond":
		add("bond", "mode", usual(pick("active-backup", "802.3ad"), "x", "Active-Backup"))
	case "bridge":
		add("bridge", "stp", usual("false", "no"))
	case "dummy":
		if !maybe(trickP) {
			lines = append(lines, line{"dummy", "# no keys"})
		}
	}
	if strings.HasPrefix(typ, "vlan") || maybe(0.05) {
		add("vlan", "id", usual("10", "4095", "x"))
		add("vlan", "parent", usual(pick("eth0", "3f1c0d52-9b7e-4d1a-8f52-6a0c2d7e1b03"), "eth\\x2a", "eth0\\s"))
	}
	for _, fam := range []string{"ipv4", "ipv6"} {
		if !maybe(0.6) {
			continue
		}
		method := usual(pick("manual", "auto", "dhcp", "link-local", "disabled", "shared", "ignore"), "MANUAL", "auto ", "\\sauto", "aut\\o", "")
		if fam == "ipv4" && method == "ignore" || fam == "ipv6" && method == "dhcp" {
			method = "auto"
		}
		add(fam, "method", method)
		ip, ip2, gw, pfx := "10.0.0.1", "10.0.0.2", "10.0.0.254", "24"
		if fam == "ipv6" {
			ip, ip2, gw, pfx = "fd00::1", "fd00::2", "fd00::fe", "64"
		}
		n := r.IntN(3)
		if method == "manual" && !maybe(trickP) {
			n = 1 + r.IntN(2)
		}
		if slices.Contains([]string{"disabled", "link-local", "ignore"}, method) && !maybe(trickP) {
			n = 0
		}
		for ; n > 0; n-- {
			key := usual(pick("address1", "address0", "address2"), "address", "addresses1", "address01", "addresses")
			add(fam, key, usual(pick(ip+"/"+pfx, ip2+"/"+pfx, ip+"/"+pfx+","+gw), ip, ip+"/99", ip+"/"+pfx+";", " "+ip+"/"+pfx,
				ip+"/"+pfx+" ", ip+"\\s/"+pfx, "010.0.0.1/24", ip+"/"+pfx+","+gw+",x", "10.0.0.1/24", "fd00::1/64"))
		}
	}
	// Order the lines by group (groups at random places, sometimes split
	// in two), then write them with the format's variations.
	var b strings.Builder
	nl := usual("\n", "\r\n")
	groups := []string{}
	for _, l := range lines {
		if !slices.Contains(groups, l.group) {
			groups = append(groups, l.group)
		}
	}
	if maybe(trickP) {
		r.Shuffle(len(groups), func(i, j int) { groups[i], groups[j] = groups[j], groups[i] })
	}
	if maybe(trickP) {
		b.WriteString(pick("# head\n", "\n", "Encoding=UTF-8\n", "; comment\n"))
	}
	for _, g := range groups {
		header := "[" + g + "]" + usual("", " ", "\t", " x", "\r")
		b.WriteString(usual("", " ", "\t", "\v", "\f") + header + nl)
		if maybe(trickP) {
			b.WriteString("Encoding=" + pick("UTF-8", "utf-8", "latin1") + nl)
		}
		gl := []line{}
		for _, l := range lines {
			if l.group == g {
				gl = append(gl, l)
			}
		}
		for i, l := range gl {
			if maybe(trickP) && i > 0 {
				b.WriteString("[" + g + "]" + nl) // the group again: GLib merges it
			}
			if maybe(trickP) {
				b.WriteString(pick("# ", "#", "; ", ";") + l.text + nl)
			}
			if eq := strings.IndexByte(l.text, '='); eq > 0 && maybe(trickP) {
				b.WriteString(l.text[:eq] + "\x00=zz" + nl)
			}
			b.WriteString(usual("", " ", "\t", "  \f", "\v") + l.text + usual("", " ", "\t") + nl)
			if maybe(trickP) {
				b.WriteString(nl)
			}
		}
	}
	if maybe(trickP) {
		b.WriteString(pick("garbage", "[", "[]", "a]=b") + nl)
	}
	return b.String()
}
