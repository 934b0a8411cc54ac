package bootstrap

import (
	"regexp"
	"strings"
	"testing"

	"github.com/nodereg/nodereg/apply"
)

var uuidLine = regexp.MustCompile(`(?m)^uuid=([0-9a-f]{8}-[0-9a-f]{4}-5[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12})$`)

func keyfileUUID(t *testing.T, kf apply.Keyfile) string {
	t.Helper()
	m := uuidLine.FindSubmatch(kf.Content)
	if m == nil {
		t.Fatalf("%s: no version-5 uuid= line:\n%s", kf.Name, kf.Content)
	}
	return string(m[1])
}

// The built-in translator derives an nmstate profile's UUID from the
// interface alone: the bootstrap keyfile and the IPAM keyfile for one NIC
// would share it, and NetworkManager would then never load the IPAM
// keyfile (the boot simulation saw the live apply fail, exit 75, every
// run). The bootstrap keyfile gets a UUID of its own, the same every time,
// and nothing else of the file changes.
func TestBootstrapNmstateKeyfileUUIDDiffersFromIPAM(t *testing.T) {
	state := []byte("interfaces:\n- name: eth0\n  type: ethernet\n  state: up\n  ipv4: {enabled: true, dhcp: false, address: [{ip: 10.231.0.21, prefix-length: 24}]}\n")
	ipam, _, err := apply.BuiltinNmstate{}.Generate(t.Context(), state)
	if err != nil {
		t.Fatal(err)
	}
	boot := bootstrapUUIDs(ipam)
	if len(boot) != 1 {
		t.Fatalf("%d keyfiles, want 1", len(boot))
	}
	ipamUUID, bootUUID := keyfileUUID(t, ipam[0]), keyfileUUID(t, boot[0])
	if ipamUUID == bootUUID {
		t.Errorf("bootstrap and IPAM keyfile share uuid %s", ipamUUID)
	}
	if again := keyfileUUID(t, bootstrapUUIDs(ipam)[0]); again != bootUUID {
		t.Errorf("bootstrap uuid %s, then %s: want the same every run", bootUUID, again)
	}
	if got, want := strings.Replace(string(boot[0].Content), bootUUID, ipamUUID, 1), string(ipam[0].Content); got != want {
		t.Errorf("more than the uuid changed:\n%s\nwant\n%s", boot[0].Content, ipam[0].Content)
	}
}

// References to a renamed UUID (a port's master=, a VLAN's parent=) follow
// it; a keyfile without uuid= is left alone (NetworkManager derives its
// UUID from the path); a uuid= outside [connection] names nothing.
func TestBootstrapUUIDsRewriteReferences(t *testing.T) {
	const br = "c0ffee00-0000-4000-8000-000000000001"
	kfs := []apply.Keyfile{
		{Name: "br0.nmconnection", Content: []byte("[connection]\nid=br0\nuuid=" + br + "\ntype=bridge\ninterface-name=br0\n")},
		{Name: "eth0.nmconnection", Content: []byte("[connection]\nid=eth0\ntype=ethernet\ninterface-name=eth0\nmaster = C0FFEE00-0000-4000-8000-000000000001\nslave-type=bridge\n# uuid=" + br + "\n")},
		{Name: "eth1.nmconnection", Content: []byte("[connection]\nid=eth1\ntype=ethernet\n[vpn]\nuuid=c0ffee00-0000-4000-8000-000000000002\n")},
	}
	out := bootstrapUUIDs(kfs)
	nu := keyfileUUID(t, out[0])
	if nu == br {
		t.Fatalf("bridge uuid unchanged")
	}
	want := "[connection]\nid=eth0\ntype=ethernet\ninterface-name=eth0\nmaster =" + nu + "\nslave-type=bridge\n# uuid=" + br + "\n"
	if string(out[1].Content) != want {
		t.Errorf("port keyfile:\n%s\nwant\n%s", out[1].Content, want)
	}
	if string(out[2].Content) != string(kfs[2].Content) {
		t.Errorf("a uuid= outside [connection] was renamed:\n%s", out[2].Content)
	}
	if string(kfs[1].Content) == want {
		t.Error("the input keyfiles were modified")
	}
}
