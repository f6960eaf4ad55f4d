package main

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prloop/prloop/pkg/events"
	"github.com/prloop/prloop/pkg/ghref"
	"github.com/prloop/prloop/pkg/ghsim"
)

// check verifies every invariant after the run, from the event stream, the
// simulator's record of writes and state, the git repositories, the
// scripted agent's record, and the files and processes of the run.
func (w *world) check(ctx context.Context, ls []*lifecycle, pr *probe, scan *cmdScan) {
	rep := w.rep
	// Late events (a second merge attempt, a repeated escalation) need a
	// moment to show, and an escalation whose replica was killed mid-way
	// is finished by a redelivery after the consumer's ack wait: wait for
	// those, within a bound.
	sleep(ctx, 5*time.Second)
	start := time.Now()
	for time.Since(start) < 2*time.Minute && w.escalationsPending(ls) > 0 {
		sleep(ctx, time.Second)
	}
	if n := w.escalationsPending(ls); n > 0 || time.Since(start) > time.Second {
		rep.note("waited %s after the workload for requested escalations (%d still pending)", time.Since(start).Round(time.Second), n)
	}
	all := w.rec.events()
	writes := w.sim.Writes()
	rep.events, rep.lifecycles = len(all), len(ls)
	for k, v := range w.sim.FaultCounts() {
		rep.githubFault[k.String()] = v
	}
	w.rec.mu.Lock()
	malformed := slices.Clone(w.rec.malformed)
	w.rec.mu.Unlock()
	for _, m := range malformed {
		rep.violate("malformed event", "", m)
	}
	for _, l := range ls {
		w.checkLifecycle(l, writes)
	}
	w.checkRuns()
	w.checkTested()
	for _, p := range append(append([]*proc(nil), w.cl.nodes...), w.procs...) {
		if n := p.selfExits(); n > 0 {
			rep.note("%s exited on its own %d time(s) (restarted a second later): see %s/%s.*.log", p.name, n, filepath.Base(p.logs), p.name)
		}
	}
	w.checkStream(ctx, all, pr)
	w.checkToken(all, scan)
}

// escalationMarker opens every escalation comment (services/escalator's
// Marker); a chaos check must not import a service's package.
const escalationMarker = "<!-- prloop:escalation "

func (w *world) checkLifecycle(l *lifecycle, writes []ghsim.WriteRecord) {
	rep := w.rep
	if l.pr.Number == 0 {
		rep.violate("terminal", l.branch, "never opened: "+strings.Join(l.notes, "; "))
		return
	}
	name := fmt.Sprintf("%s (%s)", l.pr, l.kind)
	evs := w.rec.of(l.pr)
	term := w.rec.terminal(l.pr)
	rep.mu.Lock()
	if rep.outcomes[l.kind.String()] == nil {
		rep.outcomes[l.kind.String()] = map[string]int{}
	}
	outcome := string(term)
	if outcome == "" {
		outcome = "none"
	}
	rep.outcomes[l.kind.String()][outcome]++
	rep.mu.Unlock()
	var types []string
	for _, e := range evs {
		types = append(types, string(e.typ))
	}
	if term == "" {
		rep.violate("terminal", name, fmt.Sprintf("not merged, escalated or closed within %s; events %s; notes %s", w.o.durationLimit, strings.Join(types, ","), strings.Join(l.notes, "; ")))
	}
	info, err := w.sim.PRInfo(l.pr)
	if err != nil {
		rep.violate("simulator", name, err.Error())
		return
	}

	// Merges: at most one successful merge call, none after it, and only
	// on a head the reviewer approved (or prloop's own update of it) with
	// the approval standing.
	mergePath := fmt.Sprintf("/repos/%s/%s/pulls/%d/merge", l.repo.Owner, l.repo.Name, l.pr.Number)
	var merged, seen *ghsim.WriteRecord // the merge; its first answer the caller saw
	for i, wr := range writes {
		if wr.Method != "PUT" || wr.Path != mergePath {
			continue
		}
		if seen != nil {
			rep.violate("second merge attempt", name, fmt.Sprintf("at %s (status %d) after the merge at %s was answered", wr.Time.Format(time.StampMilli), wr.Status, seen.Time.Format(time.StampMilli)))
			continue
		}
		if wr.Status == 200 && merged == nil {
			merged = &writes[i]
		}
		// A merge whose answer the caller never saw (lost, or slowed past
		// its request timeout on a busy machine) may be retried: the
		// caller cannot know it happened. The merge's head guard makes
		// the retry harmless (405).
		if wr.Status == 200 && !wr.Unseen {
			seen = &writes[i]
		}
	}
	nMerged := w.rec.count(l.pr, events.TypeMerged)
	if nMerged > 1 {
		rep.violate("double merge", name, fmt.Sprintf("%d PRMerged events", nMerged))
	}
	if nMerged > 0 && !info.Merged {
		rep.violate("merge", name, "PRMerged on the stream but GitHub shows the PR not merged")
	}
	if merged != nil {
		if why := w.approvedAt(l, info.HeadSHA, merged.Time); why != "" {
			rep.violate("merged without approval", name, why)
		}
	}

	// Escalations: each requested one carried out (unless the PR ended
	// first), one comment per escalation, the label on an escalated PR.
	pending, escalations, requested := escalationState(evs)
	if info.State == "open" {
		for _, r := range pending {
			rep.violate("escalation not carried out", name, string(r))
		}
		if len(escalations) > 0 && !slices.Contains(info.Labels, label) {
			rep.violate("escalation label missing", name, fmt.Sprintf("labels %v", info.Labels))
		}
	}
	// prloop's other comments (the note that a fix is ready) are no
	// escalations: count those that carry the escalation's marker.
	botComments := 0
	var how []string
	comments, err := w.sim.IssueComments(l.pr)
	if err != nil {
		rep.violate("escalation comments unreadable", name, err.Error())
	}
	for _, c := range comments {
		if c.Author == botLogin && strings.HasPrefix(strings.TrimSpace(c.Body), escalationMarker) {
			botComments++
			how = append(how, c.Created.Format(time.StampMilli))
		}
	}
	// An escalator killed after its comment, on a PR that then merged or
	// closed, leaves a comment and no PREscalated: each request may have
	// its one comment.
	if allowed := max(len(escalations), requested); botComments > allowed {
		rep.violate("escalation comment twice", name, fmt.Sprintf("%d comments by %s for %d escalation(s): %s", botComments, botLogin, allowed, strings.Join(how, ", ")))
	}

	// Fix cycles counted equal pushes made, and no output of an
	// interrupted agent run was pushed.
	cycles := map[int]bool{}
	for _, e := range evs {
		if d, ok := e.data.(*events.FeedbackAddressed); ok {
			cycles[d.FixCycle] = true
		}
	}
	subjects, err := w.git(l, "log", "--first-parent", "--format=%s", info.HeadSHA)
	if err != nil {
		rep.violate("git", name, err.Error())
		return
	}
	pushes := 0
	for _, s := range strings.Split(subjects, "\n") {
		switch {
		case strings.HasPrefix(s, "chaos agent: fix"):
			pushes++
		case strings.HasPrefix(s, "chaos agent: partial"):
			pushes++
			rep.violate("interrupted agent output pushed", name, s)
		}
	}
	if pushes != len(cycles) {
		rep.violate("fix cycles != pushes", name, fmt.Sprintf("%d fix cycle(s) announced, %d agent commit(s) pushed", len(cycles), pushes))
	}
}

// approvedAt says why head was not approved at t ("" if it was): the
// reviewer's 👍 given before t, not withdrawn by t, on head or on a head
// from which only merge commits (prloop's update-branch) lead to it.
func (w *world) approvedAt(l *lifecycle, head string, t time.Time) string {
	l.mu.Lock()
	as := slices.Clone(l.approvals)
	l.mu.Unlock()
	if len(as) == 0 {
		return fmt.Sprintf("merged at %s, but the reviewer never approved", t.Format(time.StampMilli))
	}
	var why []string
	for _, a := range as {
		switch {
		case a.at.After(t):
			why = append(why, "approval after the merge")
		case !a.withdrawn.IsZero() && a.withdrawn.Before(t):
			why = append(why, fmt.Sprintf("approval withdrawn at %s before the merge at %s", a.withdrawn.Format(time.StampMilli), t.Format(time.StampMilli)))
		case a.head == head:
			return ""
		default:
			if _, err := w.git(l, "merge-base", "--is-ancestor", a.head, head); err != nil {
				why = append(why, fmt.Sprintf("approved %.7s is not an ancestor of merged %.7s", a.head, head))
				continue
			}
			out, err := w.git(l, "rev-list", "--first-parent", "--min-parents=0", "--max-parents=1", a.head+".."+head)
			if err == nil && strings.TrimSpace(out) == "" {
				return "" // only prloop's update merges since the approved head
			}
			why = append(why, fmt.Sprintf("commits other than merges between approved %.7s and merged %.7s: %s", a.head, head, strings.TrimSpace(out)))
		}
	}
	return strings.Join(why, "; ")
}

func (w *world) git(l *lifecycle, args ...string) (string, error) {
	return w.gitIn(l.repo, args...)
}

// gitIn runs git in the simulator's repository repo.
func (w *world) gitIn(repo ghref.Repo, args ...string) (string, error) {
	cmd := exec.Command("git", append([]string{"--git-dir", w.sim.GitDir(repo)}, args...)...)
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("git %s: %w", strings.Join(args, " "), err)
	}
	return string(out), nil
}

// checkRuns reads the scripted agent's record: no two runs overlapped on
// one PR (the kernel's lock says so).
func (w *world) checkRuns() {
	b, err := os.ReadFile(filepath.Join(w.dir, "records", "runs"))
	if err != nil {
		w.rep.note("no agent ran: %v", err)
		return
	}
	starts := 0
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		switch f[0] {
		case "start":
			starts++
		case "overlap":
			w.rep.violate("agent runs overlap", f[1], "run "+f[2]+" started while another agent for the PR was alive")
		}
	}
	w.rep.note("%d agent runs", starts)
}

// checkStream: every event the recorder saw (JetStream had stored it) and
// every publish the probe had acknowledged is still in its stream after
// the node losses, and nothing ended in the dead-letter stream.
func (w *world) checkStream(ctx context.Context, all []seen, pr *probe) {
	cctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	missing, acked, err := pr.missing(cctx)
	w.rep.probeAcked = acked
	if err != nil {
		w.rep.violate("acknowledged publish lost", "", err.Error())
	}
	if len(missing) > 0 {
		w.rep.violate("acknowledged publish lost", "", fmt.Sprintf("%d of %d probe messages: %v", len(missing), acked, missing[:min(10, len(missing))]))
	}
	s, err := w.js.Stream(cctx, events.StreamName)
	if err != nil {
		w.rep.violate("event stream", "", err.Error())
		return
	}
	lost := 0
	for _, e := range all {
		m, err := s.GetMsg(cctx, e.seq)
		if err != nil || !bytes.Equal(m.Data, e.raw) {
			lost++
		}
	}
	if lost > 0 {
		w.rep.violate("event lost", "", fmt.Sprintf("%d of %d events seen during the run are no longer in %s", lost, len(all), events.StreamName))
	}
	dlq, err := w.js.Stream(cctx, events.DLQStreamName)
	if err != nil {
		w.rep.violate("dead letters", "", err.Error())
		return
	}
	info, err := dlq.Info(cctx)
	if err != nil {
		w.rep.violate("dead letters", "", err.Error())
		return
	}
	for seq := info.State.FirstSeq; info.State.Msgs > 0 && seq <= info.State.LastSeq; seq++ {
		m, err := dlq.GetMsg(cctx, seq)
		if err != nil {
			continue
		}
		w.rep.violate("dead letter", "", fmt.Sprintf("%s: %s", m.Subject, m.Header))
	}
}

// checkToken: the token is in no file of the run (logs, workspaces, agent
// records, NATS stores, repositories), no event, no webhook and no command
// line seen during the run.
func (w *world) checkToken(all []seen, scan *cmdScan) {
	tok := []byte(w.token)
	_ = filepath.WalkDir(w.dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return nil
		}
		if fi, err := d.Info(); err != nil || fi.Size() > 64<<20 || !fi.Mode().IsRegular() {
			return nil
		}
		b, err := os.ReadFile(path)
		if err == nil && bytes.Contains(b, tok) {
			w.rep.violate("token leaked", "", "in "+path)
		}
		return nil
	})
	for _, e := range all {
		if bytes.Contains(e.raw, tok) {
			w.rep.violate("token leaked", "", "in event "+e.id)
		}
	}
	for _, b := range w.hooks.webhookBodies() {
		if strings.Contains(b, w.token) {
			w.rep.violate("token leaked", "", "in an escalation webhook")
		}
	}
	hits, scans := scan.result()
	for _, h := range hits {
		w.rep.violate("token leaked", "", "in a command line: "+h)
	}
	w.rep.note("%d scans of every process's command line", scans)
}

// cmdScan reads every process's command line every 50 ms during the run.
type cmdScan struct {
	done  chan struct{}
	wg    sync.WaitGroup
	mu    sync.Mutex
	hits  []string
	scans int
}

func startCmdlineScan(secret string) *cmdScan {
	s := &cmdScan{done: make(chan struct{})}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		t := time.NewTicker(50 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-s.done:
				return
			case <-t.C:
			}
			h := cmdlinesWith(secret)
			s.mu.Lock()
			s.hits = append(s.hits, h...)
			s.scans++
			s.mu.Unlock()
		}
	}()
	return s
}

func (s *cmdScan) stop() {
	close(s.done)
	s.wg.Wait()
}

func (s *cmdScan) result() ([]string, int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.hits, s.scans
}

// escalationsPending counts the requested escalations of open PRs not yet
// carried out.
func (w *world) escalationsPending(ls []*lifecycle) int {
	n := 0
	for _, l := range ls {
		if l.pr.Number == 0 {
			continue
		}
		if info, err := w.sim.PRInfo(l.pr); err != nil || info.State != "open" {
			continue
		}
		pending, _, _ := escalationState(w.rec.of(l.pr))
		n += len(pending)
	}
	return n
}

// escalationState returns the reasons of a PR's requested escalations not
// carried out, its escalations carried out (reason/epoch), and how many
// reasons were requested.
func escalationState(evs []seen) (pending []events.Reason, done map[string]bool, requestedN int) {
	requested, carried := map[events.Reason]bool{}, map[events.Reason]bool{}
	done = map[string]bool{}
	for _, e := range evs {
		switch d := e.data.(type) {
		case *events.EscalationRequested:
			requested[d.Reason] = true
		case *events.ReviewTimeout:
			// The escalator takes the poller's ReviewTimeout as its request.
			requested[events.ReasonReviewTimeout] = true
		case *events.Escalated:
			carried[d.Reason] = true
			done[string(d.Reason)+"/"+strconv.Itoa(d.Epoch)] = true
		}
	}
	for r := range requested {
		if !carried[r] {
			pending = append(pending, r)
		}
	}
	return pending, done, len(requested)
}
