package ghsim

import (
	"encoding/base64"
	"encoding/json"
	"strconv"
	"time"
)

// The wire types below mirror GitHub's JSON field for field. go-github's
// structs are not used for encoding because they tag every field omitempty,
// and GitHub's schemas require many fields to be present as null
// (milestone, assignee, closed_at, merged_at, body, ...). Field names match
// go-github's json tags, so the client decodes these bodies into go-github
// types unchanged (a test checks that).

// ts renders a time as GitHub does: RFC 3339, UTC, whole seconds, "Z".
type ts time.Time

func (t ts) MarshalJSON() ([]byte, error) {
	b := make([]byte, 0, 22)
	b = append(b, '"')
	b = time.Time(t).UTC().AppendFormat(b, "2006-01-02T15:04:05Z")
	return append(b, '"'), nil
}

// tsp returns a nullable timestamp: nil for the zero time.
func tsp(t time.Time) *ts {
	if t.IsZero() {
		return nil
	}
	v := ts(t)
	return &v
}

func nodeID(kind string, id int64) string {
	return base64.StdEncoding.EncodeToString([]byte(kind + strconv.FormatInt(id, 10)))
}

type jUser struct {
	Login             string `json:"login"`
	ID                int64  `json:"id"`
	NodeID            string `json:"node_id"`
	AvatarURL         string `json:"avatar_url"`
	GravatarID        string `json:"gravatar_id"`
	URL               string `json:"url"`
	HTMLURL           string `json:"html_url"`
	FollowersURL      string `json:"followers_url"`
	FollowingURL      string `json:"following_url"`
	GistsURL          string `json:"gists_url"`
	StarredURL        string `json:"starred_url"`
	SubscriptionsURL  string `json:"subscriptions_url"`
	OrganizationsURL  string `json:"organizations_url"`
	ReposURL          string `json:"repos_url"`
	EventsURL         string `json:"events_url"`
	ReceivedEventsURL string `json:"received_events_url"`
	Type              string `json:"type"`
	UserViewType      string `json:"user_view_type"`
	SiteAdmin         bool   `json:"site_admin"`
	RoleName          string `json:"role_name,omitempty"`
}

type jRepo struct {
	ID                       int64           `json:"id"`
	NodeID                   string          `json:"node_id"`
	Name                     string          `json:"name"`
	FullName                 string          `json:"full_name"`
	Private                  bool            `json:"private"`
	Owner                    json.RawMessage `json:"owner"`
	HTMLURL                  string          `json:"html_url"`
	Description              *string         `json:"description"`
	Fork                     bool            `json:"fork"`
	URL                      string          `json:"url"`
	ForksURL                 string          `json:"forks_url"`
	KeysURL                  string          `json:"keys_url"`
	CollaboratorsURL         string          `json:"collaborators_url"`
	TeamsURL                 string          `json:"teams_url"`
	HooksURL                 string          `json:"hooks_url"`
	IssueEventsURL           string          `json:"issue_events_url"`
	EventsURL                string          `json:"events_url"`
	AssigneesURL             string          `json:"assignees_url"`
	BranchesURL              string          `json:"branches_url"`
	TagsURL                  string          `json:"tags_url"`
	BlobsURL                 string          `json:"blobs_url"`
	GitTagsURL               string          `json:"git_tags_url"`
	GitRefsURL               string          `json:"git_refs_url"`
	TreesURL                 string          `json:"trees_url"`
	StatusesURL              string          `json:"statuses_url"`
	LanguagesURL             string          `json:"languages_url"`
	StargazersURL            string          `json:"stargazers_url"`
	ContributorsURL          string          `json:"contributors_url"`
	SubscribersURL           string          `json:"subscribers_url"`
	SubscriptionURL          string          `json:"subscription_url"`
	CommitsURL               string          `json:"commits_url"`
	GitCommitsURL            string          `json:"git_commits_url"`
	CommentsURL              string          `json:"comments_url"`
	IssueCommentURL          string          `json:"issue_comment_url"`
	ContentsURL              string          `json:"contents_url"`
	CompareURL               string          `json:"compare_url"`
	MergesURL                string          `json:"merges_url"`
	ArchiveURL               string          `json:"archive_url"`
	DownloadsURL             string          `json:"downloads_url"`
	IssuesURL                string          `json:"issues_url"`
	PullsURL                 string          `json:"pulls_url"`
	MilestonesURL            string          `json:"milestones_url"`
	NotificationsURL         string          `json:"notifications_url"`
	LabelsURL                string          `json:"labels_url"`
	ReleasesURL              string          `json:"releases_url"`
	DeploymentsURL           string          `json:"deployments_url"`
	CreatedAt                ts              `json:"created_at"`
	UpdatedAt                ts              `json:"updated_at"`
	PushedAt                 ts              `json:"pushed_at"`
	GitURL                   string          `json:"git_url"`
	SSHURL                   string          `json:"ssh_url"`
	CloneURL                 string          `json:"clone_url"`
	SVNURL                   string          `json:"svn_url"`
	Homepage                 *string         `json:"homepage"`
	Size                     int             `json:"size"`
	StargazersCount          int             `json:"stargazers_count"`
	WatchersCount            int             `json:"watchers_count"`
	Language                 *string         `json:"language"`
	HasIssues                bool            `json:"has_issues"`
	HasProjects              bool            `json:"has_projects"`
	HasDownloads             bool            `json:"has_downloads"`
	HasWiki                  bool            `json:"has_wiki"`
	HasPages                 bool            `json:"has_pages"`
	HasDiscussions           bool            `json:"has_discussions"`
	ForksCount               int             `json:"forks_count"`
	MirrorURL                *string         `json:"mirror_url"`
	Archived                 bool            `json:"archived"`
	Disabled                 bool            `json:"disabled"`
	OpenIssuesCount          int             `json:"open_issues_count"`
	License                  *struct{}       `json:"license"`
	AllowForking             bool            `json:"allow_forking"`
	IsTemplate               bool            `json:"is_template"`
	WebCommitSignoffRequired bool            `json:"web_commit_signoff_required"`
	Topics                   []string        `json:"topics"`
	Visibility               string          `json:"visibility"`
	Forks                    int             `json:"forks"`
	OpenIssues               int             `json:"open_issues"`
	Watchers                 int             `json:"watchers"`
	DefaultBranch            string          `json:"default_branch"`
	AllowSquashMerge         bool            `json:"allow_squash_merge"`
	AllowMergeCommit         bool            `json:"allow_merge_commit"`
	AllowRebaseMerge         bool            `json:"allow_rebase_merge"`
	AllowUpdateBranch        bool            `json:"allow_update_branch"`
	DeleteBranchOnMerge      bool            `json:"delete_branch_on_merge"`
	NetworkCount             *int            `json:"network_count,omitempty"`
	SubscribersCount         *int            `json:"subscribers_count,omitempty"`
}

type jLabel struct {
	ID          int64   `json:"id"`
	NodeID      string  `json:"node_id"`
	URL         string  `json:"url"`
	Name        string  `json:"name"`
	Color       string  `json:"color"`
	Default     bool    `json:"default"`
	Description *string `json:"description"`
}

type jHref struct {
	Href string `json:"href"`
}

type jBranch struct {
	Label string          `json:"label"`
	Ref   string          `json:"ref"`
	SHA   string          `json:"sha"`
	User  json.RawMessage `json:"user"`
	Repo  json.RawMessage `json:"repo"`
}

type jPRLinks struct {
	Self           jHref `json:"self"`
	HTML           jHref `json:"html"`
	Issue          jHref `json:"issue"`
	Comments       jHref `json:"comments"`
	ReviewComments jHref `json:"review_comments"`
	ReviewComment  jHref `json:"review_comment"`
	Commits        jHref `json:"commits"`
	Statuses       jHref `json:"statuses"`
}

// jPull is GitHub's "pull-request-simple" (list items); jPullFull adds the
// fields only the single-PR endpoints return.
type jPull struct {
	URL                string            `json:"url"`
	ID                 int64             `json:"id"`
	NodeID             string            `json:"node_id"`
	HTMLURL            string            `json:"html_url"`
	DiffURL            string            `json:"diff_url"`
	PatchURL           string            `json:"patch_url"`
	IssueURL           string            `json:"issue_url"`
	CommitsURL         string            `json:"commits_url"`
	ReviewCommentsURL  string            `json:"review_comments_url"`
	ReviewCommentURL   string            `json:"review_comment_url"`
	CommentsURL        string            `json:"comments_url"`
	StatusesURL        string            `json:"statuses_url"`
	Number             int               `json:"number"`
	State              string            `json:"state"`
	Locked             bool              `json:"locked"`
	Title              string            `json:"title"`
	User               json.RawMessage   `json:"user"`
	Body               *string           `json:"body"`
	Labels             []jLabel          `json:"labels"`
	Milestone          *struct{}         `json:"milestone"`
	ActiveLockReason   *string           `json:"active_lock_reason"`
	CreatedAt          ts                `json:"created_at"`
	UpdatedAt          ts                `json:"updated_at"`
	ClosedAt           *ts               `json:"closed_at"`
	MergedAt           *ts               `json:"merged_at"`
	MergeCommitSHA     *string           `json:"merge_commit_sha"`
	Assignee           json.RawMessage   `json:"assignee"`
	Assignees          []json.RawMessage `json:"assignees"`
	RequestedReviewers []json.RawMessage `json:"requested_reviewers"`
	RequestedTeams     []struct{}        `json:"requested_teams"`
	Head               jBranch           `json:"head"`
	Base               jBranch           `json:"base"`
	Links              jPRLinks          `json:"_links"`
	AuthorAssociation  string            `json:"author_association"`
	AutoMerge          *struct{}         `json:"auto_merge"`
	Draft              bool              `json:"draft"`
}

type jPullFull struct {
	jPull
	Merged              bool            `json:"merged"`
	Mergeable           *bool           `json:"mergeable"`
	Rebaseable          *bool           `json:"rebaseable"`
	MergeableState      string          `json:"mergeable_state"`
	MergedBy            json.RawMessage `json:"merged_by"`
	Comments            int             `json:"comments"`
	ReviewComments      int             `json:"review_comments"`
	MaintainerCanModify bool            `json:"maintainer_can_modify"`
	Commits             int             `json:"commits"`
	Additions           int             `json:"additions"`
	Deletions           int             `json:"deletions"`
	ChangedFiles        int             `json:"changed_files"`
}

type jReactionRollup struct {
	URL        string `json:"url"`
	TotalCount int    `json:"total_count"`
	PlusOne    int    `json:"+1"`
	MinusOne   int    `json:"-1"`
	Laugh      int    `json:"laugh"`
	Confused   int    `json:"confused"`
	Heart      int    `json:"heart"`
	Hooray     int    `json:"hooray"`
	Eyes       int    `json:"eyes"`
	Rocket     int    `json:"rocket"`
}

type jIssuePR struct {
	URL      string `json:"url"`
	HTMLURL  string `json:"html_url"`
	DiffURL  string `json:"diff_url"`
	PatchURL string `json:"patch_url"`
	MergedAt *ts    `json:"merged_at"`
}

type jIssue struct {
	URL                   string            `json:"url"`
	RepositoryURL         string            `json:"repository_url"`
	LabelsURL             string            `json:"labels_url"`
	CommentsURL           string            `json:"comments_url"`
	EventsURL             string            `json:"events_url"`
	HTMLURL               string            `json:"html_url"`
	ID                    int64             `json:"id"`
	NodeID                string            `json:"node_id"`
	Number                int               `json:"number"`
	Title                 string            `json:"title"`
	User                  json.RawMessage   `json:"user"`
	Labels                []jLabel          `json:"labels"`
	State                 string            `json:"state"`
	Locked                bool              `json:"locked"`
	Assignee              json.RawMessage   `json:"assignee"`
	Assignees             []json.RawMessage `json:"assignees"`
	Milestone             *struct{}         `json:"milestone"`
	Comments              int               `json:"comments"`
	CreatedAt             ts                `json:"created_at"`
	UpdatedAt             ts                `json:"updated_at"`
	ClosedAt              *ts               `json:"closed_at"`
	AuthorAssociation     string            `json:"author_association"`
	ActiveLockReason      *string           `json:"active_lock_reason"`
	Draft                 bool              `json:"draft"`
	PullRequest           *jIssuePR         `json:"pull_request,omitempty"`
	Body                  *string           `json:"body"`
	Reactions             jReactionRollup   `json:"reactions"`
	TimelineURL           string            `json:"timeline_url"`
	PerformedViaGithubApp *struct{}         `json:"performed_via_github_app"`
	StateReason           *string           `json:"state_reason"`
}

// jReaction carries created_at, which GitHub sends and go-github's
// Reaction struct lacks.
type jReaction struct {
	ID        int64           `json:"id"`
	NodeID    string          `json:"node_id"`
	User      json.RawMessage `json:"user"`
	Content   string          `json:"content"`
	CreatedAt ts              `json:"created_at"`
}

type jIssueComment struct {
	URL                   string          `json:"url"`
	HTMLURL               string          `json:"html_url"`
	IssueURL              string          `json:"issue_url"`
	ID                    int64           `json:"id"`
	NodeID                string          `json:"node_id"`
	User                  json.RawMessage `json:"user"`
	CreatedAt             ts              `json:"created_at"`
	UpdatedAt             ts              `json:"updated_at"`
	AuthorAssociation     string          `json:"author_association"`
	Body                  string          `json:"body"`
	Reactions             jReactionRollup `json:"reactions"`
	PerformedViaGithubApp *struct{}       `json:"performed_via_github_app"`
}

type jReviewCommentLinks struct {
	Self        jHref `json:"self"`
	HTML        jHref `json:"html"`
	PullRequest jHref `json:"pull_request"`
}

type jReviewComment struct {
	URL                 string              `json:"url"`
	PullRequestReviewID *int64              `json:"pull_request_review_id"`
	ID                  int64               `json:"id"`
	NodeID              string              `json:"node_id"`
	DiffHunk            string              `json:"diff_hunk"`
	Path                string              `json:"path"`
	CommitID            string              `json:"commit_id"`
	OriginalCommitID    string              `json:"original_commit_id"`
	User                json.RawMessage     `json:"user"`
	Body                string              `json:"body"`
	CreatedAt           ts                  `json:"created_at"`
	UpdatedAt           ts                  `json:"updated_at"`
	HTMLURL             string              `json:"html_url"`
	PullRequestURL      string              `json:"pull_request_url"`
	AuthorAssociation   string              `json:"author_association"`
	Links               jReviewCommentLinks `json:"_links"`
	StartLine           *int                `json:"start_line"`
	OriginalStartLine   *int                `json:"original_start_line"`
	StartSide           *string             `json:"start_side"`
	Line                int                 `json:"line"`
	OriginalLine        int                 `json:"original_line"`
	Side                string              `json:"side"`
	Position            int                 `json:"position"`
	OriginalPosition    int                 `json:"original_position"`
	InReplyToID         *int64              `json:"in_reply_to_id,omitempty"`
	SubjectType         string              `json:"subject_type"`
	Reactions           jReactionRollup     `json:"reactions"`
}

type jReviewLinks struct {
	HTML        jHref `json:"html"`
	PullRequest jHref `json:"pull_request"`
}

type jReview struct {
	ID                int64           `json:"id"`
	NodeID            string          `json:"node_id"`
	User              json.RawMessage `json:"user"`
	Body              string          `json:"body"`
	State             string          `json:"state"`
	HTMLURL           string          `json:"html_url"`
	PullRequestURL    string          `json:"pull_request_url"`
	Links             jReviewLinks    `json:"_links"`
	SubmittedAt       *ts             `json:"submitted_at,omitempty"`
	CommitID          string          `json:"commit_id"`
	AuthorAssociation string          `json:"author_association"`
}

type jStatus struct {
	URL         string  `json:"url"`
	AvatarURL   *string `json:"avatar_url"`
	ID          int64   `json:"id"`
	NodeID      string  `json:"node_id"`
	State       string  `json:"state"`
	Description *string `json:"description"`
	TargetURL   *string `json:"target_url"`
	Context     string  `json:"context"`
	CreatedAt   ts      `json:"created_at"`
	UpdatedAt   ts      `json:"updated_at"`
}

type jCombinedStatus struct {
	State      string          `json:"state"`
	Statuses   []jStatus       `json:"statuses"`
	SHA        string          `json:"sha"`
	TotalCount int             `json:"total_count"`
	Repository json.RawMessage `json:"repository"`
	CommitURL  string          `json:"commit_url"`
	URL        string          `json:"url"`
}

type jCheckOutput struct {
	Title            *string `json:"title"`
	Summary          *string `json:"summary"`
	Text             *string `json:"text"`
	AnnotationsCount int     `json:"annotations_count"`
	AnnotationsURL   string  `json:"annotations_url"`
}

type jMinRepo struct {
	ID   int64  `json:"id"`
	URL  string `json:"url"`
	Name string `json:"name"`
}

type jMinBranch struct {
	Ref  string   `json:"ref"`
	SHA  string   `json:"sha"`
	Repo jMinRepo `json:"repo"`
}

type jMinPR struct {
	ID     int64      `json:"id"`
	Number int        `json:"number"`
	URL    string     `json:"url"`
	Head   jMinBranch `json:"head"`
	Base   jMinBranch `json:"base"`
}

type jApp struct {
	ID          int64             `json:"id"`
	Slug        string            `json:"slug"`
	NodeID      string            `json:"node_id"`
	Owner       json.RawMessage   `json:"owner"`
	Name        string            `json:"name"`
	Description *string           `json:"description"`
	ExternalURL string            `json:"external_url"`
	HTMLURL     string            `json:"html_url"`
	CreatedAt   ts                `json:"created_at"`
	UpdatedAt   ts                `json:"updated_at"`
	Permissions map[string]string `json:"permissions"`
	Events      []string          `json:"events"`
}

type jCheckSuite struct {
	ID int64 `json:"id"`
}

type jCheckRun struct {
	ID           int64        `json:"id"`
	HeadSHA      string       `json:"head_sha"`
	NodeID       string       `json:"node_id"`
	ExternalID   *string      `json:"external_id"`
	URL          string       `json:"url"`
	HTMLURL      string       `json:"html_url"`
	DetailsURL   *string      `json:"details_url"`
	Status       string       `json:"status"`
	Conclusion   *string      `json:"conclusion"`
	StartedAt    *ts          `json:"started_at"`
	CompletedAt  *ts          `json:"completed_at"`
	Output       jCheckOutput `json:"output"`
	Name         string       `json:"name"`
	CheckSuite   *jCheckSuite `json:"check_suite"`
	App          *jApp        `json:"app"`
	PullRequests []jMinPR     `json:"pull_requests"`
}

type jCheckRuns struct {
	TotalCount int         `json:"total_count"`
	CheckRuns  []jCheckRun `json:"check_runs"`
}

type jPermission struct {
	Permission string `json:"permission"`
	RoleName   string `json:"role_name"`
	User       jUser  `json:"user"`
}

type jRate struct {
	Limit     int    `json:"limit"`
	Remaining int    `json:"remaining"`
	Reset     int64  `json:"reset"`
	Used      int    `json:"used"`
	Resource  string `json:"resource,omitempty"`
}

type jRateLimit struct {
	Resources map[string]jRate `json:"resources"`
	Rate      jRate            `json:"rate"`
}

type jError struct {
	Message          string `json:"message"`
	Errors           []any  `json:"errors,omitempty"`
	DocumentationURL string `json:"documentation_url"`
	Status           string `json:"status"`
}

type jErrItem struct {
	Resource string `json:"resource,omitempty"`
	Field    string `json:"field,omitempty"`
	Code     string `json:"code"`
	Message  string `json:"message,omitempty"`
}
