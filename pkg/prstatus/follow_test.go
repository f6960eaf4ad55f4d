package prstatus_test

import (
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/prloop/prloop/pkg/events"
	"github.com/prloop/prloop/pkg/natsx/natstest"
	"github.com/prloop/prloop/pkg/prstatus"
)

func TestFollower_CatchesUpThenFollows(t *testing.T) {
	t.Parallel()
	conn := natstest.Start(t)
	emit := events.NewEmitter(conn.JS, "test")
	_, _, err := emit.Emit(t.Context(), &events.ReviewApproved{Base: base(pr1, headA), Status: events.StatusApproved, Approvers: []string{"alice"}}, "1")
	require.NoError(t, err)
	_, _, err = emit.Emit(t.Context(), &events.MergeQueued{Base: base(pr1, headA), Position: 1, BaseBranch: "main"}, "1")
	require.NoError(t, err)

	f := prstatus.NewFollower(slog.New(slog.DiscardHandler))
	go func() { _ = f.Run(t.Context(), conn.JS) }()
	select {
	case <-f.CaughtUp():
	case <-time.After(20 * time.Second):
		t.Fatal("the follower never caught up")
	}
	line := func() (l prstatus.Line) { f.View(func(b *prstatus.Board) { l = b.Line(pr1, opts) }); return l }
	assert.Equal(t, "approved by alice — 1st in the merge queue for main", line().Text)

	_, _, err = emit.Emit(t.Context(), &events.Merged{Base: base(pr1, headA), MergeSHA: headA}, "1")
	require.NoError(t, err)
	require.Eventually(t, func() bool { return line() == prstatus.Line{State: prstatus.Success, Text: "merged as aaaaaaa"} },
		20*time.Second, 10*time.Millisecond, "the follower applies new events")
}
