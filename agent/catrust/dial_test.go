package catrust

import (
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/nodereg/nodereg/internal/testutil/testpki"
	"github.com/nodereg/nodereg/protocol"
)

// TestCanVerifyAgreesWithTheDial holds canVerify to the real thing: for
// each CA, a TLS server on loopback presents a server certificate it
// issued for the host, and the agent's dial (protocol.TLSConfig, the CA
// alone, ServerName the host) either completes the handshake or not.
// canVerify must refuse every CA whose server the dial refuses (docs/reliability.md:
// a clientAuth-only CA was kept pending, then every node exited 78 on
// "incompatible key usage" once the server switched to it), and take
// every CA whose server the dial takes.
func TestCanVerifyAgreesWithTheDial(t *testing.T) {
	_, loop, _ := net.ParseCIDR("127.0.0.0/8")
	_, other, _ := net.ParseCIDR("10.0.0.0/8")
	for _, c := range []struct {
		name, host string
		edit       func(*x509.Certificate)
	}{
		{name: "plain", host: regHost},
		{name: "plain, by address", host: "127.0.0.1"},
		{name: "EKU serverAuth", host: regHost, edit: func(c *x509.Certificate) {
			c.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}
		}},
		{name: "EKU any", host: regHost, edit: func(c *x509.Certificate) { c.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageAny} }},
		{name: "EKU clientAuth only", host: regHost, edit: func(c *x509.Certificate) { c.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth} }},
		{name: "EKU codeSigning and email", host: regHost, edit: func(c *x509.Certificate) {
			c.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageCodeSigning, x509.ExtKeyUsageEmailProtection}
		}},
		{name: "EKU unknown only", host: regHost, edit: func(c *x509.Certificate) {
			c.UnknownExtKeyUsage = []asn1.ObjectIdentifier{{1, 3, 6, 1, 4, 1, 99999, 1}}
		}},
		{name: "key usage without certSign", host: regHost, edit: func(c *x509.Certificate) { c.KeyUsage = x509.KeyUsageDigitalSignature }},
		{name: "DNS permitted elsewhere", host: regHost, edit: func(c *x509.Certificate) { c.PermittedDNSDomains = []string{"other.example"} }},
		{name: "DNS excluded", host: regHost, edit: func(c *x509.Certificate) { c.ExcludedDNSDomains = []string{regHost} }},
		{name: "DNS permitted, the host's domain", host: regHost, edit: func(c *x509.Certificate) { c.PermittedDNSDomains = []string{".example"} }},
		{name: "IP excluded", host: "127.0.0.1", edit: func(c *x509.Certificate) { c.ExcludedIPRanges = []*net.IPNet{loop} }},
		{name: "IP permitted elsewhere", host: "127.0.0.1", edit: func(c *x509.Certificate) { c.PermittedIPRanges = []*net.IPNet{other} }},
		{name: "IP permitted, the host's range", host: "127.0.0.1", edit: func(c *x509.Certificate) { c.PermittedIPRanges = []*net.IPNet{loop} }},
		{name: "expired", host: regHost, edit: func(c *x509.Certificate) {
			c.NotBefore, c.NotAfter = time.Now().Add(-48*time.Hour), time.Now().Add(-time.Hour)
		}},
		{name: "not yet valid", host: regHost, edit: func(c *x509.Certificate) { c.NotBefore = time.Now().Add(time.Hour) }},
		{name: "an unknown critical extension", host: regHost, edit: func(c *x509.Certificate) {
			c.ExtraExtensions = []pkix.Extension{{Id: asn1.ObjectIdentifier{1, 3, 6, 1, 4, 1, 99999, 2}, Critical: true, Value: []byte{5, 0}}}
		}},
	} {
		t.Run(strings.ReplaceAll(c.name, " ", "_"), func(t *testing.T) {
			ca := testpki.NewWith(t, "ca", c.edit)
			dialErr := dial(t, ca, c.host)
			cert, err := parseCAs(ca.CertPEM())
			if err != nil {
				t.Fatal(err)
			}
			judged := canVerify(cert[0], c.host, time.Now())
			switch {
			case dialErr != nil && judged == nil:
				t.Errorf("the dial refuses its server (%v), canVerify takes the CA", dialErr)
			case dialErr == nil && judged != nil:
				t.Errorf("the dial takes its server, canVerify refuses the CA: %v", judged)
			}
		})
	}
}

// dial is the agent's TLS dial to a loopback server presenting a server
// certificate ca issued for host (the dial's ServerName: no name is
// looked up).
func dial(t *testing.T, ca *testpki.CA, host string) error {
	t.Helper()
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{ca.Issue(t, host)}})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		_ = c.(*tls.Conn).Handshake()
		c.Close()
	}()
	tc, err := protocol.TLSConfig(string(ca.CertPEM()), true)
	if err != nil {
		t.Fatal(err)
	}
	tc.ServerName = host
	c, err := tls.DialWithDialer(&net.Dialer{Timeout: 10 * time.Second}, "tcp", ln.Addr().String(), tc)
	if err != nil {
		return err
	}
	return c.Close()
}
