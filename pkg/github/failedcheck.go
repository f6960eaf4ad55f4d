package github

import (
	gh "github.com/google/go-github/v66/github"

	"github.com/prloop/prloop/pkg/events"
)

// FailedRun is a failed check run as events name it (PRChecksFailed, a
// candidate's PRMergeFailed): the run's id is the job's for GitHub
// Actions, whose runs can be re-run and whose logs read.
func FailedRun(r *gh.CheckRun) events.FailedCheck {
	return events.FailedCheck{
		Name: r.GetName(), Kind: events.CheckKindRun, Conclusion: r.GetConclusion(),
		URL: r.GetHTMLURL(), ID: r.GetID(), Actions: r.GetApp().GetSlug() == "github-actions",
	}
}

// FailedStatus is a failed commit status as events name it.
func FailedStatus(st *gh.RepoStatus) events.FailedCheck {
	return events.FailedCheck{
		Name: st.GetContext(), Kind: events.CheckKindStatus, Conclusion: st.GetState(),
		URL: st.GetTargetURL(), ID: st.GetID(), Description: st.GetDescription(),
	}
}
