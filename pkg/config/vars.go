package config

import (
	"fmt"
	"strings"

	"github.com/kelseyhightower/envconfig"
)

// Var is one PRLOOP_* variable as a configuration struct declares it: its
// name, default and description (the desc tag), which `prloop run -h` and
// docs/configuration.md show.
type Var struct {
	Name    string
	Default string
	Desc    string
	// Type says what the value is, in envconfig's words ("Duration",
	// "Comma-separated list of String", "True or False" …).
	Type string
}

// Vars lists the variables cfgs read, each once (the first declaration
// wins), in the order they declare them.
func Vars(cfgs ...any) ([]Var, error) {
	const field, record = "\x1f", "\x1e"
	var out []Var
	seen := map[string]bool{}
	for _, cfg := range cfgs {
		var b strings.Builder
		format := "{{range .}}{{usage_key .}}" + field + "{{usage_default .}}" + field + "{{usage_description .}}" + field + "{{usage_type .}}" + record + "{{end}}"
		if err := envconfig.Usagef("", cfg, &b, format); err != nil {
			return nil, fmt.Errorf("list the variables of %T: %w", cfg, err)
		}
		for _, rec := range strings.Split(b.String(), record) {
			f := strings.Split(rec, field)
			if len(f) != 4 || seen[f[0]] {
				continue
			}
			seen[f[0]] = true
			out = append(out, Var{Name: f[0], Default: f[1], Desc: f[2], Type: f[3]})
		}
	}
	return out, nil
}
