package ghsim

import (
	"net/http"
	"strings"
	"time"
)

// randomFault draws a fault for a request when Options.FaultRate asks for
// flakiness: each kind only where GitHub shows it, so that every fault a
// client sees is one it must survive in production. Reads may come back
// truncated, not JSON, or (a pull request) as an empty object; writes may
// happen with their answer lost; a permission lookup may fail.
func (s *Sim) randomFault(r *http.Request, route string) *Fault {
	if s.opts.FaultRate <= 0 || route == "GET /rate_limit" {
		return nil
	}
	s.faultMu.Lock()
	defer s.faultMu.Unlock()
	if s.faultRand.Float64() >= s.opts.FaultRate {
		return nil
	}
	kinds := []FaultKind{FaultStatus500, FaultStatus502, FaultStatus429, FaultSecondaryLimit, FaultTimeout}
	read := r.Method == http.MethodGet || r.Method == http.MethodHead
	switch {
	case strings.HasSuffix(route, "/permission"):
		kinds = append(kinds, FaultForbidden, FaultForbidden, FaultStatus500)
	case read:
		kinds = append(kinds, FaultMalformedJSON, FaultGarbledJSON)
		if strings.HasSuffix(route, "/pulls/{number}") {
			kinds = append(kinds, FaultEmptyObject, FaultEmptyObject)
		}
	default:
		kinds = append(kinds, FaultLostAnswer)
	}
	f := &Fault{Kind: kinds[s.faultRand.IntN(len(kinds))], RetryAfter: time.Second}
	if f.Kind == FaultTimeout && !read {
		// A write that times out may still have happened, as on GitHub.
		f.Delay = time.Duration(1+s.faultRand.IntN(3)) * time.Second
	}
	return f
}

func (s *Sim) countFault(k FaultKind) {
	s.faultMu.Lock()
	s.faultCounts[k]++
	s.faultMu.Unlock()
}

// FaultCounts returns how many faults of each kind were served, injected
// or random.
func (s *Sim) FaultCounts() map[FaultKind]int {
	s.faultMu.Lock()
	defer s.faultMu.Unlock()
	out := make(map[FaultKind]int, len(s.faultCounts))
	for k, v := range s.faultCounts {
		out[k] = v
	}
	return out
}

// WriteRecord is one request that could change the simulated GitHub (any
// method but GET and HEAD), as the simulator answered it.
type WriteRecord struct {
	// Time is when the request arrived, before the simulator acted on it.
	Time   time.Time
	Method string
	// Path is the request's path, without /api/v3.
	Path string
	// Route is the matched pattern, e.g. "PUT /repos/{owner}/{repo}/pulls/{number}/merge".
	Route string
	// Login is the authenticated user, "" without one.
	Login string
	// Status is the answer's status; the client may never have seen it
	// (Fault is FaultLostAnswer, or a FaultTimeout it gave up on).
	Status int
	// Fault is the fault served with the request, 0 for none.
	Fault FaultKind
	// Unseen is true when the client cannot have seen the answer: it was
	// lost (FaultLostAnswer), or the client had given up on the request
	// (a write slowed past its request timeout) before the answer was
	// written. Such a client cannot know the write happened, and may
	// rightly send it again.
	Unseen bool
}

func (s *Sim) recordWrite(c *reqCtx, status int, f *Fault, unseen bool) {
	if c.r.Method == http.MethodGet || c.r.Method == http.MethodHead {
		return
	}
	w := WriteRecord{Time: c.now, Method: c.r.Method, Path: c.r.URL.Path, Route: c.route, Status: status, Unseen: unseen}
	if c.user != nil {
		w.Login = c.user.login
	}
	if f != nil {
		w.Fault = f.Kind
	}
	s.writeMu.Lock()
	s.writes = append(s.writes, w)
	s.writeMu.Unlock()
}

// Writes returns the record of every write request answered so far, in
// the order answered: the simulator's side of what a client did, against
// which a chaos run checks, say, that no PR was merged twice.
func (s *Sim) Writes() []WriteRecord {
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	return append([]WriteRecord(nil), s.writes...)
}
