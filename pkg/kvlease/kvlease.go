// Package kvlease provides leases: locks kept in a JetStream KV bucket that
// expire unless their holder renews them. A lease is taken with Create (which
// fails if the key exists) and renewed and released with compare-and-set on
// the key's revision, so two holders never both believe they hold it, across
// processes and restarts; and a holder that dies frees its lease when the
// lease runs out, without anyone cleaning up.
//
// Expiry is judged by the wall clock of whoever looks at the lease, so the
// TTL must be well above the clock skew between hosts (seconds, not
// milliseconds).
package kvlease

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// ErrHeld says another holder has the lease and it has not expired.
var ErrHeld = errors.New("lease held")

// ErrLost says the lease expired and someone else took it, or it was
// deleted, before its holder renewed or released it.
var ErrLost = errors.New("lease lost")

// KV is the part of jetstream.KeyValue leases use.
type KV interface {
	CASKV
	Delete(ctx context.Context, key string, opts ...jetstream.KVDeleteOpt) error
}

// CASKV is the part of jetstream.KeyValue Update uses.
type CASKV interface {
	Get(ctx context.Context, key string) (jetstream.KeyValueEntry, error)
	Create(ctx context.Context, key string, value []byte, opts ...jetstream.KVCreateOpt) (uint64, error)
	Update(ctx context.Context, key string, value []byte, revision uint64) (uint64, error)
}

var _ KV = (jetstream.KeyValue)(nil)

// Record is a lease as stored in the bucket.
type Record struct {
	// Holder names who holds the lease (a process instance).
	Holder string `json:"holder"`
	// Expires is when the lease frees itself unless renewed.
	Expires time.Time `json:"expires"`
	// Note says what the holder is doing, for people and logs.
	Note string `json:"note,omitempty"`
}

// Expired reports whether the lease has run out at now.
func (r Record) Expired(now time.Time) bool { return !now.Before(r.Expires) }

// HolderID names this process as a lease holder: host, pid and a random
// suffix, so that two processes (or one restarted) never share a name.
func HolderID() string {
	host, _ := os.Hostname()
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return fmt.Sprintf("%s-%d-%s", host, os.Getpid(), hex.EncodeToString(b))
}

var processHolder = sync.OnceValue(HolderID)

// BucketManager is the part of jetstream.JetStream that EnsureBucket needs.
type BucketManager interface {
	StreamGetter
	CreateOrUpdateKeyValue(ctx context.Context, cfg jetstream.KeyValueConfig) (jetstream.KeyValue, error)
}

var _ BucketManager = (jetstream.JetStream)(nil)

// EnsureBucket creates or updates a file-backed KV bucket for leases (and
// whatever small records its user keeps beside them), keeping only the
// latest value of each key, with exact key listings (Bucket).
func EnsureBucket(ctx context.Context, js BucketManager, name, description string, replicas int) (jetstream.KeyValue, error) {
	kv, err := js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
		Bucket: name, Description: description, History: 1, Storage: jetstream.FileStorage, Replicas: max(1, replicas),
	})
	if err != nil {
		return nil, fmt.Errorf("ensure kv bucket %s: %w", name, err)
	}
	b, err := Exact(ctx, js, kv)
	if err != nil {
		return nil, err
	}
	return b, nil
}

// Options tune a lease; TTL is required.
type Options struct {
	// TTL is how long the lease lasts without renewal.
	TTL time.Duration
	// Note is stored with the lease.
	Note string
	// Now is the clock; default time.Now.
	Now func() time.Time
	// Log receives what Hold's release cannot return: a failed release
	// (the lease then expires by itself); default slog.Default().
	Log *slog.Logger
}

// Lease is a held lease. Its methods are safe for concurrent use.
type Lease struct {
	kv     KV
	key    string
	holder string
	opts   Options

	mu  sync.Mutex
	rev uint64
}

// Acquire takes the lease key for holder (empty: HolderID of this process):
// it creates the key, or takes over an expired lease with compare-and-set.
// It returns ErrHeld when someone (holder itself included) holds an
// unexpired lease.
func Acquire(ctx context.Context, kv KV, key, holder string, opts Options) (*Lease, error) {
	if holder == "" {
		holder = processHolder()
	}
	if opts.TTL <= 0 {
		return nil, fmt.Errorf("acquire lease %s: TTL must be positive", key)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Log == nil {
		opts.Log = slog.Default()
	}
	l := &Lease{kv: kv, key: key, holder: holder, opts: opts}
	body, err := l.record()
	if err != nil {
		return nil, err
	}
	rev, err := kv.Create(ctx, key, body)
	if err == nil {
		l.rev = rev
		return l, nil
	}
	if !IsConflict(err) {
		return nil, fmt.Errorf("acquire lease %s: %w", key, err)
	}
	cur, curRev, err := get(ctx, kv, key)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, fmt.Errorf("acquire lease %s: %w (released meanwhile; try again)", key, ErrHeld)
	}
	if err != nil {
		return nil, fmt.Errorf("acquire lease %s: %w", key, err)
	}
	if !cur.Expired(opts.Now()) {
		return nil, fmt.Errorf("acquire lease %s: %w by %s until %s", key, ErrHeld, cur.Holder, cur.Expires.Format(time.RFC3339))
	}
	rev, err = kv.Update(ctx, key, body, curRev)
	if IsConflict(err) {
		return nil, fmt.Errorf("acquire expired lease %s: %w (taken over meanwhile)", key, ErrHeld)
	}
	if err != nil {
		return nil, fmt.Errorf("acquire expired lease %s: %w", key, err)
	}
	l.rev = rev
	return l, nil
}

// Peek returns the lease stored at key, if any, without taking it.
func Peek(ctx context.Context, kv KV, key string) (Record, bool, error) {
	r, _, err := get(ctx, kv, key)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return Record{}, false, nil
	}
	if err != nil {
		return Record{}, false, fmt.Errorf("read lease %s: %w", key, err)
	}
	return r, true, nil
}

func get(ctx context.Context, kv KV, key string) (Record, uint64, error) {
	e, err := kv.Get(ctx, key)
	if err != nil {
		return Record{}, 0, err
	}
	var r Record
	if err := json.Unmarshal(e.Value(), &r); err != nil {
		// An unreadable lease is treated as expired, so it cannot block forever.
		return Record{}, e.Revision(), nil
	}
	return r, e.Revision(), nil
}

func (l *Lease) record() ([]byte, error) {
	body, err := json.Marshal(Record{Holder: l.holder, Expires: l.opts.Now().Add(l.opts.TTL).UTC(), Note: l.opts.Note})
	if err != nil {
		return nil, fmt.Errorf("encode lease %s: %w", l.key, err)
	}
	return body, nil
}

// Key is the lease's key.
func (l *Lease) Key() string { return l.key }

// Renew extends the lease by its TTL from now. ErrLost means it is no
// longer held: whatever the holder was doing under it must stop.
func (l *Lease) Renew(ctx context.Context) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.rev == 0 {
		return fmt.Errorf("renew lease %s: %w (released)", l.key, ErrLost)
	}
	body, err := l.record()
	if err != nil {
		return err
	}
	rev, err := l.kv.Update(ctx, l.key, body, l.rev)
	if IsConflict(err) || errors.Is(err, jetstream.ErrKeyNotFound) {
		l.rev = 0
		return fmt.Errorf("renew lease %s: %w", l.key, ErrLost)
	}
	if err != nil {
		return fmt.Errorf("renew lease %s: %w", l.key, err)
	}
	l.rev = rev
	return nil
}

// Release frees the lease if it is still held; releasing a lost or released
// lease does nothing.
func (l *Lease) Release(ctx context.Context) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.rev == 0 {
		return nil
	}
	rev := l.rev
	l.rev = 0
	err := l.kv.Delete(ctx, l.key, jetstream.LastRevision(rev))
	if err != nil && !IsConflict(err) && !errors.Is(err, jetstream.ErrKeyNotFound) {
		return fmt.Errorf("release lease %s: %w", l.key, err)
	}
	return nil
}

// Keep renews the lease every TTL/3 until stop is called, and returns a
// context derived from ctx that is cancelled when the lease is lost (or
// cannot be renewed before it would expire), so work done under the lease
// stops. stop waits for the renewer to finish; it does not release.
func (l *Lease) Keep(ctx context.Context) (context.Context, func()) {
	kctx, cancel := context.WithCancelCause(ctx)
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		every := max(l.opts.TTL/3, time.Millisecond)
		deadline := l.opts.Now().Add(l.opts.TTL)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-kctx.Done():
				return
			case <-t.C:
			}
			rctx, rcancel := context.WithTimeout(kctx, every)
			err := l.Renew(rctx)
			rcancel()
			switch {
			case err == nil:
				deadline = l.opts.Now().Add(l.opts.TTL)
			case errors.Is(err, ErrLost):
				cancel(err)
				return
			case !l.opts.Now().Before(deadline.Add(-every)):
				// Renewals keep failing: the lease is about to expire in
				// the others' eyes, so stop before it does.
				cancel(fmt.Errorf("%w: %w", ErrLost, err))
				return
			}
		}
	}()
	var once sync.Once
	return kctx, func() {
		once.Do(func() { close(done) })
		wg.Wait()
		cancel(nil)
	}
}

// releaseTimeout bounds Hold's release, which runs on a context detached
// from the work's: a shutdown must still free the lease for the next
// holder, but not hang on a server that is gone.
const releaseTimeout = 5 * time.Second

// Hold is the lifecycle of work under a held lease: it keeps the lease
// (Keep) and returns the context to work in, cancelled with ErrLost as its
// cause when the lease is lost, and release, which stops renewing and
// releases the lease on a context detached from ctx, so that the lease is
// freed even when ctx ended (a shutdown); a failed release is logged, and
// the lease then expires by itself. Call release exactly once, when the
// work is done (typically deferred).
func (l *Lease) Hold(ctx context.Context) (context.Context, func()) {
	kctx, stop := l.Keep(ctx)
	return kctx, func() {
		stop()
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
		defer cancel()
		if err := l.Release(rctx); err != nil {
			l.opts.Log.Warn("release lease failed; it expires by itself", "key", l.key, "err", err)
		}
	}
}

// IsConflict reports whether a KV write failed because the key's revision
// was not the one expected: someone else wrote it first.
func IsConflict(err error) bool {
	if err == nil {
		return false
	}
	var apiErr *jetstream.APIError
	return errors.Is(err, jetstream.ErrKeyExists) ||
		(errors.As(err, &apiErr) && apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence)
}
