package state

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestCommandsRecord_BoundedAndNeverForgets(t *testing.T) {
	t.Parallel()
	var c CommandsRecord
	for id := int64(1); id <= MaxCommandsKept+10; id++ {
		c.Add(id * 10)
	}
	assert.Len(t, c.Handled, MaxCommandsKept)
	assert.Equal(t, int64(100), c.Floor, "the oldest ids fold into the floor")
	for id := int64(1); id <= MaxCommandsKept+10; id++ {
		assert.True(t, c.Has(id*10), id*10)
	}
	assert.True(t, c.Has(5), "below the floor: an older comment, handled or not seen in time")
	assert.False(t, c.Has(105), "above the floor and never added")
	before := c
	c.Add(20)
	assert.Equal(t, before, c, "adding a handled id changes nothing")
}
