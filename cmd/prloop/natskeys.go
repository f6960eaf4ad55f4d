package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/prloop/prloop/pkg/events"
	"github.com/prloop/prloop/pkg/natsx"
)

// PublicKeysFile is the file nats-keys writes the public keys to, as
// NKEY_<USER>=<key> lines: deploy/nats/nats.conf reads them from the NATS
// server's environment ($NKEY_POLLER …).
const PublicKeysFile = "public.env"

// nkeyVar is the variable deploy/nats/nats.conf takes user's public key from.
func nkeyVar(user string) string { return "NKEY_" + strings.ToUpper(user) }

func runNATSKeys(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("prloop nats-keys", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dir := fs.String("dir", ".nats", "where to write the keys")
	fs.Usage = func() {
		fmt.Fprintf(stderr, `Usage: prloop nats-keys [-dir .nats]

Makes one NATS nkey user per prloop service and one for the operator's
commands (cli), for deploy/nats/nats.conf: DIR/<user>.nk holds a user's
seed, its credentials (PRLOOP_NATS_CREDS_FILE), and DIR/%s the public
keys the NATS server reads (NKEY_POLLER=… ; not secret). Existing keys are
kept, so running it again only fills in what is missing.

`, PublicKeysFile)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		fs.Usage()
		return fmt.Errorf("%w: prloop nats-keys takes no arguments, got %q", errUsage, fs.Args())
	}
	// The directory keeps other users of the host out; the seeds inside are
	// 0644 because the containers that mount them run as another user.
	if err := os.MkdirAll(*dir, 0o700); err != nil {
		return fmt.Errorf("create key directory %s: %w", *dir, err)
	}
	var env strings.Builder
	for _, user := range events.Publishers() {
		path := filepath.Join(*dir, user+".nk")
		pub, err := natsx.UserKey(path, 0o644)
		if err != nil {
			return err
		}
		fmt.Fprintf(&env, "%s=%s\n", nkeyVar(user), pub)
		fmt.Fprintf(stdout, "%-10s %s  %s\n", user, pub, path)
	}
	pubPath := filepath.Join(*dir, PublicKeysFile)
	if err := os.WriteFile(pubPath, []byte(env.String()), 0o644); err != nil {
		return fmt.Errorf("write public keys: %w", err)
	}
	fmt.Fprintf(stdout, "public keys for the NATS server: %s\n", pubPath)
	return nil
}
