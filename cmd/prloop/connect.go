package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/prloop/prloop/pkg/natsx"
)

// cliConnectTimeout bounds how long an operator command waits for prloop's
// NATS to connect, and then to answer: a command someone typed fails in a
// moment with one line saying why, rather than retrying as a service does.
const cliConnectTimeout = time.Second

// connectCLI connects an operator command to a running prloop's NATS and
// checks that it may use JetStream there, within cliConnectTimeout.
func connectCLI(ctx context.Context) (*natsx.Conn, error) {
	opts, key := cliNATS()
	cctx, cancel := context.WithTimeout(ctx, cliConnectTimeout)
	defer cancel()
	type result struct {
		conn *natsx.Conn
		err  error
	}
	// natsx.Connect retries until ctx ends, but one dial to an address
	// that drops packets may outlast it: the command does not wait for it.
	done := make(chan result, 1)
	go func() {
		c, err := natsx.Connect(cctx, opts)
		done <- result{c, err}
	}()
	var r result
	select {
	case r = <-done:
	case <-time.After(cliConnectTimeout + 250*time.Millisecond):
		go func() {
			if r := <-done; r.conn != nil {
				r.conn.NC.Close()
			}
		}()
		r.err = context.DeadlineExceeded
	}
	if r.err != nil {
		return nil, connectError(r.err, opts.URL, key)
	}
	pctx, cancel := context.WithTimeout(ctx, cliConnectTimeout)
	defer cancel()
	if err := probeJetStream(pctx, r.conn); err != nil {
		r.conn.NC.Close()
		return nil, probeError(err, r.conn.URL, key)
	}
	return r.conn, nil
}

// errPermission marks a request the server refused for want of permission.
var errPermission = errors.New("permissions violation")

// probeJetStream makes the one JetStream request every operator command's
// user may make ($JS.API.INFO), and returns errPermission as soon as the
// server refuses it: a refused publish is reported asynchronously, and the
// request itself would only time out.
func probeJetStream(ctx context.Context, conn *natsx.Conn) error {
	done := make(chan error, 1)
	go func() {
		_, err := conn.JS.AccountInfo(ctx)
		done <- err
	}()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case err := <-done:
			if err != nil && refused(conn) {
				return errPermission
			}
			return err
		case <-tick.C:
			if refused(conn) {
				return errPermission
			}
		}
	}
}

// connectError is the one line saying why the connection failed.
func connectError(err error, url string, key cliKey) error {
	switch {
	case errors.Is(err, nats.ErrAuthorization) && key.path != "":
		return fmt.Errorf("prloop's NATS at %s refused %s: %w; use the key of the data directory of the prloop running there", url, key.describe(), nats.ErrAuthorization)
	case errors.Is(err, nats.ErrAuthorization):
		return fmt.Errorf("prloop's NATS at %s needs a key: %s; run where 'prloop run' keeps its data, or set PRLOOP_NATS_CREDS_FILE (%w)", url, key.missing(), nats.ErrAuthorization)
	}
	return fmt.Errorf("no prloop at %s: nothing answered within %s (is prloop running? start it with 'prloop run', or point PRLOOP_NATS_URL at its NATS): %w", url, cliConnectTimeout, rootCause(err))
}

// probeError is the one line saying why JetStream could not be used.
func probeError(err error, url string, key cliKey) error {
	switch {
	case errors.Is(err, errPermission) && key.path == "":
		return fmt.Errorf("prloop's NATS at %s lets a client without a key only observe: %s; run where 'prloop run' keeps its data, or set PRLOOP_NATS_CREDS_FILE (%w)", url, key.missing(), err)
	case errors.Is(err, errPermission):
		return fmt.Errorf("prloop's NATS at %s refused %s the JetStream requests of prloop's commands (%w): give it the cli user's key", url, key.describe(), err)
	case errors.Is(err, jetstream.ErrJetStreamNotEnabled), errors.Is(err, jetstream.ErrJetStreamNotEnabledForAccount):
		return fmt.Errorf("the NATS at %s has no JetStream: is it prloop's? (%w)", url, err)
	}
	return fmt.Errorf("prloop's NATS at %s did not answer a JetStream request within %s: %w", url, cliConnectTimeout, err)
}

// rootCause is the innermost error of err's first chain: the NATS client's
// word, without the retry loop's advice.
func rootCause(err error) error {
	for {
		var next error
		switch u := err.(type) {
		case interface{ Unwrap() error }:
			next = u.Unwrap()
		case interface{ Unwrap() []error }:
			if es := u.Unwrap(); len(es) > 0 {
				next = es[0]
			}
		}
		if next == nil {
			return err
		}
		err = next
	}
}
