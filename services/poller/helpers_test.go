package poller_test

import "github.com/prloop/prloop/pkg/github"

func githubMerge(sha string) github.MergeOptions {
	return github.MergeOptions{Method: github.MergeMethodSquash, SHA: sha, Title: "merge"}
}
