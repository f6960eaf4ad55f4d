package escalator

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/prloop/prloop/pkg/config/configtest"
)

// The escalator's defaults are written once, in its Config's tags: a
// zero Config given to New gets the label from PRLOOP_ESCALATION_LABEL's
// tag, which the constant DefaultLabel equals.
func TestNew_ZeroConfigTakesTheTagDefaults(t *testing.T) {
	def := configtest.DefaultsAreTheTags[Config](t)
	assert.Equal(t, "human-review-required", DefaultLabel)
	assert.Equal(t, def.Label, DefaultLabel)
	s := New(Config{}, Deps{})
	assert.Equal(t, def.Label, s.cfg.Label)
}
