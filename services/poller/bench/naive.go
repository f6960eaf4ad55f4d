package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prloop/prloop/pkg/events"
	"github.com/prloop/prloop/pkg/ghref"
	"github.com/prloop/prloop/pkg/github"
	"github.com/prloop/prloop/pkg/natsx"
	"github.com/prloop/prloop/pkg/review"
)

// runNaive is the baseline: every tick, for every PR, two unconditional
// requests (reactions and comments), the emoji protocol, an event on each
// change. It exists only in the bench, to measure what prloop's design saves.
func runNaive(ctx context.Context) error {
	interval, err := time.ParseDuration(os.Getenv("PRLOOP_POLL_INTERVAL"))
	if err != nil {
		return fmt.Errorf("PRLOOP_POLL_INTERVAL: %w", err)
	}
	conc, _ := strconv.Atoi(os.Getenv("BENCH_CONCURRENCY"))
	client, err := github.New(ctx, github.Config{
		APIURL: os.Getenv("PRLOOP_GITHUB_API_URL"), Token: github.Secret(os.Getenv("GITHUB_TOKEN")),
		CacheMaxBytes: -1, // unconditional requests: the naive design keeps no ETags
	}, github.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		return err
	}
	// The same credentials as prloop's poller: the server's anonymous user
	// may only watch.
	conn, err := natsx.Connect(ctx, natsx.Options{URL: os.Getenv("PRLOOP_NATS_URL"), CredsFile: os.Getenv("PRLOOP_NATS_CREDS_FILE"), Name: "naive"})
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	emit := events.NewEmitter(conn.JS, "naive")

	var prs []ghref.PR
	for _, r := range strings.Split(os.Getenv("PRLOOP_REPOS"), ",") {
		repo, err := ghref.ParseRepo(r)
		if err != nil {
			return err
		}
		pulls, err := client.ListPulls(ctx, repo, "open")
		if err != nil {
			return err
		}
		for _, p := range pulls {
			// Only the PRs prloop's poller watches (PRLOOP_WATCH_AUTHORS).
			if a := os.Getenv("PRLOOP_WATCH_AUTHORS"); a != "" && !strings.EqualFold(a, p.GetUser().GetLogin()) {
				continue
			}
			prs = append(prs, repo.PR(p.GetNumber()))
		}
	}
	status := make([]events.Status, len(prs))
	transitions := make([]int, len(prs))
	policy := review.Policy{Protocols: []review.Protocol{review.ProtocolEmoji}}
	allowed := func(login string) bool { return login == "alice" }
	sem := make(chan struct{}, max(1, conc))
	// A status it cannot publish ends the run: the bench waits for every
	// PR's first status and must not wait for nothing.
	published := make(chan error, 1)
	for {
		tick := time.Now()
		var wg sync.WaitGroup
		for i, pr := range prs {
			if ctx.Err() != nil {
				break
			}
			sem <- struct{}{}
			wg.Add(1)
			go func() {
				defer func() { <-sem; wg.Done() }()
				reactions, err := review.GatherReactions(ctx, client, pr)
				if err != nil {
					return
				}
				cs, err := client.ListIssueComments(ctx, pr, time.Time{})
				if err != nil {
					return
				}
				sig := review.Signals{Reactions: reactions}
				for _, c := range cs {
					sig.Comments = append(sig.Comments, review.Comment{ID: c.GetID(), User: review.User{Login: c.GetUser().GetLogin()}, Body: c.GetBody(), CreatedAt: c.GetCreatedAt().Time})
				}
				v := review.Evaluate(sig, review.Head{Author: "agent"}, policy, allowed)
				if v.Status == status[i] {
					return
				}
				status[i] = v.Status
				transitions[i]++
				b := events.Base{PR: pr}
				var d events.Data
				switch v.Status {
				case events.StatusApproved:
					d = &events.ReviewApproved{Base: b, Status: v.Status}
				case events.StatusInProgress:
					d = &events.ReviewInProgress{Base: b, Status: v.Status}
				case events.StatusChangesRequested:
					d = &events.FeedbackReceived{Base: b, Status: v.Status}
				default:
					d = &events.ReviewPending{Base: b, Status: events.StatusPending}
				}
				if _, _, err := emit.Emit(ctx, d, strconv.Itoa(transitions[i])); err != nil && ctx.Err() == nil {
					select {
					case published <- fmt.Errorf("publish the status of %s: %w", pr, err):
					default:
					}
				}
			}()
		}
		wg.Wait()
		if ctx.Err() != nil {
			return nil
		}
		select {
		case err := <-published:
			return err
		default:
		}
		if rest := interval - time.Since(tick); rest > 0 {
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(rest):
			}
		}
	}
}
