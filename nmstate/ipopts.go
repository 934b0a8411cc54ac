package nmstate

import (
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// ipOpts are the DHCP/autoconf and addressing options of one ipv4/ipv6
// block (docs/nmstate.md, "IP options"). nil pointers: not given.
type ipOpts struct {
	autoDNS, autoRoutes, autoGateway *bool
	autoTable, autoMetric            *uint64
	clientID, duid                   string // as given; "" = not given
	addrGenMode                      string
	sendHostname                     *bool
	customHostname                   string
	token                            string
}

// ipOptKeys are the IP keys parseIPOpt reads (both families unless noted in
// parseIP).
var ipOptKeys = []string{"auto-dns", "auto-routes", "auto-gateway", "auto-route-table-id", "auto-route-metric",
	"dhcp-client-id", "dhcp-duid", "addr-gen-mode", "dhcp-send-hostname", "dhcp-custom-hostname", "token"}

// ipv6OnlyKeys are refused under ipv4 as nmstate refuses them.
var ipv6OnlyKeys = []string{"dhcp-duid", "token", "addr-gen-mode"}

// nmClientIDs and nmDUIDs are the words NetworkManager takes for
// ipv4.dhcp-client-id / ipv6.dhcp-duid besides hex bytes; nmstate passes
// any text through, NetworkManager refuses the rest ("invalid DUID").
var (
	nmClientIDs = []string{"mac", "perm-mac", "duid", "ipv6-duid", "stable", "none"}
	nmDUIDs     = []string{"ll", "llt", "lease", "stable-ll", "stable-llt", "stable-uuid"}
)

func parseIPOpt(ip *ipConf, f field) error {
	o := &ip.opts
	var err error
	boolp := func(dst **bool) {
		var b bool
		if b, err = boolean(f.path, f.val); err == nil {
			*dst = &b
		}
	}
	u32p := func(dst **uint64) {
		var v uint64
		if v, err = unsigned(f.path, f.val, maxU32); err == nil {
			*dst = &v
		}
	}
	switch f.key {
	case "auto-dns":
		boolp(&o.autoDNS)
	case "auto-routes":
		boolp(&o.autoRoutes)
	case "auto-gateway":
		boolp(&o.autoGateway)
	case "dhcp-send-hostname":
		boolp(&o.sendHostname)
	case "auto-route-table-id":
		u32p(&o.autoTable)
	case "auto-route-metric":
		u32p(&o.autoMetric)
	case "dhcp-client-id":
		if o.clientID, err = str(f.path, f.val, maxTextLen, true); err == nil {
			switch o.clientID {
			case "ll", "iaid+duid":
			default:
				err = checkNMWord(f.path, o.clientID, nmClientIDs, "ipv4.dhcp-client-id")
			}
		}
	case "dhcp-duid":
		if o.duid, err = str(f.path, f.val, maxTextLen, true); err == nil {
			err = checkNMWord(f.path, o.duid, nmDUIDs, "ipv6.dhcp-duid")
		}
	case "addr-gen-mode":
		if o.addrGenMode, err = str(f.path, f.val, maxTextLen, true); err == nil && o.addrGenMode != "eui64" && o.addrGenMode != "stable-privacy" {
			err = invalid(f.path, "unknown variant `%s`, expected `eui64` or `stable-privacy`", o.addrGenMode)
		}
	case "dhcp-custom-hostname":
		if o.customHostname, err = str(f.path, f.val, maxDNSSearchLength, true); err == nil {
			err = checkHostname(f.path, o.customHostname)
		}
	case "token":
		var s string
		if s, err = str(f.path, f.val, maxTextLen, true); err == nil {
			t, perr := parseIPAddr(s)
			if perr != nil || !t.Is6() {
				return invalid(f.path, "Invalid IPv6 token %q", s)
			}
			o.token = t.String()
		}
	}
	return err
}

// checkNMWord accepts one of NetworkManager's words or colon-separated hex
// bytes: what NetworkManager's keyfile reader takes for the property.
func checkNMWord(path, v string, words []string, prop string) error {
	for _, w := range words {
		if v == w {
			return nil
		}
	}
	if isHexBytes(v) {
		return nil
	}
	return unsupported(path, "%q: nmstate writes it as is, and NetworkManager refuses it for %s (it takes %s or hex bytes)", v, prop, strings.Join(words, ", "))
}

func isHexBytes(v string) bool {
	parts := strings.Split(v, ":")
	if len(parts) < 2 {
		return false
	}
	for _, p := range parts {
		if len(p) != 2 || !isHex(p[0]) || !isHex(p[1]) {
			return false
		}
	}
	return true
}

// checkHostname keeps a DHCP host name to letters, digits, '-' and '.'.
func checkHostname(path, s string) error {
	if err := checkSearch(path, s); err != nil {
		return err
	}
	if strings.Contains(s, "_") {
		return unsupported(path, "host name %q holds '_'", s)
	}
	return nil
}

// writeAuto writes the keys of a DHCP or autoconf section (settings/ip.rs).
func (ip *ipConf) writeAuto(s *section, v6 bool) {
	o := ip.opts
	not := func(b *bool) string { return strconv.FormatBool(b != nil && !*b) }
	s.set("ignore-auto-dns", not(o.autoDNS))
	s.set("ignore-auto-routes", not(o.autoRoutes))
	s.set("never-default", not(o.autoGateway))
	if o.autoTable != nil {
		s.set("route-table", uitoa(*o.autoTable))
	}
	if o.autoMetric != nil {
		s.set("route-metric", uitoa(*o.autoMetric))
	}
	send := o.sendHostname == nil || *o.sendHostname
	s.set("dhcp-send-hostname", strconv.FormatBool(send))
	if send && o.customHostname != "" {
		if !v6 && strings.Contains(o.customHostname, ".") {
			s.set("dhcp-fqdn", o.customHostname)
		} else {
			s.set("dhcp-hostname", o.customHostname)
		}
	}
	if v6 {
		s.set("dhcp-duid", cmpOr(o.duid, "ll"))
		s.set("dhcp-iaid", "mac")
		s.set("ra-timeout", forever)
		s.set("token", o.token)
		return
	}
	switch o.clientID {
	case "", "ll":
		s.set("dhcp-client-id", "mac")
	case "iaid+duid":
		s.set("dhcp-client-id", "duid")
	default:
		s.set("dhcp-client-id", o.clientID)
	}
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// waitIP maps wait-ip to (ipv4 may-fail, ipv6 may-fail).
var waitIP = map[string][2]string{
	"any": {"true", "true"}, "ipv4": {"false", "true"}, "ipv6": {"true", "false"}, "ipv4+ipv6": {"false", "false"},
}

func parseWaitIP(path string, n *yaml.Node) (string, error) {
	s, err := str(path, n, maxTextLen, true)
	if err != nil {
		return "", err
	}
	if _, ok := waitIP[s]; !ok {
		return "", invalid(path, "unknown variant `%s`, expected one of `any`, `ipv4`, `ipv6`, `ipv4+ipv6`", s)
	}
	return s, nil
}
