package ghsim

import (
	"fmt"

	"github.com/prloop/prloop/pkg/ghref"
)

// Demo describes the world SeedDemo creates: who can do what, with which
// token, so a person or a script can play reviewer against the simulator.
type Demo struct {
	Repo ghref.Repo
	PR   ghref.PR
	// Tokens maps each seeded login to its API token.
	Tokens map[string]string
}

// Demo logins and their tokens. They are not secrets: the simulator runs on
// loopback with made-up data.
const (
	DemoOwner    = "demo"
	DemoRepo     = "widgets"
	DemoPrloop   = "prloop-bot"
	DemoReviewer = "alice"
	DemoAgent    = "agent"
)

// SeedDemo creates the demo world: repository demo/widgets with a small Go
// program, collaborators alice (a reviewer with write access), agent (the
// coding agent that opened the PR) and prloop-bot (prloop's own account),
// and one open PR from branch add-greeting.
func SeedDemo(s *Sim) (Demo, error) {
	d := Demo{Tokens: map[string]string{
		DemoPrloop:   "prloop-demo-token",
		DemoReviewer: "alice-demo-token",
		DemoAgent:    "agent-demo-token",
	}}
	for login, tok := range d.Tokens {
		s.AddToken(tok, login)
	}
	repo, err := s.CreateRepo(DemoOwner, DemoRepo, map[string]string{
		"README.md": "# widgets\n\nA tiny program for the prloop demo.\n",
		"main.go":   "package main\n\nimport \"fmt\"\n\nfunc main() {\n\tfmt.Println(\"hello\")\n}\n",
		"go.mod":    "module example.com/widgets\n\ngo 1.24\n",
	})
	if err != nil {
		return d, fmt.Errorf("seed demo repository: %w", err)
	}
	d.Repo = repo
	for login, perm := range map[string]string{DemoReviewer: "write", DemoAgent: "write", DemoPrloop: "write"} {
		if err := s.SetPermission(repo, login, perm); err != nil {
			return d, fmt.Errorf("seed demo permissions: %w", err)
		}
	}
	if _, err := s.PushCommit(repo, "add-greeting", DemoAgent, map[string]string{
		"greet.go": "package main\n\nfunc greeting(name string) string {\n\treturn \"hello \" + name\n}\n",
	}, "Add a greeting helper"); err != nil {
		return d, fmt.Errorf("seed demo branch: %w", err)
	}
	pr, err := s.OpenPR(repo, PRInput{Title: "Add a greeting helper", Body: "Opened by a coding agent.", Head: "add-greeting", Author: DemoAgent})
	if err != nil {
		return d, fmt.Errorf("seed demo PR: %w", err)
	}
	d.PR = pr
	return d, nil
}
