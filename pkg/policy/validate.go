package policy

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
)

// Enumerations of the file's values.
var (
	// Protocols are the review protocols a file may name ("native" and
	// "reviews" are the same: GitHub's own reviews).
	Protocols = []string{"emoji", "native", "reviews", "quorum"}
	// MergeMethods are GitHub's merge methods.
	MergeMethods = []string{"squash", "merge", "rebase"}
	// FixChecks are the values of feedback.fix_checks.
	FixChecks = []string{"none", "required", "all"}
	// QueueModes are the merge queue's modes.
	QueueModes = []string{"serial", "speculative"}
)

var (
	loginRE = regexp.MustCompile(`^[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})(?:\[bot\])?$`)
	teamRE  = regexp.MustCompile(`^@[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})/[A-Za-z0-9._-]+$`)
)

// validate checks the values the decoder could type but not judge.
func validate(f *File, d *decoder) {
	if l, ok := d.lines["version"]; ok && f.Version != Version {
		d.problem(l, "version", fmt.Sprintf("version: %d is not a version this prloop reads, want %d", f.Version, Version))
	}
	validateSection(&f.Section, "", d)
	for _, b := range f.Branches {
		validateSection(&b.Section, fmt.Sprintf("branches.%q.", b.Glob), d)
	}
}

func validateSection(s *Section, prefix string, d *decoder) {
	bad := func(key, msg string, args ...any) {
		d.problem(d.lines[prefix+key], prefix+key, prefix+key+": "+fmt.Sprintf(msg, args...))
	}
	if r := s.Review; r != nil {
		for i, p := range r.Protocols {
			if !slices.Contains(Protocols, p) {
				bad(fmt.Sprintf("review.protocols[%d]", i), "unknown protocol %q, want %s", p, oneOf(Protocols))
			}
		}
		if r.Protocols != nil && len(r.Protocols) == 0 {
			bad("review.protocols", "empty: enable at least one of %s", oneOf(Protocols))
		}
		if r.Reviewers != nil {
			for i, who := range *r.Reviewers {
				if !loginRE.MatchString(who) && !teamRE.MatchString(who) {
					bad(fmt.Sprintf("review.reviewers[%d]", i), "%q is neither a login nor an organisation team (@org/team)", who)
				}
			}
		}
		for i, q := range r.Quorum {
			login, _, _ := strings.Cut(q, "/")
			if !loginRE.MatchString(login) {
				bad(fmt.Sprintf("review.quorum[%d]", i), "%q: want a bot's login, or login/marker text", q)
			}
		}
		if r.Timeout != nil && *r.Timeout <= 0 {
			bad("review.timeout", "want a positive duration")
		}
	}
	if fb := s.Feedback; fb != nil {
		if fb.MaxFixCycles != nil && *fb.MaxFixCycles < 0 {
			bad("feedback.max_fix_cycles", "want 0 or more, got %d", *fb.MaxFixCycles)
		}
		if fb.FixChecks != "" && !slices.Contains(FixChecks, fb.FixChecks) {
			bad("feedback.fix_checks", "%q: want %s", fb.FixChecks, oneOf(FixChecks))
		}
	}
	if a := s.Agent; a != nil {
		if a.Timeout != nil && *a.Timeout <= 0 {
			bad("agent.timeout", "want a positive duration")
		}
		if a.Budget != nil && *a.Budget <= 0 {
			bad("agent.budget", "want a positive duration")
		}
	}
	if m := s.Merge; m != nil {
		if m.Method != "" && !slices.Contains(MergeMethods, m.Method) {
			bad("merge.method", "%q: want %s", m.Method, oneOf(MergeMethods))
		}
		if m.RequiredChecks != nil {
			for i, c := range *m.RequiredChecks {
				if strings.TrimSpace(c) == "" {
					bad(fmt.Sprintf("merge.required_checks[%d]", i), "empty check name")
				}
			}
		}
		if q := m.Queue; q != nil {
			if q.Mode != "" && !slices.Contains(QueueModes, q.Mode) {
				bad("merge.queue.mode", "%q: want %s", q.Mode, oneOf(QueueModes))
			}
			if q.Depth != nil && *q.Depth < 1 {
				bad("merge.queue.depth", "want 1 or more, got %d", *q.Depth)
			}
		}
	}
	if e := s.Escalation; e != nil {
		if d.lines[prefix+"escalation.label"] != 0 && strings.TrimSpace(e.Label) == "" {
			bad("escalation.label", "empty: name a label, or leave the key out")
		}
		if e.Mentions != nil {
			for i, m := range *e.Mentions {
				if !strings.HasPrefix(m, "@") || (!loginRE.MatchString(m[1:]) && !teamRE.MatchString(m)) {
					bad(fmt.Sprintf("escalation.mentions[%d]", i), "%q: want @login or @org/team", m)
				}
			}
		}
	}
}

func oneOf(vals []string) string {
	if len(vals) == 1 {
		return vals[0]
	}
	return strings.Join(vals[:len(vals)-1], ", ") + " or " + vals[len(vals)-1]
}
