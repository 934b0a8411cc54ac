package catrust

import (
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"
)

// parseCAs checks announced PEM: bounded, certificates only, each a CA.
func parseCAs(b []byte) ([]*x509.Certificate, error) {
	if len(b) > MaxPEM {
		return nil, fmt.Errorf("%d bytes, more than %d", len(b), MaxPEM)
	}
	var certs []*x509.Certificate
	for rest := b; ; {
		var blk *pem.Block
		blk, rest = pem.Decode(rest)
		if blk == nil {
			break
		}
		if blk.Type != "CERTIFICATE" {
			return nil, fmt.Errorf("a %s block, want certificates only", blk.Type)
		}
		c, err := x509.ParseCertificate(blk.Bytes)
		if err != nil {
			return nil, err
		}
		if !c.IsCA {
			return nil, fmt.Errorf("%q is not a CA certificate", c.Subject.CommonName)
		}
		if certs = append(certs, c); len(certs) > maxCerts {
			return nil, fmt.Errorf("more than %d certificates", maxCerts)
		}
	}
	if len(certs) == 0 {
		return nil, errors.New("no certificate in it")
	}
	return certs, nil
}

// canVerify refuses a CA that could not verify a certificate for host at
// now, so that nothing is kept pending that can never be proven
// (docs/ca-rotation.md, "What is refused").
func canVerify(c *x509.Certificate, host string, now time.Time) error {
	name := fmt.Sprintf("%q", c.Subject.CommonName)
	switch {
	case !c.BasicConstraintsValid || !c.IsCA:
		return fmt.Errorf("%s is not a CA certificate", name)
	case now.Before(c.NotBefore):
		return fmt.Errorf("%s is not valid before %s", name, c.NotBefore.UTC().Format(time.RFC3339))
	case now.After(c.NotAfter):
		return fmt.Errorf("%s expired on %s", name, c.NotAfter.UTC().Format(time.RFC3339))
	case c.KeyUsage != 0 && c.KeyUsage&x509.KeyUsageCertSign == 0:
		return fmt.Errorf("%s may not sign certificates (key usage)", name)
	case len(c.UnhandledCriticalExtensions) > 0:
		return fmt.Errorf("%s has a critical extension no verifier handles", name)
	}
	if !permits(c, host) {
		return fmt.Errorf("%s is name-constrained away from %s", name, host)
	}
	return nil
}

// permits is the CA's name constraints applied to the registration host,
// as a verifier applies them to a certificate naming it.
func permits(c *x509.Certificate, host string) bool {
	if ip := net.ParseIP(host); ip != nil {
		in := func(nets []*net.IPNet) bool {
			for _, n := range nets {
				if n.Contains(ip) {
					return true
				}
			}
			return false
		}
		return !in(c.ExcludedIPRanges) && (len(c.PermittedIPRanges) == 0 || in(c.PermittedIPRanges))
	}
	h := strings.TrimSuffix(strings.ToLower(host), ".")
	in := func(domains []string) bool {
		for _, d := range domains {
			if domainMatch(h, strings.ToLower(d)) {
				return true
			}
		}
		return false
	}
	return !in(c.ExcludedDNSDomains) && (len(c.PermittedDNSDomains) == 0 || in(c.PermittedDNSDomains))
}

// domainMatch is RFC 5280's DNS constraint: "a.example" covers itself and
// its subdomains, ".a.example" its subdomains only, "" everything.
func domainMatch(host, constraint string) bool {
	if constraint == "" {
		return true
	}
	if strings.HasPrefix(constraint, ".") {
		return strings.HasSuffix(host, constraint)
	}
	return host == constraint || strings.HasSuffix(host, "."+constraint)
}

// verifiedBy: the chain a server presented (leaf first) verifies for host
// against the CAs of caPEM alone, no system pool.
func verifiedBy(caPEM []byte, peer []*x509.Certificate, host string, now time.Time) error {
	if len(peer) == 0 {
		return errors.New("the server presented no certificate")
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(caPEM) {
		return errors.New("the CA in force holds no certificate")
	}
	inter := x509.NewCertPool()
	for _, c := range peer[1:] {
		inter.AddCert(c)
	}
	_, err := peer[0].Verify(x509.VerifyOptions{Roots: roots, Intermediates: inter, DNSName: host,
		CurrentTime: now, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
	return err
}

// sameCerts: every certificate of certs is in the PEM text have.
func sameCerts(certs []*x509.Certificate, have []byte) bool {
	if have == nil {
		return false
	}
	var got []*x509.Certificate
	for rest := have; ; {
		var blk *pem.Block
		if blk, rest = pem.Decode(rest); blk == nil {
			break
		}
		if c, err := x509.ParseCertificate(blk.Bytes); err == nil {
			got = append(got, c)
		}
	}
	for _, d := range certs {
		found := false
		for _, g := range got {
			found = found || d.Equal(g)
		}
		if !found {
			return false
		}
	}
	return true
}
