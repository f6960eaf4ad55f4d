package feedback_test

import (
	"os"
	"testing"

	"github.com/prloop/prloop/pkg/sandbox"
)

// TestMain lets the test binary serve as the namespaces sandbox's init,
// as prloop's own binaries do.
func TestMain(m *testing.M) {
	sandbox.Init()
	os.Exit(m.Run())
}
