// Command merger runs prloop's merger service on its own, the unit of
// deployment in production. Configuration comes from PRLOOP_* variables.
package main

import (
	"context"

	"github.com/prloop/prloop/pkg/app"
	"github.com/prloop/prloop/services/merger"
)

func main() {
	var cfg merger.Config
	app.Main(merger.Name, &cfg, func(_ context.Context, rt *app.Runtime) ([]app.Service, error) {
		return []app.Service{merger.New(rt, cfg)}, nil
	})
}
