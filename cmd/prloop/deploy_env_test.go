package main

// The environment check of the deploy tests (deploy_test.go): what a
// container's variables must be for the Config of the binary it runs.

import (
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/kelseyhightower/envconfig"
	"github.com/stretchr/testify/assert"

	"github.com/prloop/prloop/pkg/app"
	"github.com/prloop/prloop/pkg/config"
	"github.com/prloop/prloop/pkg/github"
	"github.com/prloop/prloop/services/escalator"
	"github.com/prloop/prloop/services/feedback"
	"github.com/prloop/prloop/services/merger"
	"github.com/prloop/prloop/services/poller"
)

var (
	// goRuntimeVars may be set for any Go binary; tokenVars are where
	// github.ResolveToken looks for the token.
	goRuntimeVars = []string{"GOMEMLIMIT", "GOMAXPROCS", "GOGC", "GODEBUG", "TZ"}
	tokenVars     = []string{"GITHUB_TOKEN", "GH_TOKEN"}
	// agentVars are the agent's own credentials: the feedback service passes
	// its environment, minus GitHub credentials, to PRLOOP_AGENT_CMD.
	agentVars  = []string{"ANTHROPIC_API_KEY", "OPENAI_API_KEY"}
	secretType = reflect.TypeFor[github.Secret]()
)

// deployRole is a binary a deployment runs: a service or prloop ghsim.
type deployRole struct {
	name, pkg string // pkg is the main package
	// configs name every PRLOOP_* variable the binary reads (envconfig
	// tags); newConfig is nil when it reads none.
	configs   []any
	newConfig func() app.Config
	other     []string // the non-PRLOOP variables it reads
}

func deployRoles() map[string]deployRole {
	svc := func(name string, cfg any, newConfig func() app.Config, extra ...string) deployRole {
		return deployRole{name, "./services/" + name + "/cmd/" + name, []any{cfg}, newConfig, slices.Concat(tokenVars, goRuntimeVars, extra)}
	}
	return map[string]deployRole{
		poller.Name:    svc(poller.Name, poller.Config{}, func() app.Config { return &poller.Config{} }),
		feedback.Name:  svc(feedback.Name, feedback.Config{}, func() app.Config { return &feedback.Config{} }, agentVars...),
		merger.Name:    svc(merger.Name, merger.Config{}, func() app.Config { return &merger.Config{} }),
		escalator.Name: svc(escalator.Name, escalator.Config{}, func() app.Config { return &escalator.Config{} }),
		roleSim:        {name: roleSim, pkg: "./cmd/prloop", other: goRuntimeVars}, // flags, no PRLOOP_* settings
	}
}

// configVar is one variable a configuration struct reads.
type configVar struct {
	field            string
	required, secret bool // secret: a github.Secret field, so a credential
}

// configVars returns the variables the configuration structs read, as
// envconfig (which config.Load runs) names them. Problems are names without
// the PRLOOP_ prefix, such as a field without an envconfig tag.
func configVars(cfgs ...any) (map[string]configVar, []string) {
	out := map[string]configVar{}
	var problems []string
	for _, c := range cfgs {
		var b strings.Builder
		if err := envconfig.Usagef("", reflect.New(reflect.TypeOf(c)).Interface(), &b, "{{range .}}{{.Key}}|{{.Name}}|{{usage_required .}}|{{.Field.Type}}\n{{end}}"); err != nil {
			problems = append(problems, fmt.Sprintf("%T: %v", c, err))
		}
		for line := range strings.Lines(b.String()) {
			f := strings.Split(strings.TrimSpace(line), "|") // key, field, required, type
			if !strings.HasPrefix(f[0], config.Prefix) {
				problems = append(problems, fmt.Sprintf("%T.%s is read as %s, which lacks the %s prefix: give it an envconfig tag", c, f[1], f[0], config.Prefix))
			}
			prev := out[f[0]] // a variable of several configs
			out[f[0]] = configVar{fmt.Sprintf("%T.%s", c, f[1]), f[2] == "true" || prev.required, f[3] == secretType.String() || prev.secret}
		}
	}
	return out, problems
}

// envValue is one variable as a deployment sets it. known is false for
// values from a Secret, a pod field or (compose, no value) the shell.
type envValue struct {
	value, from      string
	known, secretRef bool
}

type envSet map[string]envValue

// literal returns the known values as KEY=VALUE.
func (e envSet) literal() []string {
	var out []string
	for k, v := range e {
		if v.known {
			out = append(out, k+"="+v.value)
		}
	}
	return out
}

// merged returns the image's ENV overridden by the file's.
func merged(image, env envSet) envSet {
	out := envSet{}
	maps.Copy(out, image)
	maps.Copy(out, env)
	return out
}

// envCheck is one container's environment: env is what the file sets,
// image the image's ENV (which counts for required variables), public the
// values a credential may have in plain text (the simulator's demo token).
type envCheck struct {
	where      string
	role       deployRole
	env, image envSet
	public     []string
}

// problems lists PRLOOP_* variables the role does not read, other variables
// not on its list, required ones not set, and credentials in plain text. A
// compose value that is not empty with an empty shell is in the file, even
// as a ${VAR:-default}.
func (c envCheck) problems() []string {
	vars, out := configVars(c.role.configs...)
	for _, name := range slices.Sorted(maps.Keys(c.env)) {
		v, cv := c.env[name], vars[name]
		if _, ok := vars[name]; strings.HasPrefix(name, config.Prefix) && !ok {
			out = append(out, fmt.Sprintf("%s: %s (set in %s) is not a setting of %s: no field of its Config has envconfig:%q", c.where, name, v.from, c.role.name, name))
		} else if !strings.HasPrefix(name, config.Prefix) && !slices.Contains(c.role.other, name) {
			out = append(out, fmt.Sprintf("%s: %s (set in %s) is not read by %s (allowed besides PRLOOP_*: %s)", c.where, name, v.from, c.role.name, strings.Join(c.role.other, ", ")))
		}
		if (cv.secret || slices.Contains(tokenVars, name)) && v.known && v.value != "" && !slices.Contains(c.public, v.value) {
			out = append(out, fmt.Sprintf("%s: %s is a credential written in plain text in %s: take it from a Secret (Kubernetes) or the shell (compose)", c.where, name, v.from))
		}
	}
	for _, name := range slices.Sorted(maps.Keys(vars)) {
		v, ok := merged(c.image, c.env)[name]
		if vars[name].required && (!ok || (v.known && v.value == "")) {
			out = append(out, fmt.Sprintf("%s: %s is required by %s (%s) but not set", c.where, name, c.role.name, vars[name].field))
		}
	}
	return out
}

type deployTestConfig struct {
	config.Common
	Need  string        `envconfig:"PRLOOP_TEST_NEED" required:"true"`
	Token github.Secret `envconfig:"PRLOOP_TEST_TOKEN"`
	Skip  string        `ignored:"true"`
}

// TestDeployEnvCheck_ReportsUnknownMissingAndPlainTextCredentials shows the
// check the deployment tests rely on fails where it should.
func TestDeployEnvCheck_ReportsUnknownMissingAndPlainTextCredentials(t *testing.T) {
	t.Parallel()
	role := deployRole{name: "testsvc", configs: []any{deployTestConfig{}}, other: tokenVars}
	lit := func(v string) envValue { return envValue{value: v, known: true, from: "test.yml"} }
	need, secret := lit("x"), envValue{secretRef: true, from: "Secret s key k"}
	tests := []struct {
		name        string
		env, image  envSet
		public      []string
		want        string
		noNeedAdded bool
	}{
		{name: "unknown PRLOOP variable", env: envSet{"PRLOOP_NOPE": lit("1")}, want: "x.yml: PRLOOP_NOPE (set in test.yml) is not a setting of testsvc"},
		{name: "ignored field is no variable", env: envSet{"SKIP": lit("1")}, want: "SKIP (set in test.yml) is not read by testsvc"},
		{name: "other variable not on the list", env: envSet{"HOME": lit("/root")}, want: "HOME (set in test.yml) is not read by testsvc"},
		{name: "required missing", noNeedAdded: true, want: "PRLOOP_TEST_NEED is required by testsvc (main.deployTestConfig.Need) but not set"},
		{name: "required empty", noNeedAdded: true, env: envSet{"PRLOOP_TEST_NEED": lit("")}, want: "PRLOOP_TEST_NEED is required by testsvc"},
		{name: "required from a Secret", noNeedAdded: true, env: envSet{"PRLOOP_TEST_NEED": secret}},
		{name: "required from the image", noNeedAdded: true, image: envSet{"PRLOOP_TEST_NEED": need}},
		{name: "credential field in plain text", env: envSet{"PRLOOP_TEST_TOKEN": lit("hunter2hunter2")}, want: "PRLOOP_TEST_TOKEN is a credential written in plain text in test.yml"},
		{name: "token in plain text", env: envSet{"GITHUB_TOKEN": lit("ghp_0123456789")}, want: "GITHUB_TOKEN is a credential written in plain text"},
		{name: "token passed through from the shell", env: envSet{"GITHUB_TOKEN": {from: "c.yml (from the shell)"}}},
		{name: "published demo token", env: envSet{"GITHUB_TOKEN": lit("demo-token")}, public: []string{"demo-token"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			env := maps.Clone(tt.env)
			if !tt.noNeedAdded {
				env = merged(envSet{"PRLOOP_TEST_NEED": need}, env)
			}
			got := envCheck{where: "x.yml", role: role, env: env, image: tt.image, public: tt.public}.problems()
			if tt.want == "" {
				assert.Empty(t, got)
			} else if assert.Len(t, got, 1) {
				assert.Contains(t, got[0], tt.want)
			}
		})
	}
	t.Run("untagged field", func(t *testing.T) {
		t.Parallel()
		_, probs := configVars(struct{ Bare string }{})
		assert.Equal(t, []string{"struct { Bare string }.Bare is read as BARE, which lacks the PRLOOP_ prefix: give it an envconfig tag"}, probs)
	})
}
