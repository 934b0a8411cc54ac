package labeltmpl

import (
	"bytes"
	"encoding/json"
	"regexp"
	"strings"
	"testing"

	"github.com/nodereg/nodereg/internal/vectors"
)

func vectorSMBIOS(t *testing.T) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(vectors.Read(t, "upstream-smbios.json"), &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func TestMachineNameFromSMBIOS(t *testing.T) {
	data := Data(vectorSMBIOS(t), map[string]any{"Runtime": map[string]any{"Hostname": "node-1"}})
	got, err := Render("m-${System Information/UUID}", data, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got != "m-4c4c4544-0042-3010-8058-b4c04f4e4e32" {
		t.Fatalf("name = %q", got)
	}
	got, err = Render("${System Information/Manufacturer}-${Runtime/Hostname}", data, nil)
	if err != nil || got != "QEMU-node-1" {
		t.Fatalf("got %q, %v", got, err)
	}
	if n := SanitizeName("Srv_${x}" + got); n != "srv---x-qemu-node-1" {
		t.Fatalf("SanitizeName = %q", n)
	}
}

func TestRenderErrors(t *testing.T) {
	data := Data(vectorSMBIOS(t))
	for tmpl, want := range map[string]string{
		"m-${System Information/Nope}":   "${System Information/Nope}: no value at \"Nope\"",
		"m-${BIOS Information}":          "not a string",
		"${BIOS Information/Vendor/Sub}": "parent is not a map",
		"${Random/Hex/33}":               "not in 1..32",
		"${Random/Whatever}":             "unknown Random variable",
	} {
		_, err := Render(tmpl, data, nil)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Render(%q) err = %v, want %q", tmpl, err, want)
		}
	}
}

func TestRandomFamily(t *testing.T) {
	seq := bytes.Repeat([]byte{0xab}, 19) // UUID (16) + Hex/5 (3)
	seq = append(seq, 0x03)               // Int/10: 3 is below the bound
	rnd := bytes.NewReader(seq)
	got, err := Render("${Random/UUID}|${Random/Hex/5}|${Random/Int/10}", nil, rnd)
	if err != nil {
		t.Fatal(err)
	}
	parts := strings.Split(got, "|")
	if !regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`).MatchString(parts[0]) {
		t.Errorf("UUID %q is not a v4 UUID", parts[0])
	}
	if parts[1] != "ababa" {
		t.Errorf("Hex/5 = %q", parts[1])
	}
	if parts[2] != "3" {
		t.Errorf("Int/10 = %q", parts[2])
	}
}

func TestSanitizeLabelValue(t *testing.T) {
	for in, want := range map[string]string{
		"Standard PC (Q35 + ICH9, 2009)": "Standard-PC-Q35-ICH9-2009",
		"2001:db8::5":                    "2001-db8-5",
		"--a.b_c--":                      "a.b_c",
		strings.Repeat("x", 70):          strings.Repeat("x", 58),
	} {
		if got := SanitizeLabelValue(in); got != want {
			t.Errorf("SanitizeLabelValue(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestCheck(t *testing.T) {
	for tmpl, want := range map[string]string{
		"m-${System Information/UUID}":     "",
		"m-${Random/UUID}-${Random/Hex/4}": "",
		"${Random/Int/10}":                 "",
		"plain":                            "",
		"m-${Random/Hex/33}":               "${Random/Hex/33}: hex length",
		"m-${Random/Whatever}":             "${Random/Whatever}: unknown Random variable",
		"m-${System Information//UUID}":    "empty path element",
		"m-${}":                            "empty path element",
		"m-${System Information/UUID":      `"${" without a matching "}"`,
	} {
		err := Check(tmpl)
		if want == "" {
			if err != nil {
				t.Errorf("Check(%q) = %v", tmpl, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Check(%q) = %v, want error containing %q", tmpl, err, want)
		}
	}
}
