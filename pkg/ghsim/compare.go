package ghsim

import (
	"strconv"
	"strings"
)

// maxCompareCommits is how many commits GitHub lists in a comparison
// (the oldest 250 of base..head; total_commits counts them all).
const maxCompareCommits = 250

type jComparison struct {
	URL             string    `json:"url"`
	HTMLURL         string    `json:"html_url"`
	PermalinkURL    string    `json:"permalink_url"`
	DiffURL         string    `json:"diff_url"`
	PatchURL        string    `json:"patch_url"`
	BaseCommit      jCommit   `json:"base_commit"`
	MergeBaseCommit jCommit   `json:"merge_base_commit"`
	Status          string    `json:"status"`
	AheadBy         int       `json:"ahead_by"`
	BehindBy        int       `json:"behind_by"`
	TotalCommits    int       `json:"total_commits"`
	Commits         []jCommit `json:"commits"`
}

// compareHandler serves GET /repos/{owner}/{repo}/compare/{base}...{head}
// from git, as GitHub's "Compare two commits" documents it: ahead_by counts
// the commits of head not in base, behind_by those of base not in head,
// status is identical, ahead, behind or diverged, base_commit is base and
// merge_base_commit their merge base, commits are base..head oldest first
// (at most 250), paginated by page and per_page as GitHub's are (the counts
// cover them all). Base and head are branch names or shas of the repository;
// an unknown one, or no "...", is 404. Files are not listed.
func (s *Sim) compareHandler(c *reqCtx) *result {
	rp, res := c.repo()
	if res != nil {
		return res
	}
	basehead := c.r.PathValue("basehead")
	baseRef, headRef, ok := strings.Cut(basehead, "...")
	if !ok || baseRef == "" || headRef == "" {
		return notFound()
	}
	rp.mu.Lock()
	baseSHA, okBase := rp.resolveRef(baseRef)
	headSHA, okHead := rp.resolveRef(headRef)
	rp.mu.Unlock()
	if !okBase || !okHead {
		return notFound()
	}
	out, err := s.git(rp.dir, nil, nil, "rev-list", "--left-right", "--count", baseSHA+"..."+headSHA)
	if err != nil {
		return notFound() // a sha that is not a commit of the repository
	}
	f := strings.Fields(out)
	if len(f) != 2 {
		return errResult(500, "Server Error")
	}
	behind, _ := strconv.Atoi(f[0])
	ahead, _ := strconv.Atoi(f[1])
	mb, err := s.git(rp.dir, nil, nil, "merge-base", baseSHA, headSHA)
	if err != nil {
		return errResult(404, "No common ancestor between "+baseRef+" and "+headRef+".")
	}
	mb = strings.TrimSpace(mb)
	ends, err := s.commitsWire(rp, c.base, "--no-walk=unsorted", baseSHA, mb)
	if err == nil && mb == baseSHA && len(ends) == 1 {
		ends = append(ends, ends[0]) // git lists a commit once
	}
	if err != nil || len(ends) != 2 {
		return errResult(500, "Server Error")
	}
	commits, err := s.commitsWire(rp, c.base, "--reverse", baseSHA+".."+headSHA)
	if err != nil {
		return errResult(500, "Server Error")
	}
	commits = commits[:min(len(commits), maxCompareCommits)]
	start, end, link := c.window(len(commits))
	commits = append([]jCommit{}, commits[start:end]...)
	status := "diverged"
	switch {
	case ahead == 0 && behind == 0:
		status = "identical"
	case behind == 0:
		status = "ahead"
	case ahead == 0:
		status = "behind"
	}
	u, web := rp.apiURL(c.base)+"/compare/"+basehead, webBase(c.base)+"/"+rp.ref.String()+"/compare/"
	owner := rp.ref.Owner
	res = jsonResult(200, jComparison{
		URL: u, HTMLURL: web + basehead, PermalinkURL: web + owner + ":" + baseSHA + "..." + owner + ":" + headSHA,
		DiffURL: web + basehead + ".diff", PatchURL: web + basehead + ".patch",
		BaseCommit: ends[0], MergeBaseCommit: ends[1], Status: status,
		AheadBy: ahead, BehindBy: behind, TotalCommits: ahead, Commits: commits,
	})
	if link != "" {
		res.setHeader("Link", link)
	}
	return res
}
