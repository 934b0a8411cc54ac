package protocol

import (
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/gorilla/websocket"
)

func TestRegistrationToken(t *testing.T) {
	for in, want := range map[string]string{
		"https://h/elemental/registration/abc123":         "abc123",
		"https://h:8443/elemental/registration/abc123/":   "abc123",
		"http://h/elemental/registration/abc123?x=1#f":    "abc123",
		"https://h/prefix/registration/tok/extra":         "tok",
		"https://h/custom/path/tok42":                     "tok42",
		"https://h/":                                      "",
		"https://h":                                       "",
		"ftp://h/elemental/registration/tok%zz":           "tok%zz",
		"https://h/elemental/registration/a%2Fb-tokentok": "a%2Fb-tokentok",
	} {
		if got := RegistrationToken(in); got != want {
			t.Errorf("%s: token %q, want %q", in, got, want)
		}
	}
}

func TestRedactURL(t *testing.T) {
	for in, want := range map[string]string{
		"https://h/elemental/registration/abc123":      "https://h/elemental/registration/REDACTED",
		"http://h:80/elemental/registration/t?x=1":     "http://h:80/elemental/registration/REDACTED?x=1",
		"https://h/custom/t":                           "https://h/custom/REDACTED",
		"https://h/":                                   "https://h/",
		"ftp://h/elemental/registration/tok%zz":        "ftp://h/elemental/registration/REDACTED",
		"https://user:pw@h/elemental/registration/tok": "https://user:xxxxx@h/elemental/registration/REDACTED",
		"https://user@h/elemental/registration/tok":    "https://user@h/elemental/registration/REDACTED",
	} {
		if got := RedactURL(in); got != want {
			t.Errorf("%s: %q, want %q", in, got, want)
		}
	}
}

func TestRedactText(t *testing.T) {
	tok := "Tok3n/with space"
	for _, s := range []string{
		"failed to find machine registration with registration token " + tok,
		"GET /elemental/registration/" + tok + " 404",
		"escaped: " + "Tok3n%2Fwith%20space" + " and " + "Tok3n%2Fwith+space",
	} {
		if got := Redact(s, tok); strings.Contains(got, "Tok3n") {
			t.Errorf("%q -> %q", s, got)
		}
	}
	// Short tokens go only where they stand in a registration path.
	if got := Redact("the t in text, /elemental/registration/t", "t"); got != "the t in text, /elemental/registration/REDACTED" {
		t.Errorf("short token: %q", got)
	}
	// The agent's own files are no registration URL.
	for _, local := range []string{"/oem/registration/state.yaml", "would write /r/oem/registration/config.yaml (0600)"} {
		if got := Redact(local, "Tok3n-long"); got != local {
			t.Errorf("a local path was redacted: %q -> %q", local, got)
		}
	}
}

// echoServer answers like a registration server that knows only
// rightToken: a 404 whose body names the token asked for (as upstream and
// regserver do), and for the right token a MsgError and a close frame that
// echo it.
func echoServer(rightToken string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tok := r.URL.Path[strings.LastIndexByte(r.URL.Path, '/')+1:]
		if tok != rightToken {
			http.Error(w, "failed to find machine registration with registration token "+tok, http.StatusNotFound)
			return
		}
		ws, err := (&websocket.Upgrader{}).Upgrade(w, r, nil)
		if err != nil {
			return
		}
		defer ws.Close()
		ws.WriteMessage(websocket.BinaryMessage, []byte{0x01})
		for {
			_, b, err := ws.ReadMessage()
			if err != nil {
				return
			}
			switch MsgType(b[0]) {
			case MsgVersion:
				ws.WriteMessage(websocket.BinaryMessage, []byte{0x05, 12})
			case MsgGet:
				ws.WriteMessage(websocket.BinaryMessage, append([]byte{0x08}, "message: registration "+tok+" is disabled\n"...))
			case MsgNetworkConfig:
				ws.WriteMessage(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseInternalServerErr, "no network for "+tok))
				return
			default:
				ws.WriteMessage(websocket.BinaryMessage, []byte{0x01})
			}
		}
	})
}

// TestClientErrorsNeverCarryTheToken: over http and https, with the right
// and a wrong token, nothing the client returns prints the token.
func TestClientErrorsNeverCarryTheToken(t *testing.T) {
	const right = "RightTokenSecret-9f8e7d"
	const wrong = "WrongTokenSecret-1a2b3c"
	plain := httptest.NewServer(echoServer(right))
	defer plain.Close()
	tlsSrv := httptest.NewTLSServer(echoServer(right))
	defer tlsSrv.Close()
	ca := string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: tlsSrv.Certificate().Raw}))
	if _, err := x509.ParseCertificate(tlsSrv.Certificate().Raw); err != nil {
		t.Fatal(err)
	}
	for _, base := range []string{plain.URL, tlsSrv.URL} {
		for _, tok := range []string{right, wrong} {
			url := base + "/elemental/registration/" + tok
			var printed []string
			cc, err := Dial(t.Context(), DialOptions{URL: url, CACert: ca, NoSystemPool: true}, Plain{AuthKind: "mac", ID: "aa"})
			if err != nil {
				printed = append(printed, err.Error(), fmt.Sprintf("%v|%+v|%#v", err, err, err))
				// The status and body stay reachable by type (exit codes),
				// the body without the token.
				var he *HandshakeError
				if tok == wrong && (!errors.As(err, &he) || he.HTTPStatus() != http.StatusNotFound) {
					t.Errorf("%s: a 404 is not a *HandshakeError: %v", RedactURL(url), err)
				}
				if he != nil {
					printed = append(printed, he.Body)
				}
			} else {
				_, err = cc.Register(t.Context(), &Payloads{NoSMBIOS: true}, &Config{})
				var er *ErrorReply
				if err == nil || !errors.As(err, &er) {
					t.Fatalf("%s: register: %v", RedactURL(url), err)
				}
				printed = append(printed, err.Error(), er.Message)
				cc.Close()
				cc, err = Dial(t.Context(), DialOptions{URL: url, CACert: ca, NoSystemPool: true}, Plain{AuthKind: "mac", ID: "aa"})
				if err != nil {
					t.Fatal(err)
				}
				_, err = cc.ExplicitNetworkConfig(t.Context())
				printed = append(printed, fmt.Sprint(err))
				cc.Close()
			}
			for _, p := range printed {
				if strings.Contains(p, tok) || strings.Contains(p, "TokenSecret") {
					t.Errorf("%s: printed the token: %s", RedactURL(url), p)
				}
			}
			t.Logf("%s: %q", RedactURL(url), printed[0])
		}
	}
	if _, err := WebSocketURL("ftp://h/elemental/registration/" + right); err == nil || strings.Contains(err.Error(), right) {
		t.Errorf("bad scheme: %v", err)
	}
}

// TestRedactError: net/http's error quotes the whole URL.
func TestRedactError(t *testing.T) {
	url := "http://127.0.0.1:1/elemental/registration/HttpTokenSecret-42"
	_, err := http.Get(url)
	if err == nil || !strings.Contains(err.Error(), "HttpTokenSecret") {
		t.Fatalf("expected an error quoting the URL: %v", err)
	}
	red := RedactError(err, url)
	if strings.Contains(red.Error(), "HttpTokenSecret") || !errors.Is(red, err) {
		t.Errorf("%v", red)
	}
	if RedactError(nil, url) != nil {
		t.Error("nil error not nil")
	}
}

// A known secret goes however short it is: a short one where it stands as
// a whole scalar (so "pw" in "pwd" or "/usr/pw/x" is left, the text stays
// readable), a longer one anywhere, a multi-line one line by line.
func TestRedactSecret(t *testing.T) {
	for _, c := range []struct{ secret, in, want string }{
		{"pw1", "passwd: pw1\n", "passwd: REDACTED\n"},
		{"pw1", "passwd: \"pw1\"\n", "passwd: \"REDACTED\"\n"},
		{"7", "passwd: '7' # set by ops\n", "passwd: 'REDACTED' # set by ops\n"},
		{"ab", "- ab\n- ab\n  list: [ab,ab, ab]\n", "- REDACTED\n- REDACTED\n  list: [REDACTED,REDACTED, REDACTED]\n"},
		{"ab", `{"password":"ab","n":"ab"}`, `{"password":"REDACTED","n":"REDACTED"}`},
		{"ab", "passwd: \"abc\"\nx: \"ab\" y\n", "passwd: \"abc\"\nx: \"ab\" y\n"},
		{"s3", "  list: |\n    root:s3\n", "  list: |\n    root:REDACTED\n"},
		{"ab", "pwd: abc\npath: /usr/ab/x\nab#c: x\n", "pwd: abc\npath: /usr/ab/x\nab#c: x\n"},
		{"pw12", "x: pw12\nin a pw12 sentence\n", "x: REDACTED\nin a REDACTED sentence\n"},
		{"root:one\nadmin:two", "list: |\n  root:one\n  admin:two\n", "list: |\n  REDACTED\n  REDACTED\n"},
		{"  ", "a:  \n", "a:  \n"},
		{"", "a: b\n", "a: b\n"},
	} {
		if got := RedactSecret(c.in, c.secret); got != c.want {
			t.Errorf("RedactSecret(%q, %q) =\n%q, want\n%q", c.in, c.secret, got, c.want)
		}
	}
}
