package agent

import (
	"strings"
	"testing"
)

func TestRedactURLHidesTheToken(t *testing.T) {
	for in, want := range map[string]string{
		"https://rancher.example.com/elemental/registration/s3cr3t-tok":   "https://rancher.example.com/elemental/registration/REDACTED",
		"http://u:pw@10.0.0.1:8080/elemental/registration/s3cr3t-tok?x=1": "http://u:xxxxx@10.0.0.1:8080/elemental/registration/REDACTED",
		"https://host/": "https://host/",
	} {
		got := RedactURL(in)
		if got != want || strings.Contains(got, "s3cr3t") {
			t.Errorf("RedactURL(%q) = %q, want %q", in, got, want)
		}
	}
}
