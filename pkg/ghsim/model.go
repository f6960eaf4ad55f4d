package ghsim

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prloop/prloop/pkg/ghref"
)

// user is immutable after creation.
type user struct {
	login string
	id    int64
	bot   bool
	// cached JSON of the simple-user object for one API base URL
	cache atomic.Pointer[cachedJSON]
}

type cachedJSON struct {
	base string
	b    json.RawMessage
}

func (u *user) typ() string {
	if u.bot {
		return "Bot"
	}
	return "User"
}

func (u *user) wire(base string) jUser {
	ub := base + "/users/" + u.login
	kind := "04:User"
	if u.bot {
		kind = "03:Bot"
	}
	return jUser{
		Login:             u.login,
		ID:                u.id,
		NodeID:            nodeID(kind, u.id),
		AvatarURL:         "https://avatars.githubusercontent.com/u/" + itoa64(u.id) + "?v=4",
		GravatarID:        "",
		URL:               ub,
		HTMLURL:           webBase(base) + "/" + u.login,
		FollowersURL:      ub + "/followers",
		FollowingURL:      ub + "/following{/other_user}",
		GistsURL:          ub + "/gists{/gist_id}",
		StarredURL:        ub + "/starred{/owner}{/repo}",
		SubscriptionsURL:  ub + "/subscriptions",
		OrganizationsURL:  ub + "/orgs",
		ReposURL:          ub + "/repos",
		EventsURL:         ub + "/events{/privacy}",
		ReceivedEventsURL: ub + "/received_events",
		Type:              u.typ(),
		UserViewType:      "public",
	}
}

// json returns the user's simple-user object, cached per base URL.
func (u *user) json(base string) json.RawMessage {
	if u == nil {
		return json.RawMessage("null")
	}
	if c := u.cache.Load(); c != nil && c.base == base {
		return c.b
	}
	b, _ := json.Marshal(u.wire(base))
	u.cache.Store(&cachedJSON{base: base, b: b})
	return b
}

type label struct {
	id    int64
	name  string
	color string
}

type reaction struct {
	id      int64
	user    *user
	content string
	created time.Time
}

type issueComment struct {
	id      int64
	user    *user
	body    string
	created time.Time
	updated time.Time
	pr      *pr
	// reactions are the comment's own (comments.go), not the PR's.
	reactions []*reaction
}

type reviewComment struct {
	id           int64
	reviewID     int64 // 0 = none
	user         *user
	body         string
	path         string
	line         int
	side         string
	commitID     string
	origCommitID string
	inReplyTo    int64
	diffHunk     string
	created      time.Time
	updated      time.Time
	pr           *pr
}

type review struct {
	id        int64
	user      *user
	body      string
	state     string // APPROVED, CHANGES_REQUESTED, COMMENTED, PENDING
	commitID  string
	submitted time.Time
}

type commitStatus struct {
	id          int64
	context     string
	state       string
	description string
	targetURL   string
	creator     string
	created     time.Time
	updated     time.Time
}

type checkRun struct {
	id         int64
	suiteID    int64
	name       string
	sha        string
	status     string
	conclusion string
	title      string // output.title, "" for none
	summary    string // output.summary, "" for none
	// text is output.text, and annotations the run's annotations
	// (actions.go).
	text        string
	annotations []Annotation
	started     time.Time
	completed   time.Time
}

// mergeInfo is what git says about a (head, base) pair; cached because it
// costs git processes.
type mergeInfo struct {
	conflict     bool
	behind       int // commits on base not in head
	ahead        int // commits on head not in base
	additions    int
	deletions    int
	changedFiles int
}

type pr struct {
	number  int
	id      int64 // pull request id
	issueID int64
	user    *user
	title   string
	body    string
	headRef string
	baseRef string
	headSHA string
	baseSHA string
	// moved is when the sim last saw head or base move (or the PR open):
	// mergeability is "unknown" for Sim.SetMergeabilityDelay after it.
	moved     time.Time
	draft     bool
	state     string // open, closed
	merged    bool
	mergedAt  time.Time
	mergedBy  *user
	mergeSHA  string
	created   time.Time
	updated   time.Time
	closed    time.Time
	labels    []*label
	reactions []*reaction
	comments  []*issueComment
	rcomments []*reviewComment
	reviews   []*review
	reviewers []*user
	// headRepoGone is a head repository deleted since (a fork whose owner
	// deleted it): head.repo renders null, as GitHub answers then.
	headRepoGone bool
	// ver moves on every change that alters the PR's or issue's JSON.
	ver         uint64
	simpleCache cacheSlot
	issueCache  cacheSlot
}

type cacheSlot struct {
	ver, repoVer uint64
	base         string
	b            json.RawMessage
}

func (c *cacheSlot) get(ver, repoVer uint64, base string) json.RawMessage {
	if c.b != nil && c.ver == ver && c.repoVer == repoVer && c.base == base {
		return c.b
	}
	return nil
}

func (c *cacheSlot) put(ver, repoVer uint64, base string, b json.RawMessage) {
	*c = cacheSlot{ver: ver, repoVer: repoVer, base: base, b: b}
}

// touch records a change that GitHub reports through updated_at.
func (p *pr) touch(now time.Time) {
	p.updated = now
	p.ver++
}

type repo struct {
	ref     ghref.Repo // canonical spelling
	id      int64
	owner   *user
	dir     string
	created time.Time

	// gitMu serialises the sim's own ref updates on this repository, so
	// merges and branch updates are compare-and-swap safe among themselves.
	// Order: gitMu before mu.
	gitMu sync.Mutex

	mu           sync.Mutex
	defBranch    string
	archived     bool // SetArchived; owner listings and searches see it
	pushed       time.Time
	updated      time.Time
	perms        map[string]string // lower login -> permission
	contributors map[int64]bool    // authors of merged PRs
	prs          map[int]*pr
	order        []*pr // by number
	nextNumber   int
	labels       map[string]*label // lower name
	icomments    []*issueComment   // all issue comments, oldest first
	rcomments    []*reviewComment  // all review comments, oldest first
	statuses     map[string][]*commitStatus
	// statusLog is every status ever set per sha, oldest first (GitHub
	// keeps them all and lists them; the combined status shows the latest
	// per context).
	statusLog map[string][]*commitStatus
	// moves is every move of a branch the simulator made itself (a merge,
	// an update-branch, PushCommit), oldest first: BranchMoves.
	moves    []BranchMove
	checks   map[string][]*checkRun
	checkLog map[string][]checkRun   // every write of a check run per sha, as written
	rules    map[string]*branchRules // branch -> its ruleset's required checks (SetRuleset)
	// protection is classic branch protection per branch (SetBranchProtection).
	protection map[string]*branchRules
	merges     map[[2]string]mergeInfo
	refs       map[string]refEntry
	packed     packedRefs
	ver        uint64 // moves when the embedded repo JSON changes
	repoCache  cacheSlot
}

type refEntry struct {
	ino   uint64
	mtime int64
	size  int64
	sha   string
}

type packedRefs struct {
	ino   uint64
	mtime int64
	size  int64
	refs  map[string]string
}

// readRef returns the sha of refs/heads/<branch> by reading the bare
// repository's files: a loose ref (cached by inode and mtime, since git
// replaces ref files by rename) or packed-refs. No process is spawned.
// rp.mu must be held.
func (rp *repo) readRef(branch string) (string, bool) {
	if !validBranch(branch) {
		return "", false
	}
	name := "refs/heads/" + branch
	p := filepath.Join(rp.dir, filepath.FromSlash(name))
	if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() {
		ino := inode(fi)
		if e, ok := rp.refs[branch]; ok && e.ino == ino && e.mtime == fi.ModTime().UnixNano() && e.size == fi.Size() {
			return e.sha, true
		}
		b, err := os.ReadFile(p)
		if err == nil {
			sha := strings.TrimSpace(string(b))
			if isSHA(sha) {
				rp.refs[branch] = refEntry{ino: ino, mtime: fi.ModTime().UnixNano(), size: fi.Size(), sha: sha}
				return sha, true
			}
		}
	}
	delete(rp.refs, branch)
	return rp.readPacked(name)
}

func (rp *repo) readPacked(name string) (string, bool) {
	p := filepath.Join(rp.dir, "packed-refs")
	fi, err := os.Stat(p)
	if err != nil {
		rp.packed = packedRefs{}
		return "", false
	}
	ino := inode(fi)
	if rp.packed.refs == nil || rp.packed.ino != ino || rp.packed.mtime != fi.ModTime().UnixNano() || rp.packed.size != fi.Size() {
		b, err := os.ReadFile(p)
		if err != nil {
			return "", false
		}
		refs := map[string]string{}
		for _, line := range strings.Split(string(b), "\n") {
			if line == "" || line[0] == '#' || line[0] == '^' {
				continue
			}
			sha, ref, ok := strings.Cut(line, " ")
			if ok && isSHA(sha) {
				refs[ref] = sha
			}
		}
		rp.packed = packedRefs{ino: ino, mtime: fi.ModTime().UnixNano(), size: fi.Size(), refs: refs}
	}
	sha, ok := rp.packed.refs[name]
	return sha, ok
}

func inode(fi os.FileInfo) uint64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return st.Ino
	}
	return 0
}

func isSHA(s string) bool {
	if len(s) != 40 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// validBranch is a conservative subset of git check-ref-format, enough to
// keep API input from escaping refs/heads.
func validBranch(b string) bool {
	if b == "" || len(b) > 255 || strings.HasPrefix(b, "/") || strings.HasSuffix(b, "/") ||
		strings.HasSuffix(b, ".lock") || strings.HasSuffix(b, ".") || strings.Contains(b, "..") ||
		strings.Contains(b, "//") || strings.Contains(b, "@{") || b == "@" {
		return false
	}
	for _, seg := range strings.Split(b, "/") {
		if strings.HasPrefix(seg, ".") {
			return false
		}
	}
	for _, r := range b {
		if r < 0x20 || r == 0x7f || strings.ContainsRune(" ~^:?*[\\", r) {
			return false
		}
	}
	return true
}

// refreshLocked brings an open PR's head and base shas in line with the
// branches on disk. A moved head is a push: updated_at moves, as on GitHub.
// A deleted head or base branch closes the PR, as GitHub does. rp.mu must be held.
func (rp *repo) refreshLocked(p *pr, now time.Time) {
	if p.state != "open" {
		return
	}
	head, ok := rp.readRef(p.headRef)
	base, baseOK := rp.readRef(p.baseRef)
	if !ok || !baseOK {
		p.state = "closed"
		p.closed = now
		p.touch(now)
		rp.ver++
		return
	}
	if head != p.headSHA {
		p.headSHA = head
		p.moved = now
		p.touch(now)
		if now.After(rp.pushed) {
			rp.pushed = now
			rp.ver++
		}
	}
	if base != p.baseSHA {
		p.baseSHA = base
		p.moved = now
		p.ver++
	}
}

func (rp *repo) openCount() int {
	n := 0
	for _, p := range rp.order {
		if p.state == "open" {
			n++
		}
	}
	return n
}

var permRank = map[string]int{"none": 0, "read": 1, "triage": 2, "write": 3, "maintain": 4, "admin": 5}

// permOf returns u's permission on the repository; rp.mu must be held. All
// simulated repositories are public, so everyone can read.
func (rp *repo) permOf(u *user) string {
	if u == nil {
		return "read"
	}
	if strings.EqualFold(u.login, rp.owner.login) {
		return "admin"
	}
	if p, ok := rp.perms[strings.ToLower(u.login)]; ok && permRank[p] > permRank["read"] {
		return p
	}
	return "read"
}

func (rp *repo) association(u *user) string {
	if u == nil {
		return "NONE"
	}
	if strings.EqualFold(u.login, rp.owner.login) {
		return "OWNER"
	}
	if p, ok := rp.perms[strings.ToLower(u.login)]; ok && permRank[p] >= permRank["read"] {
		return "COLLABORATOR"
	}
	if rp.contributors[u.id] {
		return "CONTRIBUTOR"
	}
	return "NONE"
}
