// Command feedback runs prloop's feedback service on its own, the unit of
// deployment in production. Configuration comes from PRLOOP_* variables.
package main

import (
	"context"

	"github.com/prloop/prloop/pkg/app"
	"github.com/prloop/prloop/pkg/sandbox"
	"github.com/prloop/prloop/services/feedback"
)

func main() {
	// First: in a re-exec as the agent sandbox's init this never returns.
	sandbox.Init()
	var cfg feedback.Config
	app.Main(feedback.Name, &cfg, func(ctx context.Context, rt *app.Runtime) ([]app.Service, error) {
		s, err := feedback.FromRuntime(ctx, rt, cfg)
		if err != nil {
			return nil, err
		}
		return []app.Service{s}, nil
	})
}
