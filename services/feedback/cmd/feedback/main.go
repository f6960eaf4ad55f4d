// Command feedback runs prloop's feedback service on its own, the unit of
// deployment in production. Configuration comes from PRLOOP_* variables.
package main

import (
	"context"

	"github.com/prloop/prloop/pkg/app"
	"github.com/prloop/prloop/services/feedback"
)

func main() {
	var cfg feedback.Config
	app.Main(feedback.Name, &cfg, func(_ context.Context, rt *app.Runtime) ([]app.Service, error) {
		return []app.Service{feedback.New(rt, cfg)}, nil
	})
}
