package main

// The deploy tests keep docker-compose.yml (+ docker-compose.demo.yml),
// deploy/k8s, deploy/nats and the Dockerfile honest. They read the files
// with the libraries the real tools are made of (compose-go, krusty,
// BuildKit's parser, nats-server's parser, the Pod Security admission
// checks) and compare what those tools see with the code: each PRLOOP_*
// variable set must be a setting of that service's Config (its envconfig
// tags), every required one must be set, the values must load and validate,
// ports must agree, and the probe paths must be served by the real binaries.

import (
	"context"
	"fmt"
	"maps"
	"net"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/compose-spec/compose-go/v2/cli"
	"github.com/compose-spec/compose-go/v2/types"
	"github.com/moby/buildkit/frontend/dockerfile/instructions"
	"github.com/moby/buildkit/frontend/dockerfile/parser"
	"github.com/moby/patternmatcher"
	"github.com/moby/patternmatcher/ignorefile"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/mod/modfile"

	"github.com/prloop/prloop/pkg/app"
	"github.com/prloop/prloop/pkg/config"
	"github.com/prloop/prloop/pkg/ghsim"
	"github.com/prloop/prloop/pkg/github"
	"github.com/prloop/prloop/pkg/proctest"
	"github.com/prloop/prloop/services/escalator"
	"github.com/prloop/prloop/services/feedback"
	"github.com/prloop/prloop/services/merger"
	"github.com/prloop/prloop/services/poller"
)

const (
	composePath     = "docker-compose.yml"
	composeDemoPath = "docker-compose.demo.yml"
	k8sDir          = "deploy/k8s"
	roleAllInOne    = "prloop run"
	roleSim         = "prloop ghsim"
)

var (
	// goRuntimeVars may be set for any Go binary; tokenVars are where
	// github.ResolveToken looks for the token.
	goRuntimeVars = []string{"GOMEMLIMIT", "GOMAXPROCS", "GOGC", "GODEBUG", "TZ"}
	tokenVars     = []string{"GITHUB_TOKEN", "GH_TOKEN"}
	// agentVars are the agent's own credentials: the feedback service passes
	// its environment, minus GitHub credentials, to PRLOOP_AGENT_CMD.
	agentVars = []string{"ANTHROPIC_API_KEY", "OPENAI_API_KEY"}
	// rolesNeedingGit run git and sh: the feedback service clones, pushes
	// and runs the agent; the simulator keeps real git repositories.
	rolesNeedingGit = []string{feedback.Name, roleSim, roleAllInOne}
	secretType      = reflect.TypeFor[github.Secret]()
)

// deployRole is a binary a deployment runs: a service, prloop run or prloop
// ghsim.
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
		roleAllInOne: {roleAllInOne, "./cmd/prloop", []any{poller.Config{}, feedback.Config{}, merger.Config{}, escalator.Config{}},
			func() app.Config { return &allConfig{} }, slices.Concat(tokenVars, goRuntimeVars, agentVars)},
		roleSim: {name: roleSim, pkg: "./cmd/prloop", other: goRuntimeVars}, // flags, no PRLOOP_* settings
	}
}

// configVar is one variable a configuration struct reads.
type configVar struct {
	field            string
	required, secret bool // secret: a github.Secret field, so a credential
}

// configVars returns the variables the configuration structs read, walking
// embedded structs as envconfig does. Problems are fields envconfig would
// read under a name prloop does not spell.
func configVars(cfgs ...any) (map[string]configVar, []string) {
	out := map[string]configVar{}
	var problems []string
	var walk func(t reflect.Type, path string)
	walk = func(t reflect.Type, path string) {
		for i := range t.NumField() {
			f := t.Field(i)
			key := f.Tag.Get("envconfig")
			if ignored, _ := strconv.ParseBool(f.Tag.Get("ignored")); !f.IsExported() || ignored {
				continue
			} else if key == "" && f.Anonymous && f.Type.Kind() == reflect.Struct {
				walk(f.Type, path+f.Name+".")
				continue
			} else if key == "" {
				problems = append(problems, fmt.Sprintf("%s%s has no envconfig tag: envconfig would read it under an unprefixed name", path, f.Name))
				continue
			} else if !strings.HasPrefix(key, config.Prefix) {
				problems = append(problems, fmt.Sprintf("%s%s reads %s, which lacks the %s prefix", path, f.Name, key, config.Prefix))
			}
			required, _ := strconv.ParseBool(f.Tag.Get("required"))
			prev := out[key] // prloop run reads a variable for up to four services
			out[key] = configVar{path + f.Name, required || prev.required, f.Type == secretType || prev.secret}
		}
	}
	for _, c := range cfgs {
		walk(reflect.TypeOf(c), reflect.TypeOf(c).String()+".")
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

// httpPort returns the fixed port PRLOOP_HTTP_ADDR (or its default) listens
// on, on all interfaces so that it is reachable from outside a container.
func httpPort(env envSet) (int, error) {
	v, ok := env["PRLOOP_HTTP_ADDR"]
	if !ok {
		v = envValue{value: "127.0.0.1:0", known: true} // config.Common's default
	}
	host, port, err := net.SplitHostPort(v.value)
	n, _ := strconv.Atoi(port)
	if !v.known || err != nil || n <= 0 || (host != "" && host != "0.0.0.0" && host != "::") {
		return 0, fmt.Errorf("PRLOOP_HTTP_ADDR=%q (%s): want a fixed port on all interfaces (:8080): the probes and Prometheus need one", v.value, v.from)
	}
	return n, nil
}

// checkContainer checks a prloop container of compose or Kubernetes: its
// variables, its image and its HTTP port. It returns the environment the
// container starts with.
func checkContainer(t *testing.T, ec envCheck, stage *dockerStage, ports []int) envSet {
	t.Helper()
	probs := ec.problems()
	assert.Empty(t, probs, strings.Join(probs, "\n"))
	if slices.Contains(rolesNeedingGit, ec.role.name) {
		assert.True(t, stage.runsCmd("git"), "%s: %s runs git; image target %s has none", ec.where, ec.role.name, stage.name)
	} else {
		assert.Contains(t, stage.base, "distroless/static", "%s: image target %s", ec.where, stage.name)
	}
	env := merged(ec.image, ec.env)
	if ec.role.newConfig == nil {
		return env
	}
	port, err := httpPort(env)
	require.NoError(t, err, ec.where)
	assert.Contains(t, ports, port, "%s: PRLOOP_HTTP_ADDR listens on %d; publish or name that container port", ec.where, port)
	assert.Contains(t, stage.expose, strconv.Itoa(port), "%s: image target %s exposes %v", ec.where, stage.name, stage.expose)
	return env
}

// dockerStage is what the tests read of a Dockerfile stage.
type dockerStage struct {
	name, base, user         string
	env                      map[string]string
	expose, entrypoint, runs []string // runs: the RUN command lines
	copyFrom                 []string // the stages COPY --from names
}

func (s *dockerStage) imageEnv() envSet {
	env := envSet{}
	for k, v := range s.env {
		env[k] = envValue{value: v, known: true, from: "Dockerfile stage " + s.name}
	}
	return env
}

// uid returns the stage's numeric user, or -1.
func (s *dockerStage) uid() int64 {
	u, _, _ := strings.Cut(s.user, ":")
	if n, err := strconv.ParseInt(u, 10, 64); err == nil {
		return n
	}
	return -1
}

func (s *dockerStage) runsCmd(sub string) bool {
	return slices.ContainsFunc(s.runs, func(r string) bool { return strings.Contains(r, sub) })
}

type dockerfile []*dockerStage

func (d dockerfile) stage(name string) *dockerStage {
	i := slices.IndexFunc(d, func(s *dockerStage) bool { return s.name == name })
	if i < 0 {
		return nil
	}
	return d[i]
}

// readDockerfile parses the Dockerfile with BuildKit's parser.
func readDockerfile(t *testing.T, root string) dockerfile {
	t.Helper()
	f, err := os.Open(filepath.Join(root, "Dockerfile"))
	require.NoError(t, err)
	defer f.Close()
	ast, err := parser.Parse(f)
	require.NoError(t, err, "Dockerfile")
	stages, metaArgs, err := instructions.Parse(ast.AST, nil)
	require.NoError(t, err, "Dockerfile")
	global := map[string]string{}
	for _, a := range metaArgs {
		for _, kv := range a.Args {
			global[kv.Key] = kv.ValueString()
		}
	}
	var out dockerfile
	for _, st := range stages {
		s := &dockerStage{name: st.Name, base: os.Expand(st.BaseName, func(k string) string { return global[k] }), env: map[string]string{}}
		for _, c := range st.Commands {
			switch c := c.(type) {
			case *instructions.EnvCommand:
				for _, kv := range c.Env {
					s.env[kv.Key] = kv.Value
				}
			case *instructions.UserCommand:
				s.user = c.User
			case *instructions.ExposeCommand:
				s.expose = append(s.expose, c.Ports...)
			case *instructions.EntrypointCommand:
				s.entrypoint = c.CmdLine
			case *instructions.RunCommand:
				s.runs = append(s.runs, strings.Join(c.CmdLine, " "))
			case *instructions.CopyCommand:
				s.copyFrom = append(s.copyFrom, c.From)
			}
		}
		out = append(out, s)
	}
	return out
}

// natsOptions parses a NATS configuration with nats-server's own parser;
// vars replaces the $NAME references it would take from its environment.
func natsOptions(t *testing.T, text string, vars map[string]string) *server.Options {
	t.Helper()
	for k, v := range vars {
		text = strings.ReplaceAll(text, "$"+k, v)
	}
	f := filepath.Join(t.TempDir(), "nats.conf")
	require.NoError(t, os.WriteFile(f, []byte(text), 0o600))
	opts, err := server.ProcessConfigFile(f)
	require.NoError(t, err, "nats-server rejects the configuration")
	assert.True(t, opts.JetStream, "NATS: JetStream is off")
	assert.True(t, opts.SyncAlways, "NATS: want sync_interval: always in jetstream {}")
	return opts
}

// flagValue returns the value of -name or --name in a command line.
func flagValue(args []string, name string) string {
	for i, a := range args[:max(len(args)-1, 0)] {
		if a == "-"+name || a == "--"+name {
			return args[i+1]
		}
	}
	return ""
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
		{name: "complete", env: envSet{"PRLOOP_LOG_LEVEL": lit("debug"), "GITHUB_TOKEN": secret}},
		{name: "unknown PRLOOP variable", env: envSet{"PRLOOP_NOPE": lit("1")}, want: "x.yml: PRLOOP_NOPE (set in test.yml) is not a setting of testsvc"},
		{name: "ignored field is no variable", env: envSet{"SKIP": lit("1")}, want: "SKIP (set in test.yml) is not read by testsvc"},
		{name: "other variable not on the list", env: envSet{"HOME": lit("/root")}, want: "HOME (set in test.yml) is not read by testsvc"},
		{name: "required missing", noNeedAdded: true, want: "PRLOOP_TEST_NEED is required by testsvc (main.deployTestConfig.Need) but not set"},
		{name: "required empty", noNeedAdded: true, env: envSet{"PRLOOP_TEST_NEED": lit("")}, want: "PRLOOP_TEST_NEED is required by testsvc"},
		{name: "required from a Secret", noNeedAdded: true, env: envSet{"PRLOOP_TEST_NEED": secret}},
		{name: "required from the image", noNeedAdded: true, image: envSet{"PRLOOP_TEST_NEED": need}},
		{name: "image variables are not name-checked here", image: envSet{"HOME": lit("/home/x")}},
		{name: "credential field in plain text", env: envSet{"PRLOOP_TEST_TOKEN": lit("hunter2hunter2")}, want: "PRLOOP_TEST_TOKEN is a credential written in plain text in test.yml"},
		{name: "token in plain text", env: envSet{"GITHUB_TOKEN": lit("ghp_0123456789")}, want: "GITHUB_TOKEN is a credential written in plain text"},
		{name: "token from the shell, empty without it", env: envSet{"GITHUB_TOKEN": lit("")}},
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
	t.Run("configs", func(t *testing.T) {
		t.Parallel()
		_, probs := configVars(struct{ Bare string }{})
		assert.Equal(t, []string{"struct { Bare string }.Bare has no envconfig tag: envconfig would read it under an unprefixed name"}, probs)
		vars, probs := configVars(poller.Config{})
		assert.Empty(t, probs)
		for _, name := range []string{"PRLOOP_NATS_URL", "PRLOOP_HTTP_ADDR", "PRLOOP_GITHUB_API_URL", "PRLOOP_GITHUB_APP_ID", "PRLOOP_REVIEW_PROTOCOLS", "PRLOOP_REPOS"} {
			assert.Contains(t, vars, name, "embedded structs are walked")
		}
		assert.True(t, vars["PRLOOP_WEBHOOK_SECRET"].secret)
		assert.False(t, vars["PRLOOP_REPOS"].secret)
		assert.NotContains(t, vars, "PRLOOP_MERGE_METHOD", "a merger setting")
	})
}

// composeCase is one prloop service of a compose project.
type composeCase struct {
	where, name string
	svc         types.ServiceConfig
	role        deployRole
	stage       *dockerStage
	env         envSet // what the file sets, interpolated from an empty shell
}

// composeCases loads the compose files as docker compose does, with the
// demo profile when the demo override is among them and an empty shell, and
// returns the project and its prloop services, enabled or not.
func composeCases(t *testing.T, root string, df dockerfile, files ...string) (*types.Project, []composeCase) {
	t.Helper()
	var paths, profiles []string
	for _, f := range files {
		paths = append(paths, filepath.Join(root, f))
		if f == composeDemoPath {
			profiles = []string{"demo"}
		}
	}
	opts, err := cli.NewProjectOptions(paths, cli.WithEnv(nil), cli.WithProfiles(profiles))
	require.NoError(t, err)
	p, err := opts.LoadProject(t.Context())
	require.NoError(t, err, "docker compose -f %s would fail", strings.Join(files, " -f "))
	roles := deployRoles()
	var out []composeCase
	all := maps.Clone(p.Services)
	maps.Copy(all, p.DisabledServices)
	for _, name := range slices.Sorted(maps.Keys(all)) {
		s, where := all[name], strings.Join(files, " + ")+": service "+name
		if s.Build == nil {
			require.False(t, strings.HasPrefix(s.Image, "prloop"), "%s: a prloop image without build:", where)
			continue
		}
		role := deref(s.Build.Args["SERVICE"])
		if role == "prloop" && len(s.Command) > 0 {
			role += " " + s.Command[0]
		} else {
			assert.Empty(t, s.Command, "%s: the %s image runs the service itself; a command would be its arguments", where, role)
		}
		require.Contains(t, roles, role, "%s: build arg SERVICE and command: teach the deploy tests what it runs", where)
		assert.Equal(t, root, s.Build.Context, "%s builds from the repository root", where)
		assert.Equal(t, "Dockerfile", s.Build.Dockerfile, where)
		stage := df.stage(s.Build.Target)
		require.NotNil(t, stage, "%s: Dockerfile target %q: name one (static or git); the default is the last stage", where, s.Build.Target)
		env := envSet{}
		for k, v := range s.Environment {
			env[k] = envValue{value: deref(v), known: v != nil, from: where}
		}
		out = append(out, composeCase{where, name, s, roles[role], stage, env})
	}
	return p, out
}

func deref(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

// containerPorts returns the container side of a compose service's ports.
func containerPorts(s types.ServiceConfig) []int {
	var out []int
	for _, p := range s.Ports {
		out = append(out, int(p.Target))
	}
	return out
}

// runComposeGHSim runs the simulator with the compose command line (on a
// free port, in a temporary directory) and returns what it prints.
func runComposeGHSim(t *testing.T, args []string) string {
	t.Helper()
	args = slices.Clone(args)
	for i, a := range args[:len(args)-1] {
		switch a {
		case "-addr":
			args[i+1] = "127.0.0.1:0"
		case "-dir":
			args[i+1] = t.TempDir() // the container's path would collide between runs
		}
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var stdout, stderr proctest.Buffer
	done := make(chan error, 1)
	go func() { done <- run(ctx, args, &stdout, &stderr) }()
	require.Eventually(t, func() bool { return strings.Contains(stdout.String(), ghsim.DemoPrloop) || len(done) > 0 },
		30*time.Second, 20*time.Millisecond, "prloop %s printed no tokens", strings.Join(args, " "))
	require.Empty(t, done, "prloop %s stopped:\n%s", strings.Join(args, " "), stderr.String())
	cancel()
	require.NoError(t, <-done)
	return stdout.String()
}

// TestDeployCompose_VariablesPortsAndNATS checks docker-compose.yml, alone
// and with docker-compose.demo.yml: every service's variables, image and
// port, the simulator, and the NATS the services depend on.
func TestDeployCompose_VariablesPortsAndNATS(t *testing.T) {
	t.Parallel()
	root := proctest.Root(t)
	df := readDockerfile(t, root)
	for _, files := range [][]string{{composePath}, {composePath, composeDemoPath}} {
		t.Run(strings.Join(files, "+"), func(t *testing.T) {
			t.Parallel()
			demo := len(files) > 1
			p, cases := composeCases(t, root, df, files...)

			// NATS: its configuration on a bind mount, data on a named
			// volume, healthy only when JetStream is up.
			nc, ok := p.Services["nats"]
			require.True(t, ok, "no service nats")
			confPath := flagValue(nc.Command, "config")
			var confSrc string
			var volumes []string
			for _, v := range nc.Volumes {
				if v.Target == confPath {
					confSrc = v.Source
				} else if v.Type == types.VolumeTypeVolume {
					volumes = append(volumes, v.Target+"/")
				}
			}
			require.NotEmpty(t, confSrc, "nats: start nats-server with --config, mounted from deploy/nats")
			confText, err := os.ReadFile(confSrc)
			require.NoError(t, err)
			opts := natsOptions(t, string(confText), nil)
			assert.Truef(t, slices.ContainsFunc(volumes, func(m string) bool { return strings.HasPrefix(opts.StoreDir+"/", m) }),
				"%s: store_dir %s is not on a named volume (%v)", confSrc, opts.StoreDir, volumes)
			require.NotNil(t, nc.HealthCheck, "nats has no healthcheck; the services wait for service_healthy")
			assert.Contains(t, strings.Join(nc.HealthCheck.Test, " "), fmt.Sprintf("localhost:%d/healthz", opts.HTTPPort), "nats healthcheck vs http_port")
			assert.Contains(t, containerPorts(nc), opts.Port, "publish the NATS client port for nats sub")

			// The simulator runs with --profile demo only, at the address it
			// writes into its answers, which the other containers resolve.
			i := slices.IndexFunc(cases, func(c composeCase) bool { return c.role.name == roleSim })
			require.GreaterOrEqual(t, i, 0, "no simulator service (prloop ghsim)")
			sim := cases[i]
			_, enabled := p.Services[sim.name]
			assert.Equal(t, demo, enabled, "%s: runs with --profile demo only", sim.where)
			simAddr := flagValue(sim.svc.Command, "addr")
			host, port, err := net.SplitHostPort(simAddr)
			require.NoError(t, err, "%s: -addr", sim.where)
			assert.Contains(t, []string{sim.name, sim.svc.Hostname}, host, "%s: listen on the service's name", sim.where)
			assert.Contains(t, containerPorts(sim.svc), must(strconv.Atoi(port)), sim.where)
			require.NotNil(t, sim.svc.HealthCheck, sim.where)
			assert.Contains(t, strings.Join(sim.svc.HealthCheck.Test, " "), "//"+simAddr+"/", "%s: healthcheck", sim.where)
			var printed string
			var public []string
			if demo {
				printed = runComposeGHSim(t, sim.svc.Command)
				m := regexp.MustCompile(`(?m)^\s+` + regexp.QuoteMeta(ghsim.DemoPrloop) + `\s+(\S+)$`).FindStringSubmatch(printed)
				require.NotNil(t, m, printed)
				public = []string{m[1]}
			}

			var seen []string
			for _, tc := range cases {
				w := tc.where
				env := checkContainer(t, envCheck{w, tc.role, tc.env, tc.stage.imageEnv(), public}, tc.stage, containerPorts(tc.svc))
				if tc.role.name == roleSim {
					continue
				}
				seen = append(seen, tc.role.name)
				assert.Equal(t, types.ServiceConditionHealthy, tc.svc.DependsOn["nats"].Condition, "%s: depends_on nats condition service_healthy", w)
				u, err := url.Parse(env["PRLOOP_NATS_URL"].value)
				require.NoError(t, err, w)
				assert.Equal(t, "nats:"+strconv.Itoa(opts.Port), u.Host, "%s: PRLOOP_NATS_URL vs %s", w, confSrc)
				assert.Equal(t, "1", env["PRLOOP_STREAM_REPLICAS"].value, "%s: one NATS server holds one replica", w)
				if dir := env["PRLOOP_WORKSPACE_DIR"].value; dir != "" {
					assert.Truef(t, slices.ContainsFunc(tc.svc.Volumes, func(v types.ServiceVolumeConfig) bool { return v.Target == dir }), "%s: PRLOOP_WORKSPACE_DIR=%s is not a volume", w, dir)
				}
				if !demo {
					continue
				}
				vars, _ := configVars(tc.role.configs...)
				assert.Equal(t, "http://"+simAddr+"/", env["PRLOOP_GITHUB_API_URL"].value, "%s: PRLOOP_GITHUB_API_URL must reach the simulator", w)
				assert.Equal(t, public[0], env["GITHUB_TOKEN"].value, "%s: GITHUB_TOKEN must be the simulator's token for %s", w, ghsim.DemoPrloop)
				if _, ok := vars["PRLOOP_GITHUB_LOGIN"]; ok {
					assert.Equal(t, ghsim.DemoPrloop, env["PRLOOP_GITHUB_LOGIN"].value, w)
				}
				if tc.role.name == poller.Name {
					m := regexp.MustCompile(`seeded (\S+) with PR`).FindStringSubmatch(printed)
					require.NotNil(t, m, printed)
					assert.Contains(t, strings.Split(env["PRLOOP_REPOS"].value, ","), m[1], w)
				}
				assert.Equal(t, types.ServiceConditionHealthy, tc.svc.DependsOn[sim.name].Condition, "%s: depends_on %s", w, sim.name)
			}
			assert.Subset(t, seen, []string{poller.Name, feedback.Name, merger.Name, escalator.Name}, "a service for each")
		})
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// TestDeployDockerfile_MultiStageStaticNonRoot checks the Dockerfile: a
// build stage compiles a static binary with the Go version of go.work, and
// every image compose and Kubernetes run is a small non-root stage.
func TestDeployDockerfile_MultiStageStaticNonRoot(t *testing.T) {
	t.Parallel()
	root := proctest.Root(t)
	df := readDockerfile(t, root)
	wf, err := modfile.ParseWork("go.work", must(os.ReadFile(filepath.Join(root, "go.work"))), nil)
	require.NoError(t, err)
	goVersion := strings.Join(strings.SplitN(wf.Go.Version, ".", 3)[:2], ".")

	builders := map[string]bool{}
	for _, s := range df {
		for _, r := range s.runs {
			before, _, ok := strings.Cut(r, "go build")
			if !ok {
				continue
			}
			builders[s.name] = true
			img, tag, _ := strings.Cut(s.base, ":")
			assert.Equal(t, "golang", path.Base(img), "stage %s: build with the golang image", s.name)
			assert.True(t, strings.HasPrefix(tag, goVersion), "stage %s: golang:%s, but go.work wants go %s", s.name, tag, goVersion)
			assert.Contains(t, r, "$SERVICE", "stage %s: ARG SERVICE selects the binary", s.name)
			assert.True(t, s.env["CGO_ENABLED"] == "0" || strings.Contains(before, "CGO_ENABLED=0"), "stage %s: CGO_ENABLED=0: a static binary for distroless/static", s.name)
		}
	}
	require.NotEmpty(t, builders, "no stage runs go build")

	// The runtime stages: every compose build target, and the last stage
	// (what a plain docker build produces).
	_, cases := composeCases(t, root, df, composePath, composeDemoPath)
	runtime := []*dockerStage{df[len(df)-1]}
	for _, tc := range cases {
		runtime = append(runtime, tc.stage)
	}
	common, _ := configVars(config.Common{})
	for _, s := range runtime {
		assert.False(t, builders[s.name], "stage %s: a runtime image must not carry the Go toolchain", s.name)
		assert.Positive(t, s.uid(), "stage %s: USER %q: a numeric non-root UID (runAsNonRoot checks it)", s.name, s.user)
		assert.NotEmpty(t, s.entrypoint, "stage %s: ENTRYPOINT", s.name)
		assert.True(t, slices.ContainsFunc(s.copyFrom, func(f string) bool { return builders[f] }), "stage %s: COPY --from the build stage", s.name)
		port, err := httpPort(s.imageEnv())
		require.NoError(t, err, "stage %s: set PRLOOP_HTTP_ADDR for containers", s.name)
		assert.Equal(t, []string{strconv.Itoa(port)}, s.expose, "stage %s: EXPOSE the port of PRLOOP_HTTP_ADDR", s.name)
		for k := range s.env {
			if strings.HasPrefix(k, config.Prefix) {
				assert.Contains(t, common, k, "stage %s: ENV %s: images are shared, so only settings of config.Common belong there", s.name, k)
			}
		}
	}

	// .dockerignore, matched as docker build matches it.
	f, err := os.Open(filepath.Join(root, ".dockerignore"))
	require.NoError(t, err)
	defer f.Close()
	pm, err := patternmatcher.New(must(ignorefile.ReadAll(f)))
	require.NoError(t, err)
	for p, exclude := range map[string]bool{".git/HEAD": true, "go.work": false, "go.work.sum": false, "pkg/go.mod": false,
		"services/poller/go.mod": false, "cmd/prloop/main.go": false, "services/feedback/prompt.tmpl": false} {
		assert.Equal(t, exclude, must(pm.MatchesOrParentMatches(p)), ".dockerignore: is %s kept out of the build context", p)
	}
}
