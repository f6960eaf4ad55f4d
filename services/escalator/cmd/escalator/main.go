// Command escalator runs prloop's escalator service on its own, the unit of
// deployment in production. Configuration comes from PRLOOP_* variables.
package main

import (
	"context"

	"github.com/prloop/prloop/pkg/app"
	"github.com/prloop/prloop/services/escalator"
)

func main() {
	var cfg escalator.Config
	app.Main(escalator.Name, &cfg, func(ctx context.Context, rt *app.Runtime) ([]app.Service, error) {
		s, err := escalator.FromRuntime(ctx, rt, cfg)
		if err != nil {
			return nil, err
		}
		return []app.Service{s}, nil
	})
}
