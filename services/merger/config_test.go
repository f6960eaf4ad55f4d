package merger

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/prloop/prloop/pkg/config/configtest"
)

func TestConfig_FromEnvironment(t *testing.T) {
	configtest.Run(t, []configtest.Case[Config]{
		{
			Name: "defaults",
			Check: func(t *testing.T, c Config) {
				assert.Equal(t, "squash", c.MergeMethod)
				assert.True(t, c.RequireChecks)
				assert.Equal(t, 30*time.Minute, c.ChecksTimeout)
				assert.Equal(t, UpdateMerge, c.UpdateMethod)
				assert.False(t, c.DeleteBranch)
				assert.False(t, c.DryRun)
				assert.Equal(t, time.Minute, c.LockTTL)
				assert.Empty(t, c.requiredChecks())
				assert.False(t, c.ResolveConflicts, "conflicts go to a human unless asked")
				assert.Equal(t, QueueSerial, c.QueueMode)
				assert.Equal(t, 4, c.QueueDepth)
			},
		},
		{
			Name: "speculative queue",
			Env:  map[string]string{"PRLOOP_QUEUE_MODE": "speculative", "PRLOOP_QUEUE_DEPTH": "6", "PRLOOP_MERGE_METHOD": "merge"},
			Check: func(t *testing.T, c Config) {
				assert.Equal(t, QueueSpeculative, c.QueueMode)
				assert.Equal(t, 6, c.QueueDepth)
			},
		},
		{
			Name: "conflicts to the agent", Env: map[string]string{"PRLOOP_RESOLVE_CONFLICTS": "true"},
			Check: func(t *testing.T, c Config) { assert.True(t, c.ResolveConflicts) },
		},
		{
			Name:    "conflicts to the agent in a dry run",
			Env:     map[string]string{"PRLOOP_RESOLVE_CONFLICTS": "true", "PRLOOP_DRY_RUN": "true"},
			WantErr: []string{"PRLOOP_RESOLVE_CONFLICTS", "PRLOOP_DRY_RUN"},
		},
		{
			Name: "everything set",
			Env: map[string]string{
				"PRLOOP_MERGE_METHOD": "rebase", "PRLOOP_REQUIRE_CHECKS": "false", "PRLOOP_CHECKS_TIMEOUT": "5m",
				"PRLOOP_UPDATE_METHOD": "rebase", "PRLOOP_DELETE_BRANCH": "true", "PRLOOP_DRY_RUN": "true",
				"PRLOOP_REQUIRED_CHECKS": "ci/build, test",
			},
			Check: func(t *testing.T, c Config) {
				assert.Equal(t, "rebase", c.MergeMethod)
				assert.False(t, c.RequireChecks)
				assert.Equal(t, 5*time.Minute, c.ChecksTimeout)
				assert.Equal(t, UpdateRebase, c.UpdateMethod)
				assert.True(t, c.DeleteBranch)
				assert.True(t, c.DryRun)
				assert.Equal(t, []string{"ci/build", "test"}, c.requiredChecks())
			},
		},
		{Name: "unknown merge method", Env: map[string]string{"PRLOOP_MERGE_METHOD": "octopus"}, WantErr: []string{"PRLOOP_MERGE_METHOD", "octopus"}},
		{Name: "unknown update method", Env: map[string]string{"PRLOOP_UPDATE_METHOD": "cherry-pick"}, WantErr: []string{"PRLOOP_UPDATE_METHOD"}},
		{Name: "zero checks timeout", Env: map[string]string{"PRLOOP_CHECKS_TIMEOUT": "0s"}, WantErr: []string{"PRLOOP_CHECKS_TIMEOUT"}},
		{Name: "empty required check", Env: map[string]string{"PRLOOP_REQUIRED_CHECKS": "ci/build,,test"}, WantErr: []string{"PRLOOP_REQUIRED_CHECKS"}},
		{Name: "bad boolean", Env: map[string]string{"PRLOOP_DRY_RUN": "maybe"}, WantErr: []string{`PRLOOP_DRY_RUN="maybe"`}},
		{Name: "unknown queue mode", Env: map[string]string{"PRLOOP_QUEUE_MODE": "batch"}, WantErr: []string{"PRLOOP_QUEUE_MODE", "batch"}},
		{Name: "queue depth zero", Env: map[string]string{"PRLOOP_QUEUE_DEPTH": "0"}, WantErr: []string{"PRLOOP_QUEUE_DEPTH"}},
		{Name: "speculative with rebase merges", Env: map[string]string{"PRLOOP_QUEUE_MODE": "speculative", "PRLOOP_MERGE_METHOD": "rebase"}, WantErr: []string{"rebase merge rewrites every commit"}},
		{Name: "speculative without checks", Env: map[string]string{"PRLOOP_QUEUE_MODE": "speculative", "PRLOOP_REQUIRE_CHECKS": "false"}, WantErr: []string{"candidates exist to be tested"}},
		{Name: "speculative dry run", Env: map[string]string{"PRLOOP_QUEUE_MODE": "speculative", "PRLOOP_DRY_RUN": "true"}, WantErr: []string{"must not"}},
		{Name: "lock lease too short", Env: map[string]string{"PRLOOP_MERGE_LOCK_TTL": "10ms"}, WantErr: []string{"PRLOOP_MERGE_LOCK_TTL"}},
	})
}
