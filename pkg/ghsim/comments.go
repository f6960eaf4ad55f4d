package ghsim

import (
	"slices"
	"strconv"
	"strings"
)

// commentRoutes serves a conversation comment by its id: its reactions and
// its edit, as GitHub documents them in "REST API endpoints for issue
// comments" (Update an issue comment) and "REST API endpoints for
// reactions" (List and Create reactions for an issue comment).
func (s *Sim) commentRoutes() {
	const c = "/repos/{owner}/{repo}/issues/comments/{comment_id}"
	// GET of one comment is not served: its pattern would collide with
	// GET /issues/{number}/comments in the mux, and prloop reads lists.
	s.handle("PATCH "+c, s.editIssueComment)
	s.handle("GET "+c+"/reactions", s.listCommentReactions)
	s.handle("POST "+c+"/reactions", s.createCommentReaction)
}

// comment finds the repository's conversation comment named in the path.
func (c *reqCtx) comment() (*repo, *issueComment, *result) {
	rp, res := c.repo()
	if res != nil {
		return nil, nil, res
	}
	id, err := strconv.ParseInt(c.r.PathValue("comment_id"), 10, 64)
	if err != nil {
		return nil, nil, notFound()
	}
	rp.mu.Lock()
	defer rp.mu.Unlock()
	for _, ic := range rp.icomments {
		if ic.id == id {
			return rp, ic, nil
		}
	}
	return nil, nil, notFound()
}

// editIssueComment replaces a comment's body: its author may, and so may
// whoever has write permission (GitHub answers others 403). updated_at
// moves, on the comment and on the PR, as an edit does on GitHub.
func (s *Sim) editIssueComment(c *reqCtx) *result {
	rp, ic, res := c.comment()
	if res != nil {
		return res
	}
	var in struct {
		Body *string `json:"body"`
	}
	if res := c.decode(&in); res != nil {
		return res
	}
	if in.Body == nil || strings.TrimSpace(*in.Body) == "" {
		return validation(jErrItem{Resource: "IssueComment", Field: "body", Code: "missing_field"})
	}
	rp.mu.Lock()
	defer rp.mu.Unlock()
	if c.user != ic.user {
		if err := rp.requirePerm(c.user, "write"); err != nil {
			return resultOf(err)
		}
	}
	ic.body, ic.updated = *in.Body, c.now
	ic.pr.touch(c.now)
	return jsonResult(200, issueCommentWire(rp, ic, c.base))
}

func (s *Sim) listCommentReactions(c *reqCtx) *result {
	rp, ic, res := c.comment()
	if res != nil {
		return res
	}
	return pagedReactions(c, rp, func() []*reaction { return ic.reactions })
}

// createCommentReaction adds the user's reaction to a comment: 201 when
// new, 200 with the existing one when the user already reacted so, as on
// GitHub. A reaction moves no updated_at.
func (s *Sim) createCommentReaction(c *reqCtx) *result {
	rp, ic, res := c.comment()
	if res != nil {
		return res
	}
	var in struct {
		Content string `json:"content"`
	}
	if res := c.decode(&in); res != nil {
		return res
	}
	if !slices.Contains(reactionContents, in.Content) {
		return validation(jErrItem{Resource: "Reaction", Field: "content", Code: "invalid"})
	}
	rp.mu.Lock()
	defer rp.mu.Unlock()
	r, created := s.reactOnce(&ic.reactions, c.user, in.Content, c.now)
	if !created {
		return jsonResult(200, reactionWire(r, c.base))
	}
	return jsonResult(201, reactionWire(r, c.base))
}
