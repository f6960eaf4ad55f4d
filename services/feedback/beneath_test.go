package feedback

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestRemoveBeneath: names that lead out of the worktree, through a link
// the agent planted or "..", remove nothing outside it; a link itself is
// removed, never what it points to.
func TestRemoveBeneath(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		remove  string
		gone    []string // inside the worktree
		wantErr bool
	}{
		{name: "a plain file", remove: "new.txt", gone: []string{"new.txt"}},
		{name: "through a linked directory", remove: "link/victim", wantErr: true},
		{name: "a link to a file outside", remove: "filelink", gone: []string{"filelink"}},
		{name: "dot-dot", remove: "../outside/victim", wantErr: true},
		{name: "absolute", remove: "/etc/hostname", wantErr: true},
		{name: "gone already", remove: "nope"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			top := t.TempDir()
			wt, outside := filepath.Join(top, "wt"), filepath.Join(top, "outside")
			require.NoError(t, os.MkdirAll(wt, 0o755))
			require.NoError(t, os.MkdirAll(outside, 0o755))
			victim := filepath.Join(outside, "victim")
			require.NoError(t, os.WriteFile(victim, []byte("keep"), 0o600))
			require.NoError(t, os.WriteFile(filepath.Join(wt, "new.txt"), nil, 0o600))
			require.NoError(t, os.Symlink(outside, filepath.Join(wt, "link")))
			require.NoError(t, os.Symlink(victim, filepath.Join(wt, "filelink")))

			err := removeBeneath(wt, []string{tt.remove})
			if tt.wantErr {
				assert.Error(t, err)
			} else {
				assert.NoError(t, err)
			}
			b, err := os.ReadFile(victim)
			require.NoError(t, err, "the victim outside the worktree")
			assert.Equal(t, "keep", string(b))
			for _, g := range tt.gone {
				_, err := os.Lstat(filepath.Join(wt, g))
				assert.True(t, os.IsNotExist(err), "%s still there", g)
			}
		})
	}
}
