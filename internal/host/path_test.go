package host

import "testing"

func TestJoin(t *testing.T) {
	for _, c := range []struct{ root, p, want string }{
		{"", "/oem/registration/state.yaml", "/oem/registration/state.yaml"},
		{"/", "config.yaml", "config.yaml"},
		{"/", "/oem/registration/state.yaml", "/oem/registration/state.yaml"},
		{"/tmp/m1", "/oem/registration/state.yaml", "/tmp/m1/oem/registration/state.yaml"},
		{"/tmp/m1", "oem/x", "/tmp/m1/oem/x"},
		// A host path cannot climb out of the root.
		{"/tmp/m1", "/../etc/passwd", "/tmp/m1/etc/passwd"},
	} {
		if got := Root(c.root).Path(c.p); got != c.want {
			t.Errorf("Root(%q).Path(%q) = %q, want %q", c.root, c.p, got, c.want)
		}
	}
}
