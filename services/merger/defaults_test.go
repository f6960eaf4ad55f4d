package merger

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/prloop/prloop/pkg/config/configtest"
)

// The merger's defaults are written once, in its Config's tags; a Config
// built in code without the queue's settings falls back to the same
// values, read from the tags.
func TestConfig_DefaultsAreTheTags(t *testing.T) {
	def := configtest.DefaultsAreTheTags[Config](t)
	var zero Config
	assert.Equal(t, QueueSerial, zero.queueMode())
	assert.Equal(t, def.QueueMode, zero.queueMode())
	assert.Equal(t, def.QueueDepth, zero.queueDepth())
	assert.Equal(t, def.StatusContext, zero.statusContext())
	assert.Equal(t, def.StatusContext, DefaultStatusContext)
	assert.Equal(t, def.PriorityLabel, zero.priorityLabel())
	assert.Equal(t, def.PriorityLabel, DefaultPriorityLabel)
}
