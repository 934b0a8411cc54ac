package hostile

import (
	"os"
	"testing"

	"github.com/nodereg/nodereg/internal/testutil/testbin"
)

func TestMain(m *testing.M) {
	if name := os.Getenv(childEnv); name != "" {
		decodeChild(name)
	}
	code := m.Run()
	testbin.Cleanup()
	os.Exit(code)
}
