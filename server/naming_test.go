package server

import (
	"context"
	"regexp"
	"strings"
	"testing"

	"github.com/nodereg/nodereg/protocol"
	"github.com/nodereg/nodereg/server/regconfig"
	"github.com/nodereg/nodereg/server/store"
)

var generatedName = regexp.MustCompile(`^m-[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)

// A machineName template naming data the machine did not send falls back,
// as upstream's, to m- and a random UUID, given once.
func TestMachineNameFallback(t *testing.T) {
	s := newServer(t, testConfig(t, "192.168.122.150-192.168.122.200"), memStore(t), nil)
	m := machine("no-dmi")
	m.SMBIOS = nil
	r, err := handler(s).Get(context.Background(), m)
	if err != nil || r.Network == nil {
		t.Fatalf("machine without SMBIOS: %v", err)
	}
	var name string
	s.store.View(func(st *store.State) { name = st.Inventories[m.Identity.Hash].Name })
	if !generatedName.MatchString(name) {
		t.Fatalf("name %q, want m-<uuid>", name)
	}
	// The name is kept at the next registration, now with SMBIOS.
	register(t, s, "no-dmi")
	s.store.View(func(st *store.State) {
		if got := st.Inventories[m.Identity.Hash].Name; got != name {
			t.Fatalf("name changed to %q", got)
		}
	})
	// A value that is not a string counts as not found, as in
	// upstream's templater: it falls back too.
	m2 := machine("bios-map")
	m2.SMBIOS = map[string]any{"System Information": map[string]any{"UUID": map[string]any{"x": "y"}}}
	if _, err := handler(s).Get(context.Background(), m2); err != nil {
		t.Fatalf("non-string value: %v", err)
	}
	s.store.View(func(st *store.State) {
		if got := st.Inventories[m2.Identity.Hash].Name; !generatedName.MatchString(got) {
			t.Fatalf("non-string value: name %q", got)
		}
	})
}

// Labels merge key by key: one a later registration does not render or
// send stays, one it renders anew is replaced, and a Random label keeps
// its first value.
func TestLabelsMerge(t *testing.T) {
	cfg := testConfig(t, "192.168.122.150-192.168.122.200")
	cfg.Registrations[0].MachineInventoryLabels["token"] = "${Random/Hex/8}"
	s := newServer(t, cfg, memStore(t), nil)
	first := machine("uuid-l")
	first.Labels = map[string]string{"rack": "r1", "model": "${System Information/Product Name}"}
	if _, err := handler(s).Get(context.Background(), first); err != nil {
		t.Fatal(err)
	}
	var before map[string]string
	s.store.View(func(st *store.State) { before = st.Inventories[first.Identity.Hash].Labels })

	later := machine("uuid-l")
	later.SMBIOS = map[string]any{"System Information": map[string]any{"UUID": "uuid-l", "Manufacturer": "Dell"}}
	later.Labels = map[string]string{"rack": "r2"}
	if _, err := handler(s).Get(context.Background(), later); err != nil {
		t.Fatal(err)
	}
	var after map[string]string
	s.store.View(func(st *store.State) { after = st.Inventories[first.Identity.Hash].Labels })
	want := map[string]string{
		"manufacturer":              "Dell",
		"elemental.cattle.io/rack":  "r2",
		"elemental.cattle.io/model": "Standard-PC-Q35-ICH9-2009", // not sent again: kept
		"token":                     before["token"],
	}
	if before["token"] == "" || len(after) != len(want) {
		t.Fatalf("labels %v, want %v", after, want)
	}
	for k, v := range want {
		if after[k] != v {
			t.Errorf("label %s = %q, want %q (all: %v)", k, after[k], v, after)
		}
	}
}

// The unmodified wire of elemental-register --no-smbios (no SMBIOS, no
// system data: only the annotations of the capture) against the shipped
// example config, whose machineName needs the SMBIOS UUID: the machine
// registers under a generated name and gets its address.
func TestNoSMBIOSRegistrationAgainstExampleConfig(t *testing.T) {
	cfg, err := regconfig.Load(exampleConfig)
	if err != nil {
		t.Fatal(err)
	}
	s := newServer(t, cfg, memStore(t), nil)
	// demo-keyfile is the example's PLAIN registration (auth: mac).
	c := dialPlain(t, wsURL(t, s, "demo-keyfile-token"), "52:54:00:12:34:56")
	c.send(0x09, vector(t, "upstream-annotations.json"))
	c.expect(0x01, "")
	c.send(0x04, "")
	typ, p := c.read()
	if typ != 0x07 || !strings.Contains(string(p), "inventory-ip: 192.168.122.150") {
		t.Fatalf("reply 0x%02x:\n%s", typ, p)
	}
	s.store.View(func(st *store.State) {
		inv := st.Inventories[protocol.PlainHash("52:54:00:12:34:56")]
		if inv == nil || !generatedName.MatchString(inv.Name) {
			t.Fatalf("inventory %+v, want a generated m-<uuid> name", inv)
		}
	})
}
