package nmstate

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// These tests feed rendered keyfiles to NetworkManager's own keyfile reader
// through `nmcli --offline connection modify` (NetworkManager 1.42+: reads
// a keyfile on stdin, applies the modification, prints the result as a
// keyfile, touches no daemon). NetworkManager drops some invalid values
// with only a warning, so "accepted" here means: exit 0 and every key we
// wrote comes back with the same meaning.

var nmcliSamples = flag.Int("nmcli.samples", 300, "generated desired states checked with nmcli --offline")

func requireNmcliOffline(t *testing.T) string {
	t.Helper()
	nmcli, err := exec.LookPath("nmcli")
	if err != nil {
		t.Skip("nmcli not installed (apt-get install network-manager): NetworkManager acceptance not checked")
	}
	cmd := exec.Command(nmcli, "--offline", "connection", "modify", "connection.id", "probe")
	cmd.Stdin = strings.NewReader("[connection]\nid=probe\ntype=dummy\ninterface-name=probe\nuuid=a1a58a18-f3f3-5eef-9811-1bf9cc86631c\n")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Skipf("this nmcli lacks --offline (NetworkManager < 1.42?): %v: %s", err, out)
	}
	return nmcli
}

type ini map[string]map[string]string

func parseIni(text string) ini {
	out := ini{}
	var sec string
	for _, line := range strings.Split(text, "\n") {
		switch {
		case strings.HasPrefix(line, "[") && strings.HasSuffix(line, "]"):
			sec = line[1 : len(line)-1]
			if out[sec] == nil {
				out[sec] = map[string]string{}
			}
		case strings.Contains(line, "="):
			k, v, _ := strings.Cut(line, "=")
			out[sec][k] = v
		}
	}
	return out
}

// nmDefaults are values NetworkManager does not print because they are the
// property defaults.
var nmDefaults = map[string]string{
	"connection.autoconnect": "true", "connection.autoconnect-slaves": "-1", "bridge.vlan-filtering": "false",
	"ipv4.dhcp-send-hostname": "true", "ipv6.dhcp-send-hostname": "true",
	"ipv4.ignore-auto-dns": "false", "ipv6.ignore-auto-dns": "false",
	"ipv4.ignore-auto-routes": "false", "ipv6.ignore-auto-routes": "false",
	"ipv4.never-default": "false", "ipv6.never-default": "false",
	"vlan.flags": "1", "vlan.id": "0", "ethernet.mtu": "0", "bridge.stp": "true",
	"ipv4.route-table": "0", "ipv6.route-table": "0",
	"ipv4.may-fail": "true", "ipv6.may-fail": "true", "ethernet.auto-negotiate": "false",
	"bridge.multicast-querier-interval": "25500", "bridge.multicast-snooping": "true",
	"bridge.multicast-query-response-interval": "1000", "vxlan.learning": "true",
	"ethtool.pause-autoneg": "", "connection.lldp": "-1", "sriov.total-vfs": "0",
}

var indexed = regexp.MustCompile(`^(address|route|routing-rule)(\d+)(_options)?$`)

// nmKey is the key NetworkManager prints for one of ours: it numbers
// addresses and routes from 1.
func nmKey(k string) string {
	m := indexed.FindStringSubmatch(k)
	if m == nil {
		return k
	}
	i, _ := strconv.Atoi(m[2])
	return m[1] + strconv.Itoa(i+1) + m[3]
}

func sameMeaning(key, ours, theirs string) bool {
	theirs = strings.TrimSuffix(theirs, ";")
	switch {
	case ours == theirs:
		return true
	case key == "connection.type":
		return ours == "802-3-ethernet" && theirs == "ethernet"
	case key == "ipv6.addr-gen-mode":
		return (ours == "0" && theirs == "eui64") || (ours == "1" && theirs == "stable-privacy")
	case strings.Contains(key, ".routing-rule"):
		return sameRule(ours, theirs)
	case strings.HasSuffix(key, "_options"):
		// NetworkManager sorts the route options.
		a, b := strings.Split(ours, ","), strings.Split(theirs, ",")
		slices.Sort(a)
		slices.Sort(b)
		return slices.Equal(a, b)
	case strings.HasPrefix(key, "ipv4.route") || strings.HasPrefix(key, "ipv6.route"):
		// No gateway: NetworkManager writes the unspecified address.
		return strings.Replace(theirs, ",0.0.0.0,", ",,", 1) == ours || strings.Replace(theirs, ",::,", ",,", 1) == ours
	}
	return false
}

// sameRule compares two routing-rule texts as NetworkManager reads them:
// tokens in any order, fwmark/mask in any base, a host prefix written
// bare, "from" all-addresses as no from at all.
func sameRule(ours, theirs string) bool {
	norm := func(s string) map[string]string {
		f := strings.Fields(s)
		m := map[string]string{}
		for i := 0; i+1 < len(f); i += 2 {
			v := f[i+1]
			if f[i] == "fwmark" {
				var parts []string
				for _, p := range strings.Split(v, "/") {
					n, _ := strconv.ParseUint(p, 0, 32)
					parts = append(parts, strconv.FormatUint(n, 10))
				}
				v = strings.Join(parts, "/")
			}
			if f[i] == "from" || f[i] == "to" {
				v = strings.TrimSuffix(strings.TrimSuffix(v, "/32"), "/128") // a host is written bare
			}
			m[f[i]] = v
		}
		if m["from"] == "0.0.0.0/0" || m["from"] == "::/0" {
			delete(m, "from")
		}
		return m
	}
	return maps.Equal(norm(ours), norm(theirs))
}

// nmcliCheck runs one keyfile through NetworkManager's reader and returns
// what it refused or changed.
func nmcliCheck(nmcli string, kf Keyfile) error {
	id := strings.TrimSuffix(kf.Name, ".nmconnection")
	cmd := exec.Command(nmcli, "--offline", "connection", "modify", "connection.id", id)
	cmd.Stdin = bytes.NewReader(kf.Content)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("nmcli refused %s: %v: %s\n%s", kf.Name, err, stderr.String(), kf.Content)
	}
	ours, theirs := parseIni(string(kf.Content)), parseIni(stdout.String())
	var diffs []string
	for sec, keys := range ours {
		if _, ok := theirs[sec]; !ok && len(keys) > 0 && sec != "bridge-port" && sec != "bond-port" {
			nonDefault := false
			for k, v := range keys {
				if nmDefaults[sec+"."+k] != v {
					nonDefault = true
				}
			}
			if nonDefault {
				diffs = append(diffs, "section ["+sec+"] dropped")
				continue
			}
		}
		for k, v := range keys {
			full := sec + "." + k
			got, ok := theirs[sec][nmKey(k)]
			switch {
			case !ok && nmDefaults[full] == v:
			case !ok && knownNMLoss(full, ours):
			case !ok:
				diffs = append(diffs, fmt.Sprintf("%s=%s dropped", full, v))
			case !sameMeaning(full, v, got):
				diffs = append(diffs, fmt.Sprintf("%s=%s read as %q", full, v, got))
			}
		}
	}
	if len(diffs) > 0 {
		return fmt.Errorf("NetworkManager changed %s: %s\n--- ours\n%s--- NetworkManager\n%s", kf.Name, strings.Join(diffs, "; "), kf.Content, stdout.String())
	}
	return nil
}

// TestNetworkManagerAcceptsGolden: every golden output loads unchanged.
func TestNetworkManagerAcceptsGolden(t *testing.T) {
	nmcli := requireNmcliOffline(t)
	for _, in := range goldenCases(t) {
		for _, kf := range readExpected(t, strings.TrimSuffix(in, ".yaml")+".keyfiles") {
			if err := nmcliCheck(nmcli, kf); err != nil {
				t.Errorf("%s: %v", filepath.Base(in), err)
			}
		}
	}
}

// TestNetworkManagerAcceptsGenerated renders states drawn by the fuzz
// target's generator (fixed seed, so failures reproduce) plus the inputs
// the fuzzer has cached, and checks every rendered file with nmcli.
func TestNetworkManagerAcceptsGenerated(t *testing.T) {
	nmcli := requireNmcliOffline(t)
	rng := rand.New(rand.NewPCG(16, 16))
	var inputs [][]byte
	for range *nmcliSamples {
		data := make([]byte, 96)
		for i := range data {
			data[i] = byte(rng.UintN(256))
		}
		inputs = append(inputs, []byte(genState(data)))
	}
	inputs = append(inputs, cachedFuzzInputs(t, 100)...)
	rendered, files := 0, 0
	for _, in := range inputs {
		kfs, err := GenerateKeyfiles(in)
		if err != nil {
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("non-*Error refusal %v", err)
			}
			continue
		}
		rendered++
		for _, kf := range kfs {
			files++
			if err := nmcliCheck(nmcli, kf); err != nil {
				t.Errorf("input:\n%s\n%v", in, err)
			}
		}
	}
	t.Logf("%d inputs, %d rendered, %d keyfiles checked with nmcli", len(inputs), rendered, files)
	if rendered < len(inputs)/10 {
		t.Errorf("only %d of %d inputs rendered: the sample checks too little", rendered, len(inputs))
	}
}

// cachedFuzzInputs reads up to max inputs `go test -fuzz` stored in the
// build cache for FuzzGenerateKeyfiles, through both of its readings.
func cachedFuzzInputs(t *testing.T, max int) [][]byte {
	out, err := exec.Command("go", "env", "GOCACHE").Output()
	if err != nil {
		return nil
	}
	dir := filepath.Join(strings.TrimSpace(string(out)), "fuzz", "github.com", "nodereg", "nodereg", "nmstate", "FuzzGenerateKeyfiles")
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	var inputs [][]byte
	for _, e := range entries {
		if len(inputs) >= 2*max {
			break
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			continue
		}
		if data, ok := corpusBytes(string(b)); ok {
			inputs = append(inputs, data, []byte(genState(data)))
		}
	}
	return inputs
}

// corpusBytes decodes a "go test fuzz v1" file holding one []byte.
func corpusBytes(s string) ([]byte, bool) {
	_, rest, ok := strings.Cut(s, "\n")
	rest = strings.TrimSpace(rest)
	if !ok || !strings.HasPrefix(rest, "[]byte(") || !strings.HasSuffix(rest, ")") {
		return nil, false
	}
	v, err := strconv.Unquote(rest[len("[]byte(") : len(rest)-1])
	return []byte(v), err == nil
}

// knownNMLoss: values gc writes (and so this translator) that NetworkManager
// 1.42 reads and drops, as the vectors' README (section 4) records:
// bond-port.prio (a newer property) and may-fail in a disabled section,
// where it means nothing. docs/nmstate.md names both.
func knownNMLoss(key string, ours ini) bool {
	switch key {
	case "bond-port.prio":
		return true
	case "ipv4.may-fail":
		return ours["ipv4"]["method"] == "disabled"
	case "ipv6.may-fail":
		return ours["ipv6"]["method"] == "disabled"
	}
	return false
}

// TestNetworkManagerAcceptsVectors: every keyfile the translator writes for
// the gen_conf vectors inside the subset loads in NetworkManager unchanged.
func TestNetworkManagerAcceptsVectors(t *testing.T) {
	nmcli := requireNmcliOffline(t)
	files := 0
	for _, v := range loadVectors(t) {
		kfs, err := GenerateKeyfiles(v.input)
		if err != nil {
			continue
		}
		for _, kf := range kfs {
			files++
			if err := nmcliCheck(nmcli, kf); err != nil {
				t.Errorf("%s: %v", v.name, err)
			}
		}
	}
	if files < 200 {
		t.Errorf("only %d keyfiles checked", files)
	}
	t.Logf("%d keyfiles of the vectors checked with nmcli", files)
}
