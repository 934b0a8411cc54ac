package nmstate

import (
	"bytes"
	"fmt"
	"os"
	"strings"
	"testing"
)

// TestLenientGolden rewrites golden inputs the way nmstate's lenient
// deserialisers accept (booleans as words or numbers, integers as strings,
// bond mode as a number, JSON instead of YAML) and expects the vectors'
// unchanged output.
func TestLenientGolden(t *testing.T) {
	for _, c := range []struct {
		vector   string
		old, new []string
	}{
		{"v1", []string{"{enabled: true, dhcp: true}", "mtu: 9000", "{enabled: true, dhcp: true, autoconf: true}"},
			[]string{"{enabled: 'yes', dhcp: On}", "mtu: '9000'", "{enabled: 1, dhcp: Y, autoconf: 'TRUE'}"}},
		{"v2", []string{"mode: active-backup", "miimon: 100", "prefix-length: 24", "{enabled: false}"},
			[]string{"mode: 1", "miimon: '0x64'", "prefix-length: '24'", "{enabled: 'off'}"}},
		{"v3", []string{"metric: 150", "table-id: 100", "{stp: {enabled: false}}"},
			[]string{"metric: '150'", "table-id: '100'", "{stp: {enabled: n}}"}},
		{"v4", []string{"id: 100"}, []string{"id: '100'"}},
	} {
		t.Run(c.vector, func(t *testing.T) {
			in, err := os.ReadFile("testdata/golden/" + c.vector + ".yaml")
			if err != nil {
				t.Fatal(err)
			}
			s := string(in)
			for i := range c.old {
				if !strings.Contains(s, c.old[i]) {
					t.Fatalf("%q not in %s", c.old[i], c.vector)
				}
				s = strings.Replace(s, c.old[i], c.new[i], 1)
			}
			assertGolden(t, []byte(s), "testdata/golden/"+c.vector+".keyfiles")
		})
	}
	t.Run("v5 as JSON", func(t *testing.T) {
		json := `{"dns-resolver": {"config": {"server": ["192.168.122.1"], "search": []}},
 "routes": {"config": [{"destination": "0.0.0.0/0", "next-hop-interface": "enp1s0", "next-hop-address": "192.168.122.1", "metric": 150, "table-id": 254}]},
 "interfaces": [{"name": "enp1s0", "type": "ethernet", "description": "Main-NIC", "state": "up",
   "ipv4": {"enabled": true, "dhcp": false, "address": [{"ip": "192.168.122.150", "prefix-length": 24}]}, "ipv6": {"enabled": false}}]}`
		assertGolden(t, []byte(json), "testdata/golden/v5.keyfiles")
	})
}

func assertGolden(t *testing.T, in []byte, expected string) {
	t.Helper()
	want := readExpected(t, expected)
	got, err := GenerateKeyfiles(in)
	if err != nil {
		t.Fatalf("GenerateKeyfiles: %v", err)
	}
	if len(got) != len(want) {
		t.Fatalf("files %v, want %v", names(got), names(want))
	}
	for i := range want {
		if got[i].Name != want[i].Name || !bytes.Equal(got[i].Content, want[i].Content) {
			t.Errorf("%s differs\n--- got\n%s--- want\n%s", want[i].Name, got[i].Content, want[i].Content)
		}
	}
}

func only(t *testing.T, in string) string {
	t.Helper()
	kfs, err := GenerateKeyfiles([]byte(in))
	if err != nil {
		t.Fatalf("GenerateKeyfiles: %v", err)
	}
	if len(kfs) != 1 {
		t.Fatalf("files %v, want one", names(kfs))
	}
	return string(kfs[0].Content)
}

func wantLines(t *testing.T, text, sec string, lines ...string) {
	t.Helper()
	body := sectionOf(text, sec)
	for _, l := range lines {
		if !strings.Contains(body, "\n"+l+"\n") {
			t.Errorf("[%s] lacks %q:\n%s", sec, l, text)
		}
	}
}

func lacks(t *testing.T, text, sec string, prefixes ...string) {
	t.Helper()
	body := sectionOf(text, sec)
	for _, p := range prefixes {
		if strings.Contains(body, "\n"+p) {
			t.Errorf("[%s] has %q:\n%s", sec, p, text)
		}
	}
}

// TestDocumentedRules checks single statements of docs/nmstate.md (subset table)
// that the vectors do not cover.
func TestDocumentedRules(t *testing.T) {
	t.Run("enabled defaults to false", func(t *testing.T) {
		kf := only(t, "interfaces:\n- {name: eth0, ipv4: {dhcp: true}}")
		wantLines(t, kf, "ipv4", "method=disabled")
		lacks(t, kf, "ipv4", "dhcp-client-id")
	})
	t.Run("enabled false drops addresses", func(t *testing.T) {
		kf := only(t, "interfaces:\n- {name: eth0, ipv4: {enabled: false, address: [{ip: 192.0.2.1, prefix-length: 24}]}}")
		wantLines(t, kf, "ipv4", "method=disabled")
		lacks(t, kf, "ipv4", "address0")
	})
	t.Run("enabled without addresses is disabled for IPv4, link-local for IPv6", func(t *testing.T) {
		kf := only(t, "interfaces:\n- {name: eth0, ipv4: {enabled: true}, ipv6: {enabled: true}}")
		wantLines(t, kf, "ipv4", "method=disabled")
		wantLines(t, kf, "ipv6", "method=link-local", "addr-gen-mode=0")
	})
	t.Run("addr-gen-mode even when IPv6 is disabled", func(t *testing.T) {
		wantLines(t, only(t, "interfaces:\n- {name: eth0, ipv6: {enabled: false}}"), "ipv6", "addr-gen-mode=0", "method=disabled")
	})
	t.Run("DHCPv6 without autoconf", func(t *testing.T) {
		kf := only(t, "interfaces:\n- {name: eth0, ipv6: {enabled: true, dhcp: true, autoconf: false}}")
		wantLines(t, kf, "ipv6", "method=dhcp", "dhcp-duid=ll", "dhcp-iaid=mac", "ra-timeout=2147483647")
	})
	t.Run("static addresses kept alongside DHCP", func(t *testing.T) {
		kf := only(t, "interfaces:\n- {name: eth0, ipv4: {enabled: true, dhcp: true, address: [{ip: 192.0.2.1, prefix-length: 24}]}}")
		wantLines(t, kf, "ipv4", "method=auto", "address0=192.0.2.1/24")
	})
	t.Run("IPv6 link-local dropped, addresses canonical", func(t *testing.T) {
		kf := only(t, "interfaces:\n- {name: eth0, ipv6: {enabled: true, address: [{ip: 'fe80::1', prefix-length: 64}, {ip: '2001:DB8:0:0::0001', prefix-length: 64}]}}")
		wantLines(t, kf, "ipv6", "address0=2001:db8::1/64", "method=manual")
		lacks(t, kf, "ipv6", "address1")
	})
	t.Run("only link-local: no address, link-local method", func(t *testing.T) {
		wantLines(t, only(t, "interfaces:\n- {name: eth0, ipv6: {enabled: true, address: [{ip: 'fe80::1', prefix-length: 64}]}}"), "ipv6", "method=link-local")
	})
	t.Run("route destinations sanitised, metric -1 and table 0 defaulted", func(t *testing.T) {
		kf := only(t, eth0v4+"routes:\n  config:\n  - {destination: 192.0.2.5/24, next-hop-interface: eth0, metric: -1, table-id: 0}\n  - {destination: 203.0.113.7, next-hop-interface: eth0, next-hop-address: 192.0.2.1}")
		// table 0 sorts before 254 although it is written as 254.
		wantLines(t, kf, "ipv4", "route0=192.0.2.0/24,,0", "route0_options=table=254", "route1=203.0.113.7/32,192.0.2.1,0", "route1_options=table=254")
	})
	t.Run("IPv6 route sanitised", func(t *testing.T) {
		kf := only(t, "interfaces:\n- {name: eth0, ipv6: {enabled: true, address: [{ip: '2001:db8::2', prefix-length: 64}]}}\nroutes:\n  config:\n  - {destination: '2001:DB8:1::5/48', next-hop-interface: eth0, next-hop-address: 'FE80::0:1'}")
		wantLines(t, kf, "ipv6", "route0=2001:db8:1::/48,fe80::1,0", "method=manual")
	})
	t.Run("routes equal but for metric are de-duplicated", func(t *testing.T) {
		kf := only(t, eth0v4+"routes:\n  config:\n  - {destination: 198.51.100.0/24, next-hop-interface: eth0, metric: 10}\n  - {destination: 198.51.100.0/24, next-hop-interface: eth0, metric: 20}")
		wantLines(t, kf, "ipv4", "route0=198.51.100.0/24,,10")
		lacks(t, kf, "ipv4", "route1")
	})
	t.Run("route to an undefined interface is dropped, absent routes ignored", func(t *testing.T) {
		kf := only(t, eth0v4+"routes:\n  config:\n  - {destination: 198.51.100.0/24, next-hop-interface: eth7}\n  - {destination: 198.51.100.0/24, next-hop-interface: eth0, state: absent}\n  - {destination: 198.51.100.0/24, next-hop-address: '2001:db8::1', metric: -5, state: absent}")
		lacks(t, kf, "ipv4", "route")
	})
	t.Run("eleven routes sort byte-wise", func(t *testing.T) {
		var b strings.Builder
		b.WriteString(eth0v4 + "routes:\n  config:\n")
		for i := 0; i < 12; i++ {
			fmt.Fprintf(&b, "  - {destination: 198.51.%d.0/24, next-hop-interface: eth0}\n", 100+i)
		}
		body := sectionOf(only(t, b.String()), "ipv4")
		i1, i10, i10o, i11, i1o, i2 := strings.Index(body, "\nroute1="), strings.Index(body, "\nroute10="), strings.Index(body, "\nroute10_options="),
			strings.Index(body, "\nroute11="), strings.Index(body, "\nroute1_options="), strings.Index(body, "\nroute2=")
		if !(i1 >= 0 && i1 < i10 && i10 < i10o && i10o < i11 && i11 < i1o && i1o < i2) {
			t.Errorf("keys not in byte-wise order:\n%s", body)
		}
	})
	t.Run("mac upper-cased into [ethernet] of any type", func(t *testing.T) {
		kf := only(t, "interfaces:\n- {name: dummy0, type: dummy, mac-address: 'aa:bb:cc:dd:ee:0f'}")
		wantLines(t, kf, "ethernet", "cloned-mac-address=AA:BB:CC:DD:EE:0F")
		lacks(t, kf, "ethernet", "mtu")
	})
	t.Run("no [ethernet] without mac or mtu", func(t *testing.T) {
		if kf := only(t, "interfaces:\n- {name: eth0}"); strings.Contains(kf, "[ethernet]") {
			t.Errorf("unexpected [ethernet]:\n%s", kf)
		}
	})
	t.Run("empty description gives an empty [user]", func(t *testing.T) {
		if kf := only(t, "interfaces:\n- {name: eth0, description: ''}"); !strings.HasSuffix(kf, "\n\n[user]\n") {
			t.Errorf("want an empty [user] at the end:\n%s", kf)
		}
	})
	t.Run("bond mode by number, options by kernel name", func(t *testing.T) {
		kf := only(t, "interfaces:\n- {name: bond0, type: bond, link-aggregation: {mode: 4, options: {miimon: '100', xmit_hash_policy: 1, lacp_rate: fast, primary: ''}}}")
		wantLines(t, kf, "bond", "mode=802.3ad", "miimon=100", "xmit_hash_policy=layer3+4", "lacp_rate=fast")
		lacks(t, kf, "bond", "primary")
		wantLines(t, kf, "connection", "autoconnect-slaves=1", "type=bond")
	})
	t.Run("bridge without ports or stp: empty [bridge]", func(t *testing.T) {
		kf := only(t, "interfaces:\n- {name: br0, type: linux-bridge}")
		if !strings.Contains(kf, "\n[bridge]\n\n[ipv4]\n") {
			t.Errorf("want an empty [bridge] before [ipv4]:\n%s", kf)
		}
	})
	t.Run("vlan 802.1ad", func(t *testing.T) {
		kf := only(t, "interfaces:\n- {name: v1, type: vlan, vlan: {base-iface: eth0, id: 5, protocol: 802.1ad}}")
		wantLines(t, kf, "vlan", "flags=1", "id=5", "parent=eth0", "protocol=802.1ad")
	})
	t.Run("absent interface keeps no keys and makes no file", func(t *testing.T) {
		kfs, err := GenerateKeyfiles([]byte("interfaces:\n- {name: eth9, state: absent, mtu: 10, ipv6: {enabled: true}, foo: [1], ethtool: {}}"))
		if err != nil || len(kfs) != 0 {
			t.Fatalf("got %v, %v; want no files", names(kfs), err)
		}
	})
	t.Run("vlan over an absent ethernet stays", func(t *testing.T) {
		kfs, err := GenerateKeyfiles([]byte("interfaces:\n- {name: v1, type: vlan, vlan: {base-iface: eth0, id: 1}}\n- {name: eth0, state: absent}"))
		if err != nil || len(kfs) != 1 || kfs[0].Name != "v1.nmconnection" {
			t.Fatalf("got %v, %v; want v1.nmconnection", names(kfs), err)
		}
	})
	t.Run("integers read as yaml-rust and Rust read them", func(t *testing.T) {
		// Not from the vectors: yaml-rust reads 01500 as decimal and 0o as
		// octal (yaml.v3 alone would read 01500 as octal); nmstate reads
		// "+1500" with Rust's parse, which takes a leading plus.
		for in, want := range map[string]string{"01500": "mtu=1500", "0o2734": "mtu=1500", "'+1500'": "mtu=1500", "0x5dc": "mtu=1500"} {
			wantLines(t, only(t, "interfaces:\n- {name: eth0, mtu: "+in+"}"), "ethernet", want)
		}
		if _, err := GenerateKeyfiles([]byte("interfaces:\n- {name: eth0, mtu: 1_500}")); err == nil {
			t.Error("mtu 1_500 accepted")
		}
	})
	t.Run("scalars read as serde_yaml 0.8 reads them", func(t *testing.T) {
		// Not from the vectors: serde_yaml's visit_untagged_str. A plain
		// number is not a name, 0b is binary; NULL, True and an empty
		// value differ between serde_yaml 0.8 and 0.9 and are refused
		// unless quoted.
		wantLines(t, only(t, "interfaces:\n- {name: eth0, description: 'NULL'}"), "user", "nmstate.interface.description=NULL")
		if kf := only(t, "interfaces:\n- name: eth0\n  description: ''\n"); !strings.HasSuffix(kf, "\n[user]\n") {
			t.Errorf("empty description: want an empty [user]:\n%s", kf)
		}
		wantLines(t, only(t, "interfaces:\n- {name: eth0, mtu: 0b10111011100}"), "ethernet", "mtu=1500")
		wantLines(t, only(t, "interfaces:\n- {name: bond0, type: bond, link-aggregation: {mode: 0x1}}"), "bond", "mode=active-backup")
		for _, in := range []string{
			"interfaces:\n- {name: 1234}",
			"interfaces:\n- {name: eth0, description: true}",
			"interfaces:\n- {name: eth0, ipv4: {enabled: 2}}",
			"interfaces:\n- {name: eth0, description: null}",
			"interfaces:\n- {name: eth0, description: NULL}",
			"interfaces:\n- {name: eth0, description: True}",
			"interfaces:\n- name: eth0\n  description:\n",
			eth0v4 + "routes:\n  config:\n  - destination: 0.0.0.0/0\n    next-hop-interface: eth0\n    next-hop-address:\n",
		} {
			if kfs, err := GenerateKeyfiles([]byte(in)); err == nil {
				t.Errorf("accepted %q: %v", in, names(kfs))
			}
		}
	})
	t.Run("no type is ethernet", func(t *testing.T) {
		wantLines(t, only(t, "interfaces:\n- {name: eth0}"), "connection", "type=802-3-ethernet", "uuid=dfd202f5-562f-5f07-8f2a-a7717756fb70")
	})
	t.Run("no dns-resolver, no DNS keys", func(t *testing.T) {
		if kf := only(t, eth0v4); strings.Contains(kf, "\ndns") {
			t.Errorf("unexpected DNS keys:\n%s", kf)
		}
	})
}

// TestUUIDCheckValues: uuids gen_conf wrote (testdata/golden, testdata/vectors).
func TestUUIDCheckValues(t *testing.T) {
	for in, want := range map[string]string{
		"ethernet://eth0":    "dfd202f5-562f-5f07-8f2a-a7717756fb70",
		"bond://bond0":       "925b4a95-2de0-5b2d-bcf5-8b684a7e9cb4",
		"linux-bridge://br0": "21dd2f8f-7814-535b-8225-a001da95c87e",
		"vlan://eth0.100":    "fe885346-7e38-5cc2-9b35-2043508caa28",
		"dummy://dummy0":     "a1a58a18-f3f3-5eef-9811-1bf9cc86631c",
		"ethernet://eth2":    "21373057-f376-5091-afb6-64de925c23ed",
		"ethernet://eth3":    "7e211aea-3d14-59cf-a4fa-be91dac5dbba",
		"ethernet://enp1s0":  "11655ff4-09bf-500f-9f38-9bfcc91ab36b",
	} {
		if got := UUIDv5(namespaceURL, in); got != want {
			t.Errorf("uuid5(URL, %q) = %s, want %s", in, got, want)
		}
	}
}

// TestDNSPlacement: docs/nmstate.md, dns-resolver row of the subset table.
func TestDNSPlacement(t *testing.T) {
	t.Run("static interface preferred over an earlier DHCP one", func(t *testing.T) {
		kfs, err := GenerateKeyfiles([]byte("interfaces:\n- {name: eth0, ipv4: {enabled: true, dhcp: true}}\n- {name: eth1, ipv4: {enabled: true, address: [{ip: 192.0.2.2, prefix-length: 24}]}}\ndns-resolver:\n  config: {server: [192.0.2.53]}"))
		if err != nil || len(kfs) != 2 {
			t.Fatalf("%v %v", names(kfs), err)
		}
		lacks(t, string(kfs[0].Content), "ipv4", "dns")
		wantLines(t, string(kfs[1].Content), "ipv4", "dns=192.0.2.53", "dns-priority=40")
	})
	t.Run("DHCP interface when none is static, in YAML order", func(t *testing.T) {
		kfs, err := GenerateKeyfiles([]byte("interfaces:\n- {name: eth1, ipv4: {enabled: true, dhcp: true}}\n- {name: eth0, ipv4: {enabled: true, dhcp: true}}\ndns-resolver:\n  config: {server: [192.0.2.53]}"))
		if err != nil || len(kfs) != 2 || kfs[1].Name != "eth1.nmconnection" {
			t.Fatalf("%v %v", names(kfs), err)
		}
		wantLines(t, string(kfs[1].Content), "ipv4", "dns=192.0.2.53")
		lacks(t, string(kfs[0].Content), "ipv4", "dns")
	})
	t.Run("IPv4 first: search with IPv4", func(t *testing.T) {
		kf := only(t, "interfaces:\n- {name: eth0, ipv4: {enabled: true, dhcp: true}, ipv6: {enabled: true, dhcp: true, autoconf: true}}\ndns-resolver:\n  config: {server: [192.0.2.53, '2001:db8::53'], search: [example.com]}")
		wantLines(t, kf, "ipv4", "dns=192.0.2.53", "dns-search=example.com", "dns-priority=40")
		wantLines(t, kf, "ipv6", "dns=2001:db8::53", "dns-priority=50")
		lacks(t, kf, "ipv6", "dns-search")
	})
	t.Run("search only: IPv6 auto before IPv4 auto", func(t *testing.T) {
		kf := only(t, "interfaces:\n- {name: eth0, ipv4: {enabled: true, dhcp: true}, ipv6: {enabled: true, dhcp: true, autoconf: true}}\ndns-resolver:\n  config: {search: [example.com, example.org]}")
		wantLines(t, kf, "ipv6", "dns-search=example.com;example.org", "dns-priority=40")
		lacks(t, kf, "ipv6", "dns=")
		lacks(t, kf, "ipv4", "dns")
	})
	t.Run("search only: IP-enabled when none is auto", func(t *testing.T) {
		kf := only(t, "interfaces:\n- {name: eth0, ipv4: {enabled: true, address: [{ip: 192.0.2.2, prefix-length: 24}]}, ipv6: {enabled: false}}\ndns-resolver:\n  config: {search: [example.com]}")
		wantLines(t, kf, "ipv4", "dns-search=example.com", "dns-priority=40")
	})
	t.Run("empty server and search: nothing", func(t *testing.T) {
		if kf := only(t, eth0v4+"dns-resolver:\n  config: {server: [], search: []}"); strings.Contains(kf, "\ndns") {
			t.Errorf("unexpected DNS keys:\n%s", kf)
		}
	})
}
