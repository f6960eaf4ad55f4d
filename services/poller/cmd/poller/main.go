// Command poller runs prloop's poller service on its own, the unit of
// deployment in production. Configuration comes from PRLOOP_* variables.
// Its HTTP server also serves the read-only web page at /.
package main

import (
	"context"

	"github.com/prloop/prloop/pkg/app"
	"github.com/prloop/prloop/pkg/web"
	"github.com/prloop/prloop/services/poller"
)

func main() {
	var cfg poller.Config
	app.Main(poller.Name, &cfg, func(ctx context.Context, rt *app.Runtime) ([]app.Service, error) {
		s, err := poller.FromRuntime(ctx, rt, cfg)
		if err != nil {
			return nil, err
		}
		page, err := web.FromEnvironment(rt)
		if err != nil {
			return nil, err
		}
		return []app.Service{s, page}, nil
	})
}
