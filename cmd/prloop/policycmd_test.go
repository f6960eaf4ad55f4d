package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestPolicyCheck_SameRulesAsTheServices runs `prloop policy check` on
// files: a valid one prints each effective value with its source and the
// ceilings' warnings; an invalid one prints every problem as file:line and
// exits non-zero.
func TestPolicyCheck_SameRulesAsTheServices(t *testing.T) {
	// Not parallel: the operator's settings come from the environment.
	t.Setenv("PRLOOP_MERGE_METHODS", "squash,rebase")
	t.Setenv("PRLOOP_MAX_FIX_CYCLES_CEILING", "3")
	tests := []struct {
		name    string
		file    string
		args    []string
		wantErr error
		want    []string
	}{
		{
			name: "valid, on an overridden branch, with ceilings",
			file: "version: 1\nfeedback: {max_fix_cycles: 9}\nreview: {reviewers: [alice]}\nbranches:\n  \"release/*\": {merge: {method: merge}}\n",
			args: []string{"-branch", "release/2"},
			want: []string{
				`valid; effective policy on release/2 (override "release/*")`,
				"review.reviewers               [alice]                        (file)",
				"feedback.max_fix_cycles        3                              (ceiling)",
				"merge.method                   squash                         (ceiling)",
				"review.timeout                 2h0m0s                         (operator default)",
				"warning: feedback.max_fix_cycles 9 is above the operator's ceiling (PRLOOP_MAX_FIX_CYCLES_CEILING=3); using 3",
				"warning: merge.method merge is not allowed by the operator (PRLOOP_MERGE_METHODS=squash,rebase); using squash",
			},
		},
		{
			name: "valid on main: the override does not apply",
			file: "version: 1\nbranches:\n  \"release/*\": {merge: {method: rebase}}\n",
			want: []string{"merge.method                   squash                         (operator default)"},
		},
		{
			name: "the merge queue is the operator's",
			file: "version: 1\nmerge: {queue: {mode: speculative}}\n",
			want: []string{
				"merge.queue.mode               serial                         (ceiling)",
				"warning: merge.queue.mode speculative: the merge queue is the operator's to set (PRLOOP_QUEUE_MODE=serial); using serial",
			},
		},
		{
			name:    "invalid: every problem with its line",
			file:    "version: 1\nreview:\n  protocols: [emoji]\n  reviwers: [alice]\nmerge:\n  method: fast\n",
			wantErr: errInvalidPolicy,
			want: []string{
				`prloop.yml:4: unknown key "reviwers" (did you mean "reviewers"?)`,
				`prloop.yml:6: merge.method: "fast": want squash, merge or rebase`,
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "prloop.yml")
			require.NoError(t, os.WriteFile(path, []byte(tt.file), 0o644))
			var out, errOut bytes.Buffer
			err := run(t.Context(), append(append([]string{"policy", "check"}, tt.args...), path), &out, &errOut)
			if tt.wantErr != nil {
				require.ErrorIs(t, err, tt.wantErr)
			} else {
				require.NoError(t, err, errOut.String())
			}
			for _, w := range tt.want {
				assert.Contains(t, out.String(), w)
			}
		})
	}
}

func TestPolicyCheck_Usage(t *testing.T) {
	var out, errOut bytes.Buffer
	require.ErrorIs(t, run(t.Context(), []string{"policy"}, &out, &errOut), errUsage)
	require.ErrorIs(t, run(t.Context(), []string{"policy", "check", "a", "b"}, &out, &errOut), errUsage)
	require.Error(t, run(t.Context(), []string{"policy", "check", filepath.Join(t.TempDir(), "none.yml")}, &out, &errOut))
}

func TestExplain_PolicySection(t *testing.T) {
	t.Parallel()
	var b bytes.Buffer
	printPolicy(&b, nil, "GitHub was not asked")
	assert.Contains(t, b.String(), "skipped: GitHub was not asked")
	b.Reset()
	printPolicy(&b, &policyJSON{Invalid: `.github/prloop.yml:4: unknown key "reviwers"`, Warnings: []string{"w"}}, "")
	assert.Contains(t, b.String(), `INVALID: .github/prloop.yml:4: unknown key "reviwers" (nothing is merged and no agent runs)`)
	assert.Contains(t, b.String(), "warning: w")
}
