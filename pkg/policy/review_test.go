package policy

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/prloop/prloop/pkg/ghref"
	"github.com/prloop/prloop/pkg/github"
	"github.com/prloop/prloop/pkg/review"
)

func TestEffective_ReviewPolicy(t *testing.T) {
	t.Parallel()
	e := Resolve(testOperator(), mustDecode(t, "version: 1\nreview:\n  protocols: [native, quorum]\n  quorum: [\"copilot[bot]\", \"github-actions[bot]/AI Review\"]\n  approval_survives_push: true\n"), "main")
	got := e.ReviewPolicy(review.Policy{Self: "prloop", FailurePatterns: []string{"503"}})
	assert.Equal(t, []review.Protocol{review.ProtocolReviews, review.ProtocolQuorum}, got.Protocols, "native is GitHub's reviews")
	assert.Equal(t, []review.Reviewer{{Login: "copilot[bot]"}, {Login: "github-actions[bot]", Marker: "AI Review"}}, got.Quorum)
	assert.True(t, got.ApprovalSurvivesPush)
	assert.Equal(t, "prloop", got.Self, "what the file does not say stays the operator's")
	assert.Equal(t, []string{"503"}, got.FailurePatterns)
}

func TestEffective_HumanApproved(t *testing.T) {
	t.Parallel()
	e := Resolve(testOperator(), mustDecode(t, "version: 1\nreview: {quorum: [reviewer-bot]}\n"), "main")
	tests := []struct {
		name      string
		approvers []string
		want      bool
	}{
		{name: "a person", approvers: []string{"alice"}, want: true},
		{name: "a person among bots", approvers: []string{"copilot[bot]", "alice"}, want: true},
		{name: "bots only", approvers: []string{"copilot[bot]"}},
		{name: "the quorum's reviewer without [bot]", approvers: []string{"Reviewer-Bot"}},
		{name: "prloop itself", approvers: []string{"prloop"}},
		{name: "nobody", approvers: nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			assert.Equal(t, tt.want, e.HumanApproved(tt.approvers, "prloop"))
		})
	}
}

// blobFiles serves files whose blob SHA is their content.
type blobFiles map[string]string

func (f blobFiles) GetFile(_ context.Context, _ ghref.Repo, _, ref string) (github.FileContent, error) {
	s, ok := f[ref]
	if !ok {
		return github.FileContent{}, github.ErrNotFound
	}
	return github.FileContent{Data: []byte(s), SHA: "blob:" + s}, nil
}

func TestLoader_ChangesPolicy(t *testing.T) {
	t.Parallel()
	files := blobFiles{"mb": "version: 1\n", "same": "version: 1\n", "loose": "version: 1\nreview: {reviewers: []}\n", "broken": "nope: ["}
	repo := ghref.Repo{Owner: "acme", Name: "widgets"}
	tests := []struct {
		name, mergeBase, head string
		want                  bool
	}{
		{name: "unchanged", mergeBase: "mb", head: "same"},
		{name: "loosened", mergeBase: "mb", head: "loose", want: true},
		{name: "made invalid", mergeBase: "mb", head: "broken", want: true},
		{name: "deleted", mergeBase: "mb", head: "gone", want: true},
		{name: "added", mergeBase: "none", head: "same", want: true},
		{name: "no file on either", mergeBase: "none", head: "gone"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := NewLoader(files).ChangesPolicy(t.Context(), repo, tt.mergeBase, tt.head)
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}
