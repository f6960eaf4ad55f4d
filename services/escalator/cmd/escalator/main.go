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
	app.Main(escalator.Name, &cfg, func(_ context.Context, rt *app.Runtime) ([]app.Service, error) {
		return []app.Service{escalator.New(rt, cfg)}, nil
	})
}
