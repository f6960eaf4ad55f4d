// Command poller runs prloop's poller service on its own, the unit of
// deployment in production. Configuration comes from PRLOOP_* variables.
package main

import (
	"github.com/prloop/prloop/pkg/app"
	"github.com/prloop/prloop/services/poller"
)

func main() {
	var cfg poller.Config
	app.Main(poller.Name, &cfg, func(rt *app.Runtime) ([]app.Service, error) {
		return []app.Service{poller.New(rt, cfg)}, nil
	})
}
