package feedback

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestCheckRemote(t *testing.T) {
	t.Parallel()
	tests := []struct {
		remote string
		ok     bool
	}{
		{remote: "https://github.com/acme/widgets.git", ok: true},
		{remote: "file:///tmp/sim/acme/widgets.git", ok: true},
		{remote: "-uploadpack=touch /tmp/x"},
		{remote: "ext::sh -c touch% /tmp/pwned"},
		{remote: ""},
	}
	for _, tt := range tests {
		t.Run(tt.remote, func(t *testing.T) {
			t.Parallel()
			err := checkRemote(tt.remote)
			if tt.ok {
				assert.NoError(t, err)
			} else {
				assert.ErrorIs(t, err, ErrUnusable)
			}
		})
	}
}
