package localconfig

import (
	"fmt"
	"maps"
	"net/url"

	"gopkg.in/yaml.v3"

	"github.com/nodereg/nodereg/internal/safefile"
	"github.com/nodereg/nodereg/netpolicy"
	"github.com/nodereg/nodereg/protocol"
)

// KeepLocal undoes, in merged (the local config with the server's reply
// decoded on top, as upstream does), what the server may not decide: keys
// that name local resources or steer nodereg itself come only from the
// local config and flags (local). The server is untrusted: a path or a
// device it names would be read, written or copied into the installed
// system by root (docs/reliability.md, "Hostile server"). It returns one warning per key the
// server tried to change, for the caller to log.
//
// Kept local: registration.tpm-device, network-config, no-toolkit and
// labels. registration.ca-cert from the server is taken only as PEM text
// (at most safefile.MaxPEM bytes), never as a path. registration.url may
// move, but not from https to http nor to another scheme. elemental.install
// and reset stay the server's, as upstream: the registration defines how
// the machine is installed.
func KeepLocal(local protocol.Config, merged *protocol.Config) []string {
	var warns []string
	ignored := func(key, why string) {
		warns = append(warns, fmt.Sprintf("the server's elemental.registration.%s is ignored: %s", key, why))
	}
	l, m := &local.Elemental.Registration, &merged.Elemental.Registration
	const localOnly = "it names a local resource; set it in the local config or with a flag"
	if m.TPMDevice != l.TPMDevice {
		m.TPMDevice = l.TPMDevice
		ignored("tpm-device", localOnly)
	}
	if m.NetworkConfig != l.NetworkConfig {
		m.NetworkConfig = l.NetworkConfig
		ignored("network-config", "it is nodereg's own setting; set it in the local config")
	}
	if m.NoToolkit != l.NoToolkit {
		m.NoToolkit = l.NoToolkit
		ignored("no-toolkit", "it is a local setting (docs/protocol.md §6.5)")
	}
	if !maps.Equal(m.Labels, l.Labels) {
		m.Labels = maps.Clone(l.Labels)
		ignored("labels", "they are local settings (docs/protocol.md §6.5)")
	}
	if m.CACert != l.CACert {
		if !protocol.IsCAPEM(m.CACert) {
			m.CACert = l.CACert
			ignored("ca-cert", "it is not PEM text, and a path is taken only from the local config")
		} else if err := safefile.CheckPEM([]byte(m.CACert)); err != nil {
			m.CACert = l.CACert
			ignored("ca-cert", err.Error())
		}
	}
	if m.URL != l.URL {
		if why := urlChange(l.URL, m.URL); why != "" {
			m.URL = l.URL
			ignored("url", why)
		}
	}
	return warns
}

// MovedURL is the warning for a reply that moved the registration URL
// from local's to merged's (after KeepLocal); "" when it did not. The move
// holds for this run only: nothing persists it at boot, so the next boot
// asks local's URL again, and the reachability check after a live apply
// asks that one (docs/protocol.md §6.5). Both URLs are shown redacted.
func MovedURL(local, merged protocol.Config) string {
	from, to := local.Elemental.Registration.URL, merged.Elemental.Registration.URL
	if from == to {
		return ""
	}
	return fmt.Sprintf("the server moves elemental.registration.url from %s to %s for this run only: the next boot, and the reachability check after a live apply, ask the local config's URL",
		protocol.RedactURL(from), protocol.RedactURL(to))
}

// urlChange says why the server may not move the registration URL from old
// to next; "" when it may.
func urlChange(old, next string) string {
	nu, err := url.Parse(next)
	if err != nil || nu.Host == "" || (nu.Scheme != "http" && nu.Scheme != "https") {
		return fmt.Sprintf("%q is not an http(s) URL", protocol.RedactURL(next))
	}
	if ou, err := url.Parse(old); err == nil && ou.Scheme == "https" && nu.Scheme != "https" {
		return "it would move the registration from https to plain http"
	}
	return ""
}

// ServerSent returns one warning per local-only key a server reply (a
// MsgConfig payload) carries that protocol.Config has no field for, so
// KeepLocal cannot see it: the network policy (netpolicy.Key). It is
// dropped in any case; the warning makes the attempt visible. doc is the
// payload as the protocol decoder parsed it (protocol.Reply.Doc).
func ServerSent(doc *yaml.Node) []string {
	if w := netpolicy.ServerSentWarning(doc); w != "" {
		return []string{w}
	}
	return nil
}
