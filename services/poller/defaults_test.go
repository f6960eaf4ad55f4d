package poller

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/prloop/prloop/pkg/config/configtest"
)

// The poller's defaults are written once, in its Config's tags: New
// copies none (its only guard, at least one request at a time, is a
// floor, not a default).
func TestConfig_DefaultsAreTheTags(t *testing.T) {
	cfg := configtest.DefaultsAreTheTags[Config](t)
	assert.NoError(t, cfg.Common.Validate(), "the defaults are a valid configuration")
}
