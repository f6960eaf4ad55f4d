package main

import (
	"fmt"
	"sort"

	"github.com/prloop/prloop/pkg/config"
	"github.com/prloop/prloop/services/escalator"
	"github.com/prloop/prloop/services/feedback"
	"github.com/prloop/prloop/services/merger"
	"github.com/prloop/prloop/services/poller"
)

// knownVars are the PRLOOP_* variables prloop reads: the envconfig names
// of every service's configuration (with the GitHub client's and the
// review policy's they embed) and of the operator commands' settings.
// pkg/config's Known is generated from it (TestConfig_KnownIsCurrent),
// for the service binaries, which cannot import each other's
// configuration.
func knownVars() []string {
	vars, err := config.Vars(&poller.Config{}, &feedback.Config{}, &merger.Config{}, &escalator.Config{}, &cliSettings{})
	if err != nil {
		panic(fmt.Sprintf("list the variables: %v", err)) // a malformed struct tag: a programming error
	}
	names := make([]string, 0, len(vars))
	for _, v := range vars {
		names = append(names, v.Name)
	}
	sort.Strings(names)
	return names
}
