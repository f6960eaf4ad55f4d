package merger

import (
	"time"

	retry "github.com/prloop/prloop/pkg/backoff"
)

// maxRetryWait caps the wait before the merger tries an entry or a pending
// approval again after an error.
const maxRetryWait = 5 * time.Minute

// retryPolicy is the merger's backoff after errors in a row (pkg/backoff):
// the poll interval, doubling with each error, at most five minutes. Both
// a queue entry's backoff (core.go's backoff, which gives up at
// maxFailures) and a pending approval's (Service.settleRepo, which never
// gives up) wait by it.
func retryPolicy(poll time.Duration) retry.Policy {
	return retry.Policy{Base: poll, MaxDoublings: 20, Max: maxRetryWait}
}
