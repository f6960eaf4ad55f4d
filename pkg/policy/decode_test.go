package policy

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// issueExample is the file of issue #33, as the README shows it.
const issueExample = `version: 1
review:
  protocols: [emoji, native, quorum]
  reviewers: [alice, "@acme/core"]
  quorum: ["copilot-pull-request-reviewer[bot]"]
  approval_survives_push: false
  timeout: 2h
feedback:
  max_fix_cycles: 2
  fix_checks: required
merge:
  method: squash
  required_checks: [ci, lint]
  queue: { mode: serial, depth: 4 }
  delete_branch: true
escalation:
  label: human-review-required
  mentions: ["@acme/oncall"]
branches:
  "release/*": { merge: { method: merge }, review: { reviewers: ["@acme/release"] } }
`

func TestDecode_IssueExample(t *testing.T) {
	t.Parallel()
	f, err := Decode(Path, []byte(issueExample))
	require.NoError(t, err)
	assert.Equal(t, 1, f.Version)
	assert.Equal(t, []string{"emoji", "native", "quorum"}, f.Review.Protocols)
	assert.Equal(t, []string{"alice", "@acme/core"}, *f.Review.Reviewers)
	assert.Equal(t, Duration(2*time.Hour), *f.Review.Timeout)
	assert.False(t, *f.Review.ApprovalSurvivesPush)
	assert.Equal(t, 2, *f.Feedback.MaxFixCycles)
	assert.Equal(t, "required", f.Feedback.FixChecks)
	assert.Equal(t, "squash", f.Merge.Method)
	assert.Equal(t, []string{"ci", "lint"}, *f.Merge.RequiredChecks)
	assert.Equal(t, "serial", f.Merge.Queue.Mode)
	assert.Equal(t, 4, *f.Merge.Queue.Depth)
	assert.True(t, *f.Merge.DeleteBranch)
	assert.Equal(t, []string{"@acme/oncall"}, *f.Escalation.Mentions)
	require.Len(t, f.Branches, 1)
	assert.Equal(t, "release/*", f.Branches[0].Glob)
	assert.Equal(t, 20, f.Branches[0].Line)
	assert.Equal(t, "merge", f.Branches[0].Section.Merge.Method)
	assert.Equal(t, []string{"@acme/release"}, *f.Branches[0].Section.Review.Reviewers)
}

func TestDecode_Problems(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		file string
		want []string // every problem, in file order
	}{
		{
			name: "unknown key suggests the one meant (the issue's example)",
			file: "version: 1\nreview:\n  protocols: [emoji]\n  reviwers: [alice]\n",
			want: []string{`.github/prloop.yml:4: unknown key "reviwers" (did you mean "reviewers"?)`},
		},
		{
			name: "unknown top-level key",
			file: "version: 1\nmerg:\n  method: squash\n",
			want: []string{`.github/prloop.yml:2: unknown key "merg" (did you mean "merge"?)`},
		},
		{
			name: "unknown key nothing like a known one has no suggestion",
			file: "version: 1\nfrobnicate: true\n",
			want: []string{`.github/prloop.yml:2: unknown key "frobnicate"`},
		},
		{
			name: "syntax error has its line",
			file: "version: 1\nreview:\n\treviewers: [alice]\n",
			want: []string{`.github/prloop.yml:3: syntax error: found character that cannot start any token`},
		},
		{
			name: "wrong type names the key",
			file: "version: 1\nfeedback:\n  max_fix_cycles: lots\n",
			want: []string{`.github/prloop.yml:3: feedback.max_fix_cycles: want a whole number, got "lots"`},
		},
		{
			name: "a scalar where a list goes",
			file: "version: 1\nreview:\n  reviewers: alice\n",
			want: []string{`.github/prloop.yml:3: review.reviewers: want a list, got "alice"`},
		},
		{
			name: "bad duration",
			file: "version: 1\nreview:\n  timeout: soon\n",
			want: []string{`.github/prloop.yml:3: review.timeout: want a duration like 90m or 2h, got "soon"`},
		},
		{
			name: "a quoted boolean is a string, not a boolean",
			file: "version: 1\nmerge:\n  delete_branch: \"yes\"\n",
			want: []string{`.github/prloop.yml:3: merge.delete_branch: want true or false, got "yes"`},
		},
		{
			name: "values out of range, all reported in file order",
			file: "version: 1\nreview:\n  protocols: [emoji, thumbs]\nmerge:\n  method: fast-forward\n  queue: {depth: 0}\nfeedback:\n  max_fix_cycles: -1\n",
			want: []string{
				`.github/prloop.yml:3: review.protocols[1]: unknown protocol "thumbs", want emoji, native, reviews or quorum`,
				`.github/prloop.yml:5: merge.method: "fast-forward": want squash, merge or rebase`,
				`.github/prloop.yml:6: merge.queue.depth: want 1 or more, got 0`,
				`.github/prloop.yml:8: feedback.max_fix_cycles: want 0 or more, got -1`,
			},
		},
		{
			name: "a problem inside a branch override names the glob",
			file: "version: 1\nbranches:\n  \"release/*\":\n    merge:\n      methd: merge\n",
			want: []string{`.github/prloop.yml:5: unknown key "methd" (did you mean "method"?)`},
		},
		{
			name: "a bad glob",
			file: "version: 1\nbranches:\n  \"release/[\": {}\n",
			want: []string{`.github/prloop.yml:3: branches: "release/[" is not a branch glob (path.Match syntax: release/*)`},
		},
		{
			name: "an override cannot nest branches or a version",
			file: "version: 1\nbranches:\n  main:\n    version: 1\n",
			want: []string{`.github/prloop.yml:4: unknown key "version"`},
		},
		{
			name: "wrong version",
			file: "version: 2\n",
			want: []string{`.github/prloop.yml:1: version: 2 is not a version this prloop reads, want 1`},
		},
		{
			name: "missing version",
			file: "merge:\n  method: squash\n",
			want: []string{`.github/prloop.yml:1: missing key "version": write "version: 1" first`},
		},
		{
			name: "empty file",
			file: "",
			want: []string{`.github/prloop.yml: the file is empty: write at least "version: 1"`},
		},
		{
			name: "not a mapping",
			file: "- version: 1\n",
			want: []string{`.github/prloop.yml:1: want a mapping of keys (version, review, ...), got a list`},
		},
		{
			name: "reviewers that are neither logins nor teams",
			file: "version: 1\nreview:\n  reviewers: [\"alice bob\", \"@acme\"]\nescalation:\n  mentions: [oncall]\n",
			want: []string{
				`.github/prloop.yml:3: review.reviewers[0]: "alice bob" is neither a login nor an organisation team (@org/team)`,
				`.github/prloop.yml:3: review.reviewers[1]: "@acme" is neither a login nor an organisation team (@org/team)`,
				`.github/prloop.yml:5: escalation.mentions[0]: "oncall": want @login or @org/team`,
			},
		},
		{
			name: "repeated key",
			file: "version: 1\nversion: 1\n",
			want: []string{`.github/prloop.yml:2: repeated key "version" (first at line 1)`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f, err := Decode(Path, []byte(tt.file))
			require.Error(t, err)
			assert.Nil(t, f)
			inv, ok := AsInvalid(err)
			require.True(t, ok, "%T", err)
			var got []string
			for _, p := range inv.Problems {
				got = append(got, p.Error())
			}
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestDecode_NullAndEmpty(t *testing.T) {
	t.Parallel()
	f, err := Decode(Path, []byte("version: 1\nreview:\nmerge:\n  required_checks: []\n"))
	require.NoError(t, err)
	assert.Nil(t, f.Review, "a key with nothing is absent")
	require.NotNil(t, f.Merge.RequiredChecks, "an empty list is a value: no extra checks")
	assert.Empty(t, *f.Merge.RequiredChecks)
}

func TestInvalid_ErrorIsOneLine(t *testing.T) {
	t.Parallel()
	_, err := Decode(Path, []byte("version: 1\nreview:\n  reviwers: []\n  timout: 2h\n  quorm: []\n"))
	require.Error(t, err)
	assert.Equal(t, `.github/prloop.yml:3: unknown key "reviwers" (did you mean "reviewers"?) (and 2 more problems)`, err.Error())
}
