package escalator

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/prloop/prloop/pkg/config/configtest"
)

func TestConfig_FromEnvironment(t *testing.T) {
	const hook = "https://hooks.slack.com/services/T000/B000/very-secret"
	configtest.Run(t, []configtest.Case[Config]{
		{
			Name: "defaults",
			Check: func(t *testing.T, c Config) {
				assert.Equal(t, "human-review-required", c.Label)
				assert.Empty(t, c.Mentions)
				assert.Empty(t, c.WebhookURL)
				assert.Nil(t, WebhookOf(c))
				assert.Equal(t, []time.Duration{time.Second, 5 * time.Second, 30 * time.Second, 2 * time.Minute, 5 * time.Minute}, c.RetryBackoff)
			},
		},
		{
			Name: "retry backoff", Env: map[string]string{"PRLOOP_ESCALATION_RETRY_BACKOFF": "1s,2s,20s"},
			Check: func(t *testing.T, c Config) {
				assert.Equal(t, []time.Duration{time.Second, 2 * time.Second, 20 * time.Second}, c.RetryBackoff)
			},
		},
		{Name: "retry backoff not positive", Env: map[string]string{"PRLOOP_ESCALATION_RETRY_BACKOFF": "1s,0s"}, WantErr: []string{"PRLOOP_ESCALATION_RETRY_BACKOFF", "0s"}},
		{
			Name: "everything set",
			Env: map[string]string{
				"PRLOOP_ESCALATION_LABEL": "needs-human", "PRLOOP_ESCALATION_MENTIONS": "alice,@acme/maintainers",
				"PRLOOP_ESCALATION_WEBHOOK_URL": hook,
			},
			Check: func(t *testing.T, c Config) {
				assert.Equal(t, "needs-human", c.Label)
				assert.Equal(t, []string{"alice", "@acme/maintainers"}, c.Mentions)
				assert.Equal(t, hook, c.WebhookURL.Reveal())
				assert.NotNil(t, WebhookOf(c))
			},
		},
		{Name: "empty label", Env: map[string]string{"PRLOOP_ESCALATION_LABEL": " "}, WantErr: []string{"PRLOOP_ESCALATION_LABEL"}},
		{Name: "bad mention", Env: map[string]string{"PRLOOP_ESCALATION_MENTIONS": "alice,not a login"}, WantErr: []string{"PRLOOP_ESCALATION_MENTIONS", "not a login"}},
		{
			Name: "bad webhook URL is reported without being repeated", Env: map[string]string{"PRLOOP_ESCALATION_WEBHOOK_URL": "ftp://very-secret@host/x"},
			WantErr: []string{"PRLOOP_ESCALATION_WEBHOOK_URL"}, NotInErr: []string{"very-secret"},
		},
		{Name: "too many retries", Env: map[string]string{"PRLOOP_ESCALATION_WEBHOOK_RETRIES": "50"}, WantErr: []string{"PRLOOP_ESCALATION_WEBHOOK_RETRIES"}},
	})
}
