package merger

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/prloop/prloop/pkg/events"
)

func TestPlanHold_LatestCommandWins(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	cmd := func(name string, id int64) *events.CommandReceived {
		return &events.CommandReceived{Command: name, CommentID: id, Author: "alice"}
	}
	tests := []struct {
		name   string
		cur    *Hold
		cmd    *events.CommandReceived
		ok     bool
		held   bool
		byWhom int64
	}{
		{name: "dequeue holds a PR never held", cmd: cmd(events.CommandDequeue, 10), ok: true, held: true, byWhom: 10},
		{name: "stop holds it too", cmd: cmd(events.CommandStop, 10), ok: true, held: true, byWhom: 10},
		{name: "queue lets a held PR in", cur: &Hold{Held: true, CommentID: 10}, cmd: cmd(events.CommandQueue, 11), ok: true, byWhom: 11},
		{name: "queue on a PR never held records it", cmd: cmd(events.CommandQueue, 11), ok: true, byWhom: 11},
		{name: "a redelivered dequeue never undoes a later queue", cur: &Hold{CommentID: 11}, cmd: cmd(events.CommandDequeue, 10)},
		{name: "the same command again changes nothing", cur: &Hold{Held: true, CommentID: 10}, cmd: cmd(events.CommandDequeue, 10)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h, ok := planHold(tt.cur, tt.cmd, now)
			assert.Equal(t, tt.ok, ok)
			if ok {
				assert.Equal(t, tt.held, h.Held)
				assert.Equal(t, tt.byWhom, h.CommentID)
				assert.Equal(t, now, h.At)
			}
		})
	}
}
