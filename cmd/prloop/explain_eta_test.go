package main

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/prloop/prloop/pkg/events"
	"github.com/prloop/prloop/pkg/ghref"
	"github.com/prloop/prloop/pkg/prstatus"
	"github.com/prloop/prloop/pkg/state"
)

// TestExplainAndStatusJSON_SayTheETA: explain's eta line and status
// -json's queue.eta carry the estimate the line says, known or not.
func TestExplainAndStatusJSON_SayTheETA(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		name    string
		eta     *events.QueueETA
		explain string
		json    string
	}{
		{name: "known", eta: &events.QueueETA{Known: true, Seconds: 840, CIMedianSeconds: 420, Measurements: 5, Depth: 1},
			explain: "merges in ~14m (median CI time 7m0s over the last 5 runs)",
			json:    `{"known":true,"seconds":840,"ci_median_seconds":420,"measurements":5}`},
		{name: "unknown", eta: &events.QueueETA{Measurements: 1, Depth: 1},
			explain: "unknown: 1 of the 3 CI runs measured that an estimate needs",
			json:    `{"known":false,"measurements":1}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			pr := ghref.PR{Owner: "acme", Repo: "widgets", Number: 7}
			ahead := pr.RepoRef().PR(6)
			b := prstatus.NewBoard()
			for _, p := range []ghref.PR{ahead, pr} {
				b.Apply(&events.ReviewApproved{Base: events.Base{PR: p, HeadSHA: "aaaaaaaaaaaa"}, Status: events.StatusApproved, Approvers: []string{"alice"}}, at)
				b.Apply(&events.MergeQueued{Base: events.Base{PR: p, HeadSHA: "aaaaaaaaaaaa"}, Position: 1, BaseBranch: "main", ETA: tt.eta}, at)
			}
			out, _ := explainBoard(t, b, pr, &state.PR{PR: pr, Status: events.StatusApproved}, at)
			assert.Contains(t, out, tt.explain)

			doc := statusJSON(b.Rows(prstatus.Options{}), at)
			require.Len(t, doc.PRs, 2)
			q := doc.PRs[1].Queue
			require.NotNil(t, q)
			got, err := json.Marshal(q.ETA)
			require.NoError(t, err)
			assert.JSONEq(t, tt.json, string(got))
		})
	}
}
