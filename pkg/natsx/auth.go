package natsx

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"
)

// KeyFileName is the file in the data directory holding the nkey seed of
// the embedded server's one privileged user: prloop's own services and the
// operator's commands (prloop watch, status, events). Created once, mode
// 0600, and reused across restarts.
const KeyFileName = "nats-user.nk"

// ObserverUser is the identity of a client that connects without
// credentials (the server's no_auth_user): it may subscribe to events and
// nothing else, so `nats sub 'pr.>'` works and a forged publish does not.
const ObserverUser = "observer"

// KeyFile returns the path of the embedded server's key in dataDir.
func KeyFile(dataDir string) string { return filepath.Join(dataDir, KeyFileName) }

// ObserverPermissions are the observer's: subscribe to events (pr.>) and to
// reply inboxes, publish nothing. Without $JS.API it can neither consume
// from streams nor touch consumers and KV buckets.
func ObserverPermissions() *server.Permissions {
	return &server.Permissions{
		Publish:   &server.SubjectPermission{Deny: []string{">"}},
		Subscribe: &server.SubjectPermission{Allow: []string{"pr.>", "_INBOX.>"}},
	}
}

// loadOrCreateKey returns the public key of the user seed in path, creating
// the file (0600, never overwriting) when it does not exist. A file others
// may read is refused: whoever reads it can publish any event.
func loadOrCreateKey(path string) (string, error) {
	if fi, err := os.Stat(path); err == nil && fi.Mode().Perm()&0o077 != 0 {
		return "", fmt.Errorf("nats key %s is readable by others (mode %s): chmod 600 it", path, fi.Mode().Perm())
	}
	return UserKey(path, 0o600)
}

// UserKey returns the public key of the nkey user seed in path, creating
// the file with perm (never overwriting one) when it does not exist.
func UserKey(path string, perm fs.FileMode) (string, error) {
	seed, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return createKey(path, perm)
	}
	if err != nil {
		return "", fmt.Errorf("read nats key %s: %w", path, err)
	}
	defer wipe(seed)
	kp, err := nkeys.ParseDecoratedUserNKey(seed)
	if err != nil {
		return "", fmt.Errorf("nats key %s: %w (delete it to have a new one made)", path, err)
	}
	defer kp.Wipe()
	return kp.PublicKey()
}

func createKey(path string, perm fs.FileMode) (string, error) {
	kp, err := nkeys.CreateUser()
	if err != nil {
		return "", fmt.Errorf("create nats key: %w", err)
	}
	defer kp.Wipe()
	seed, err := kp.Seed()
	if err != nil {
		return "", fmt.Errorf("create nats key: %w", err)
	}
	defer wipe(seed)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return "", fmt.Errorf("create nats key %s: %w", path, err)
	}
	_, err = f.Write(append(seed, '\n'))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = os.Remove(path)
		return "", fmt.Errorf("write nats key %s: %w", path, err)
	}
	return kp.PublicKey()
}

func wipe(b []byte) {
	for i := range b {
		b[i] = 'x'
	}
}

// credsOption is the client option for a credentials file: a decorated JWT
// (.creds, operator mode) or a bare nkey seed (.nk, as KeyFile holds and
// `nats --nkey` reads).
func credsOption(path string) (nats.Option, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read nats credentials (PRLOOP_NATS_CREDS_FILE): %w", err)
	}
	defer wipe(b)
	if bytes.Contains(b, []byte("BEGIN NATS USER JWT")) {
		return nats.UserCredentials(path), nil
	}
	opt, err := nats.NkeyOptionFromSeed(path)
	if err != nil {
		return nil, fmt.Errorf("nats credentials %s: want a .creds file or an nkey user seed: %w", path, err)
	}
	return opt, nil
}
