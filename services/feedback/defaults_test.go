package feedback

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/prloop/prloop/pkg/config/configtest"
)

// The feedback service's defaults are written once, in its Config's tags:
// a zero Config gets the failed jobs' log bounds from their tags (New
// applies withDefaults), and nothing else.
func TestNew_ZeroConfigTakesTheTagDefaults(t *testing.T) {
	def := configtest.DefaultsAreTheTags[Config](t)
	got := Config{}.withDefaults()
	assert.Equal(t, 200, got.CheckLogLines)
	assert.Equal(t, 20<<10, got.CheckLogBytes)
	assert.Equal(t, def.CheckLogLines, got.CheckLogLines)
	assert.Equal(t, def.CheckLogBytes, got.CheckLogBytes)
	got.CheckLogLines, got.CheckLogBytes = 0, 0
	assert.Zero(t, got, "nothing else is defaulted")
	set := Config{CheckLogLines: 7, CheckLogBytes: 9}.withDefaults()
	assert.Equal(t, 7, set.CheckLogLines, "a set value is kept")
	assert.Equal(t, 9, set.CheckLogBytes)
}
