package keyfile

import (
	"slices"
	"strings"
	"testing"
)

// The expectations here are GLib's documented behaviour (gkeyfile.c, 2.74)
// as NetworkManager 1.42 shows it through nmcli --offline; netpolicy's
// TestKeyfileReadingIsNetworkManagers checks the same against the real
// component over thousands of generated files.

func TestUnescape(t *testing.T) {
	for raw, want := range map[string]string{
		`eth0`: "eth0", `eth0\s`: "eth0 ", `a\tb`: "a\tb", `a\\b`: `a\b`, `a\nb`: "a\nb", `x\s\s`: "x  ", `a\rb`: "a\rb",
	} {
		if got, err := Unescape(raw); err != nil || got != want {
			t.Errorf("Unescape(%q) = %q, %v; want %q", raw, got, err, want)
		}
	}
	for _, raw := range []string{`eth\;0`, `eth\x41`, `eth\q0`, `eth0\`, `eth0\!`, `eth\x2a`} {
		if got, err := Unescape(raw); err == nil {
			t.Errorf("Unescape(%q) = %q, accepted; GLib refuses it", raw, got)
		}
	}
}

func TestSplitList(t *testing.T) {
	for raw, want := range map[string][]string{
		"":           nil,
		"a":          {"a"},
		"a;":         {"a"},
		"a;b":        {"a", "b"},
		"a;;b;":      {"a", "", "b"},
		";":          {""},
		`a\;b;c`:     {"a;b", "c"},
		`a\sb;\\c`:   {"a b", `\c`},
		"eth0 eth1,": {"eth0 eth1,"},
	} {
		if got, err := SplitList(raw); err != nil || !slices.Equal(got, want) {
			t.Errorf("SplitList(%q) = %q, %v; want %q", raw, got, err, want)
		}
	}
	for _, raw := range []string{`eth0\!;eth1`, `eth\x2a`, `a;b\`} {
		if got, err := SplitList(raw); err == nil {
			t.Errorf("SplitList(%q) = %q, accepted; GLib refuses the whole list", raw, got)
		}
	}
}

func TestParseAsGLib(t *testing.T) {
	f, err := Parse([]byte("# c\n  [connection]  \nid=x  \n  interface-name =  eth0\ninterface-name=eth1\n;uuid=not-a-comment\n\f\tmaster=\t b\n[ipv4]\r\nmethod=auto\r\n[connection]\ntype=ethernet\nk[de]=v\nz=a\x00b\n\x00[ignored]\n"))
	if err != nil {
		t.Fatal(err)
	}
	get := func(g, k string) string { v, _ := f.Value(g, k); return v }
	if get("connection", "id") != "x  " || get("connection", "interface-name") != "eth1" || get("connection", "type") != "ethernet" ||
		get("connection", ";uuid") != "not-a-comment" || get("connection", "master") != "b" || get("ipv4", "method") != "auto" ||
		get("connection", "k[de]") != "v" || get("connection", "z") != "a" {
		t.Errorf("read %q", f.vals)
	}
	if _, ok := f.Value("connection", "uuid"); ok {
		t.Error("a ';' line was read as uuid")
	}
	if g := f.Groups(); !slices.Equal(g, []string{"connection", "ipv4"}) {
		t.Errorf("groups %q: a group given twice is one", g)
	}
	for _, bad := range []string{"[connection]\nfoo\n", "id=x\n[connection]\n", "[conn\n", "[]\n", "[a]b]\n", "[a[b]\n", "[c]\na]=b\n", "[c]\nx [de]=1\n",
		"[c]\nx[d e]=1\n", "[c]\nEncoding=latin1\n", "; comment\n[c]\n", "[c]\r"} {
		if _, err := Parse([]byte(bad)); err == nil {
			t.Errorf("Parse(%q) accepted: GLib refuses it", bad)
		}
	}
	for _, good := range []string{"", "\n\n", "[c]\r\n", "[c]\nx[]=1\n", "[c] \t\n", "[c]\nEncoding=utf-8\n", "[a]\n[b]\nEncoding=latin1\n"} {
		if _, err := Parse([]byte(good)); err != nil {
			t.Errorf("Parse(%q): %v; GLib takes it", good, err)
		}
	}
}

func TestBoolean(t *testing.T) {
	f, err := Parse([]byte("[c]\na=true\nb=0 \nc=yes\nd=False\ne=\\strue\n"))
	if err != nil {
		t.Fatal(err)
	}
	for k, want := range map[string]any{"a": true, "b": false, "c": nil, "d": nil, "e": nil} {
		b, err := f.Boolean("c", k)
		if (err == nil) != (want != nil) || want != nil && b != want {
			t.Errorf("Boolean(%s) = %v, %v; want %v", k, b, err, want)
		}
	}
}

func TestRewrite(t *testing.T) {
	in := "# uuid=A\n[connection]\n uuid = A\r\n;x=A\n[other]\nparent=B\n"
	out := Rewrite([]byte(in), func(g, k, raw string) (string, bool) {
		if raw == "A" || raw == "B" {
			return strings.ToLower(raw) + "2", true
		}
		return "", false
	})
	if want := "# uuid=A\n[connection]\n uuid =a2\r\n;x=a2\n[other]\nparent=b2\n"; string(out) != want {
		t.Errorf("Rewrite = %q, want %q", out, want)
	}
}

func TestReadProfile(t *testing.T) {
	f, err := Parse([]byte("[connection]\nuuid=8D2F6A41-0C3B-4E5F-9A7D-1B2C3D4E5F60\ntype=802-3-ethernet\nautoconnect=no\nautoconnect-priority=010\n" +
		"[802-3-ethernet]\ninterface-name=eth9\nmac-address=52:54:00:aa:bb:cc\n[match]\ninterface-name=eth\\x2a\ndriver=e1000;virtio\n" +
		"[ipv4]\naddress1=10.0.0.2/24,10.0.0.1\naddress0=10.0.0.1/24\naddress01=10.0.0.3/24\n"))
	if err != nil {
		t.Fatal(err)
	}
	p := ReadProfile(f, "eth9.nmconnection")
	if p.ID != "eth9" || p.UUID != "8d2f6a41-0c3b-4e5f-9a7d-1b2c3d4e5f60" || p.Type != "ethernet" || p.InterfaceName != "eth9" ||
		p.MAC != "52:54:00:AA:BB:CC" || !p.Autoconnect || p.AutoconnectPriority != 8 ||
		!slices.Equal(p.Addresses4, []string{"10.0.0.1/24", "10.0.0.2/24"}) || !slices.Equal(p.Match["driver"], []string{"e1000", "virtio"}) {
		t.Errorf("read %+v", p)
	}
	if !slices.Equal(p.Dropped, []string{"[match] interface-name"}) || !slices.Equal(p.Unmodelled, []string{"[ipv4] address01"}) {
		t.Errorf("dropped %q, unmodelled %q", p.Dropped, p.Unmodelled)
	}
}
