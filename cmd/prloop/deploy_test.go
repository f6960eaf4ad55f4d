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
	"cmp"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
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
	"github.com/distribution/reference"
	"github.com/moby/buildkit/frontend/dockerfile/instructions"
	"github.com/moby/buildkit/frontend/dockerfile/parser"
	"github.com/moby/patternmatcher"
	"github.com/moby/patternmatcher/ignorefile"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/mod/modfile"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	psapi "k8s.io/pod-security-admission/api"
	"k8s.io/pod-security-admission/policy"
	"sigs.k8s.io/kustomize/api/krusty"
	ktypes "sigs.k8s.io/kustomize/api/types"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"

	"github.com/prloop/prloop/pkg/app"
	"github.com/prloop/prloop/pkg/config"
	"github.com/prloop/prloop/pkg/ghsim"
	"github.com/prloop/prloop/pkg/github"
	"github.com/prloop/prloop/pkg/natsx/natstest"
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
	// and runs the agent; the merger fetches to verify its branch updates;
	// the simulator keeps real git repositories.
	rolesNeedingGit = []string{feedback.Name, merger.Name, roleSim, roleAllInOne}
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
	assert.Positive(t, stage.uid(), "%s: image target %s: USER %q: a numeric non-root UID (runAsNonRoot checks it)", ec.where, stage.name, stage.user)
	common, _ := configVars(config.Common{})
	for k := range stage.env {
		assert.True(t, !strings.HasPrefix(k, config.Prefix) || common[k] != configVar{}, "%s: image target %s: ENV %s: images are shared, so only settings of config.Common belong there", ec.where, stage.name, k)
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
	name, base, user string
	env              map[string]string
	expose, runs     []string // runs: the RUN command lines
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
			case *instructions.RunCommand:
				s.runs = append(s.runs, strings.Join(c.CmdLine, " "))
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
	text = fillNATSKeys(t, text) // the users' public keys (natsauth_test.go)
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
	// The NATS container's env_file (.nats/public.env) is made by
	// 'prloop nats-keys' on the user's machine, so env files are not read:
	// prloop's own services set everything in `environment:`.
	opts, err := cli.NewProjectOptions(paths, cli.WithEnv(nil), cli.WithProfiles(profiles), cli.WithoutEnvironmentResolution)
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
			assert.Contains(t, sim.svc.Command, "-seed", "%s: seed the demo repository and tokens", sim.where)
			gh, err := ghsim.New(ghsim.Options{Dir: t.TempDir()})
			require.NoError(t, err)
			t.Cleanup(func() { _ = gh.Close() })
			seeded := must(ghsim.SeedDemo(gh)) // what -seed serves
			var public []string
			if demo {
				public = []string{seeded.Tokens[ghsim.DemoPrloop]}
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
					assert.Contains(t, strings.Split(env["PRLOOP_REPOS"].value, ","), seeded.Repo.String(), w)
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
	// The runtime stages are checked with the containers that run them.

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

// k8sBase is deploy/k8s as kubectl apply -k renders it, and its prloop
// Deployments.
type k8sBase struct {
	kust       ktypes.Kustomization
	namespaces []corev1.Namespace
	configMaps map[string]corev1.ConfigMap
	sts        []appsv1.StatefulSet
	services   []corev1.Service
	deploys    []k8sDeployment
}

// k8sDeployment is a prloop Deployment, its container and the environment
// it starts with (the image's ENV, envFrom, env).
type k8sDeployment struct {
	where string
	appsv1.Deployment
	c     corev1.Container
	role  deployRole
	stage *dockerStage
	env   envCheck
}

// decodeStrict decodes a rendered object; a misspelt field is an error.
func decodeStrict[T any](t *testing.T, y []byte) T {
	t.Helper()
	var v T
	require.NoError(t, yaml.UnmarshalStrict(y, &v), "%s", y)
	return v
}

func renderK8s(t *testing.T, root string, df dockerfile) *k8sBase {
	t.Helper()
	dir := filepath.Join(root, k8sDir)
	b := &k8sBase{kust: decodeStrict[ktypes.Kustomization](t, must(os.ReadFile(filepath.Join(dir, "kustomization.yaml")))), configMaps: map[string]corev1.ConfigMap{}}
	rendered, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), dir)
	require.NoError(t, err, "kubectl apply -k %s would fail", k8sDir)
	var deploys []appsv1.Deployment
	for _, r := range rendered.Resources() {
		y := must(r.AsYAML())
		switch r.GetKind() {
		case "Namespace":
			b.namespaces = append(b.namespaces, decodeStrict[corev1.Namespace](t, y))
		case "ConfigMap":
			b.configMaps[r.GetName()] = decodeStrict[corev1.ConfigMap](t, y)
		case "Deployment":
			deploys = append(deploys, decodeStrict[appsv1.Deployment](t, y))
		case "StatefulSet":
			b.sts = append(b.sts, decodeStrict[appsv1.StatefulSet](t, y))
		case "Service":
			b.services = append(b.services, decodeStrict[corev1.Service](t, y))
		}
	}
	// The image names the service, and the compose service building it the
	// Dockerfile target.
	_, cases := composeCases(t, root, df, composePath)
	for _, d := range deploys {
		where := k8sDir + ": Deployment " + d.Name
		require.Len(t, d.Spec.Template.Spec.Containers, 1, where)
		c := d.Spec.Template.Spec.Containers[0]
		i := slices.IndexFunc(cases, func(tc composeCase) bool { return imageRepo(t, tc.svc.Image) == imageRepo(t, c.Image) })
		require.GreaterOrEqual(t, i, 0, "%s: image %s is not one docker-compose.yml builds", where, c.Image)
		tc := cases[i]
		assert.Equal(t, c.Name, tc.role.name, "%s: container %s runs the %s image", where, c.Name, tc.role.name)
		env := envSet{}
		for _, ef := range c.EnvFrom {
			require.NotNil(t, ef.ConfigMapRef, "%s: envFrom a Secret hides which variables it sets; use env with secretKeyRef", where)
			cm, ok := b.configMaps[ef.ConfigMapRef.Name]
			require.True(t, ok && ef.Prefix == "", "%s: envFrom ConfigMap %s: not in the base, or a prefix", where, ef.ConfigMapRef.Name)
			for k, v := range cm.Data {
				env[k] = envValue{value: v, known: true, from: "ConfigMap " + cm.Name}
			}
		}
		for _, e := range c.Env {
			if e.ValueFrom == nil {
				env[e.Name] = envValue{value: e.Value, known: true, from: where}
			} else if r := e.ValueFrom.SecretKeyRef; r != nil {
				env[e.Name] = envValue{secretRef: true, from: fmt.Sprintf("Secret %s key %s", r.Name, r.Key)}
			} else {
				env[e.Name] = envValue{from: where + " (valueFrom)"}
			}
		}
		b.deploys = append(b.deploys, k8sDeployment{where, d, c, tc.role, tc.stage, envCheck{where, tc.role, env, tc.stage.imageEnv(), nil}})
	}
	return b
}

// imageRepo strips the tag from an image reference.
func imageRepo(t *testing.T, image string) string {
	n, err := reference.ParseNormalizedNamed(image)
	require.NoError(t, err, "image %s", image)
	return reference.FamiliarName(n)
}

// portOf resolves a port given by number or by the container's port name.
func portOf(c corev1.Container, p intstr.IntOrString) int {
	if i := slices.IndexFunc(c.Ports, func(cp corev1.ContainerPort) bool { return cp.Name == p.StrVal }); p.Type == intstr.String && i >= 0 {
		return int(c.Ports[i].ContainerPort)
	}
	return p.IntValue() // 0 for an unknown name
}

// mountFor returns the volume mounted at dir or at a parent of it.
func mountFor(c corev1.Container, dir string) (name, mountPath string) {
	for _, m := range c.VolumeMounts {
		if strings.HasPrefix(dir+"/", strings.TrimSuffix(m.MountPath, "/")+"/") && len(m.MountPath) > len(mountPath) {
			name, mountPath = m.Name, m.MountPath
		}
	}
	return name, mountPath
}

// checkPod runs the Pod Security admission checks of the namespace's level,
// then prloop's own rules: a read-only root, resources, no service account
// token, the image's UID (-1: unknown), and writable dirs on emptyDirs.
func checkPod(t *testing.T, where string, lv psapi.LevelVersion, tpl corev1.PodTemplateSpec, uid int64, writable ...string) {
	t.Helper()
	eval, err := policy.NewEvaluator(policy.DefaultChecks(), nil)
	require.NoError(t, err)
	res := policy.AggregateCheckResults(eval.EvaluatePod(lv, &tpl.ObjectMeta, &tpl.Spec))
	assert.True(t, res.Allowed, "%s: Pod Security %s forbids: %s %v", where, lv.Level, res.ForbiddenReason(), res.ForbiddenDetails)
	spec := tpl.Spec
	require.True(t, spec.SecurityContext != nil && spec.SecurityContext.RunAsUser != nil, "%s: set runAsUser", where)
	assert.True(t, uid < 0 || uid == *spec.SecurityContext.RunAsUser, "%s: runAsUser differs from the image's USER %d, which owns its directories", where, uid)
	assert.True(t, spec.AutomountServiceAccountToken != nil && !*spec.AutomountServiceAccountToken, "%s: automountServiceAccountToken: false; prloop does not use the Kubernetes API", where)
	for _, c := range spec.Containers {
		sc := c.SecurityContext
		assert.True(t, sc != nil && sc.ReadOnlyRootFilesystem != nil && *sc.ReadOnlyRootFilesystem, "%s: readOnlyRootFilesystem: true", where)
		for _, rl := range []corev1.ResourceList{c.Resources.Requests, c.Resources.Limits} {
			assert.True(t, !rl.Cpu().IsZero() && !rl.Memory().IsZero(), "%s: resources requests and limits of cpu and memory", where)
		}
		for _, dir := range writable {
			name, _ := mountFor(c, dir)
			i := slices.IndexFunc(spec.Volumes, func(v corev1.Volume) bool { return v.Name == name })
			assert.True(t, i >= 0 && spec.Volumes[i].EmptyDir != nil, "%s: %s is on the read-only root (or not an emptyDir)", where, dir)
		}
	}
}

// TestDeployK8s_VariablesPortsSecurityAndNATS checks the Kustomize base as
// kubectl apply -k renders it: each Deployment's environment, ports, probes,
// Prometheus annotations and security, the Services, and the NATS cluster.
func TestDeployK8s_VariablesPortsSecurityAndNATS(t *testing.T) {
	t.Parallel()
	root := proctest.Root(t)
	b := renderK8s(t, root, readDockerfile(t, root))
	manifests, err := filepath.Glob(filepath.Join(root, k8sDir, "*.yaml"))
	require.NoError(t, err)
	for _, m := range manifests {
		assert.True(t, filepath.Base(m) == "kustomization.yaml" || slices.Contains(b.kust.Resources, filepath.Base(m)), "kustomization.yaml: resources lacks %s", filepath.Base(m))
	}
	require.Len(t, b.namespaces, 1)
	ns := b.namespaces[0]
	assert.Equal(t, b.kust.Namespace, ns.Name, "kustomization.yaml: namespace")
	version, err := psapi.ParseVersion(ns.Labels[psapi.EnforceVersionLabel])
	require.NoError(t, err, "Namespace %s", ns.Name)
	lv := psapi.LevelVersion{Level: psapi.LevelRestricted, Version: version}
	assert.Equal(t, string(psapi.LevelRestricted), ns.Labels[psapi.EnforceLevelLabel], "Namespace %s: enforce the restricted Pod Security Standard", ns.Name)
	require.Len(t, b.sts, 1, "one NATS StatefulSet")
	sts := b.sts[0]
	nc := sts.Spec.Template.Spec.Containers[0]

	// NATS: the configuration from its ConfigMap, parsed by nats-server as
	// pod nats-0 would; data on a PVC; routes through the headless Service.
	confPath := flagValue(slices.Concat(nc.Command, nc.Args), "config")
	vol, mountPath := mountFor(nc, confPath)
	vi := slices.IndexFunc(sts.Spec.Template.Spec.Volumes, func(v corev1.Volume) bool { return v.Name == vol && v.ConfigMap != nil })
	require.GreaterOrEqual(t, vi, 0, "nats: start nats-server with --config from a ConfigMap volume")
	confText := b.configMaps[sts.Spec.Template.Spec.Volumes[vi].ConfigMap.Name].Data[strings.TrimPrefix(confPath, mountPath+"/")]
	vars := map[string]string{}
	for _, e := range nc.Env {
		if e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "metadata.name" {
			vars[e.Name] = sts.Name + "-0"
		}
	}
	opts := natsOptions(t, confText, vars)
	assert.Equal(t, sts.Name+"-0", opts.ServerName, "nats: server_name must be the pod's name: JetStream needs each node's own")
	storeVol, _ := mountFor(nc, opts.StoreDir)
	ci := slices.IndexFunc(sts.Spec.VolumeClaimTemplates, func(v corev1.PersistentVolumeClaim) bool { return v.Name == storeVol })
	require.GreaterOrEqual(t, ci, 0, "nats: store_dir %s is not on a volumeClaimTemplate", opts.StoreDir)
	assert.True(t, opts.JetStreamMaxStore > 0 && opts.JetStreamMaxStore < sts.Spec.VolumeClaimTemplates[ci].Spec.Resources.Requests.Storage().Value(), "nats: max_file_store must fit on the volume")
	checkPod(t, "StatefulSet nats", lv, sts.Spec.Template, -1)
	assert.EqualValues(t, 3, *sts.Spec.Replicas, "nats: replicas")
	hi := slices.IndexFunc(b.services, func(s corev1.Service) bool { return s.Name == sts.Spec.ServiceName })
	require.GreaterOrEqual(t, hi, 0, "nats: serviceName %s has no Service", sts.Spec.ServiceName)
	headless := b.services[hi]
	assert.True(t, headless.Spec.ClusterIP == corev1.ClusterIPNone && headless.Spec.PublishNotReadyAddresses, "Service %s: headless, publishing not-ready pods for the routes", headless.Name)
	var routes, want []string
	for i, r := range opts.Routes {
		routes, want = append(routes, r.Host), append(want, fmt.Sprintf("%s-%d.%s:%d", sts.Name, i, headless.Name, opts.Cluster.Port))
	}
	assert.Equal(t, int(*sts.Spec.Replicas), len(routes), "nats: one route per pod")
	assert.ElementsMatch(t, want, routes, "nats: routes through %s", headless.Name)
	for _, p := range []*corev1.Probe{nc.StartupProbe, nc.LivenessProbe, nc.ReadinessProbe} {
		require.True(t, p != nil && p.HTTPGet != nil && strings.HasPrefix(p.HTTPGet.Path, "/healthz"), "nats: probes ask /healthz")
		assert.Equal(t, opts.HTTPPort, portOf(nc, p.HTTPGet.Port), "nats: probes ask the monitoring port")
	}

	// Each Service selects one workload's pods and targets ports they have.
	pods := map[string]corev1.PodTemplateSpec{"StatefulSet " + sts.Name: sts.Spec.Template}
	for _, d := range b.deploys {
		pods[d.where] = d.Spec.Template
	}
	servicePorts := map[string]bool{} // workload/target port
	for _, s := range b.services {
		var targets []string
		for w, p := range pods {
			if len(s.Spec.Selector) > 0 && labels.SelectorFromSet(s.Spec.Selector).Matches(labels.Set(p.Labels)) {
				targets = append(targets, w)
			}
		}
		require.Len(t, targets, 1, "Service %s selects the pods of %v; want one workload", s.Name, targets)
		for _, p := range s.Spec.Ports {
			tp := portOf(pods[targets[0]].Spec.Containers[0], p.TargetPort)
			assert.NotZero(t, tp, "Service %s: port %s targets no container port", s.Name, p.Name)
			servicePorts[fmt.Sprintf("%s/%d", targets[0], tp)] = true
			servicePorts[fmt.Sprintf("%s:%d/%s/%d", s.Name, p.Port, targets[0], tp)] = true
		}
	}

	usedCMs := map[string]bool{}
	var seen []string
	for _, d := range b.deploys {
		where, c, pod := d.where, d.c, d.Spec.Template
		seen = append(seen, c.Name)
		assert.Equal(t, c.Name, d.Name, "%s: name the Deployment after its service", where)
		assert.True(t, d.Spec.Replicas != nil && *d.Spec.Replicas > 0 && labels.SelectorFromSet(d.Spec.Selector.MatchLabels).Matches(labels.Set(pod.Labels)), "%s: replicas and a selector of its pods", where)
		assert.True(t, slices.ContainsFunc(b.kust.Images, func(im ktypes.Image) bool { return im.Name == imageRepo(t, c.Image) }), "%s: kustomization.yaml images: lets users point %s at their registry", where, c.Image)
		for _, ef := range c.EnvFrom {
			usedCMs[ef.ConfigMapRef.Name] = true
		}
		env := checkContainer(t, d.env, d.stage, []int{portOf(c, intstr.FromString("http"))})
		port := must(httpPort(env))
		assert.True(t, env["GITHUB_TOKEN"].secretRef, "%s: GITHUB_TOKEN must come from a Secret (secretKeyRef)", where)
		assert.Equal(t, strconv.Itoa(int(*sts.Spec.Replicas)), env["PRLOOP_STREAM_REPLICAS"].value, "%s: PRLOOP_STREAM_REPLICAS: a replica on each NATS node", where)
		u, err := url.Parse(env["PRLOOP_NATS_URL"].value)
		require.NoError(t, err, where)
		assert.True(t, servicePorts[fmt.Sprintf("%s/StatefulSet %s/%d", u.Host, sts.Name, opts.Port)], "%s: PRLOOP_NATS_URL %s is no Service port forwarding to NATS's client port %d", where, u.Host, opts.Port)
		if c.Name == poller.Name {
			assert.True(t, servicePorts[fmt.Sprintf("%s/%d", where, port)], "%s: no Service for the webhook on the HTTP port", where)
		}

		for _, p := range []struct {
			probe *corev1.Probe
			path  string
		}{{c.LivenessProbe, "/healthz"}, {c.ReadinessProbe, "/readyz"}, {c.StartupProbe, ""}} {
			require.True(t, (p.path == "" && p.probe == nil) || (p.probe != nil && p.probe.HTTPGet != nil), "%s: liveness and readiness probes: httpGet", where)
			if p.probe != nil {
				assert.True(t, (p.path == "" || p.path == p.probe.HTTPGet.Path) && portOf(c, p.probe.HTTPGet.Port) == port, "%s: probe %s on port %d", where, p.path, port)
			}
		}
		for k, v := range map[string]string{"scrape": "true", "port": strconv.Itoa(port), "path": "/metrics"} {
			assert.Equal(t, v, pod.Annotations["prometheus.io/"+k], "%s: Prometheus annotation prometheus.io/%s", where, k)
		}
		checkPod(t, where, lv, pod, d.stage.uid(), "/tmp", cmp.Or(d.stage.env["HOME"], "/tmp"), cmp.Or(env["PRLOOP_WORKSPACE_DIR"].value, "/tmp"))
		if v, ok := env["GOMEMLIMIT"]; ok {
			// GOMEMLIMIT's suffixes (KiB, MiB, …) are quantities' plus B.
			soft, err := resource.ParseQuantity(strings.TrimSuffix(v.value, "B"))
			require.NoError(t, err, "%s: GOMEMLIMIT=%s", where, v.value)
			assert.Negative(t, soft.Cmp(*c.Resources.Limits.Memory()), "%s: GOMEMLIMIT must leave headroom below the memory limit", where)
		}
	}
	assert.Subset(t, seen, []string{poller.Name, feedback.Name, merger.Name, escalator.Name}, "a Deployment for each")
	// ConfigMaps are readable by anyone who can read the namespace's
	// configuration: no credential belongs there.
	everything, _ := configVars(deployRoles()[roleAllInOne].configs...)
	for name, cm := range b.configMaps {
		for k := range cm.Data {
			assert.False(t, strings.HasPrefix(k, config.Prefix) && !usedCMs[name], "ConfigMap %s sets PRLOOP_* variables but no Deployment loads it", name)
			assert.False(t, everything[k].secret || slices.Contains(tokenVars, k), "ConfigMap %s holds the credential %s; put it in a Secret", name, k)
		}
	}
}

// TestDeployConfig_LoadsAndValidates loads each service's configuration
// from each deployment's environment, as the service does at start (values
// from Secrets and the shell stay unset), and checks that Kubernetes' grace
// period outlasts the service's shutdown. Not parallel: it sets variables.
func TestDeployConfig_LoadsAndValidates(t *testing.T) {
	root := proctest.Root(t)
	df := readDockerfile(t, root)
	grace := map[string]int64{}
	envs := map[string]envCheck{}
	for _, files := range [][]string{{composePath}, {composePath, composeDemoPath}} {
		_, cases := composeCases(t, root, df, files...)
		for _, tc := range cases {
			envs[tc.where] = envCheck{tc.where, tc.role, tc.env, tc.stage.imageEnv(), nil}
		}
	}
	for _, d := range renderK8s(t, root, df).deploys {
		envs[d.where] = d.env
		grace[d.where] = corev1.DefaultTerminationGracePeriodSeconds
		if g := d.Spec.Template.Spec.TerminationGracePeriodSeconds; g != nil {
			grace[d.where] = *g
		}
	}
	for where, ec := range envs {
		if ec.role.newConfig == nil {
			continue
		}
		t.Run(where, func(t *testing.T) {
			for _, kv := range os.Environ() { // unset by the cleanups t.Setenv registers
				if k, _, _ := strings.Cut(kv, "="); strings.HasPrefix(k, config.Prefix) || slices.Contains(tokenVars, k) {
					t.Setenv(k, "")
					require.NoError(t, os.Unsetenv(k))
				}
			}
			for _, kv := range merged(ec.image, ec.env).literal() {
				k, v, _ := strings.Cut(kv, "=")
				t.Setenv(k, v)
			}
			cfg := ec.role.newConfig()
			require.NoError(t, config.Load(cfg), "%s would not start", ec.role.name)
			if g, ok := grace[where]; ok {
				assert.Greater(t, time.Duration(g)*time.Second, cfg.Shared().ShutdownGrace+time.Second, // app.Serve waits grace + 1s
					"terminationGracePeriodSeconds must outlast PRLOOP_SHUTDOWN_GRACE + 1s, or Kubernetes kills in-flight work")
			}
		})
	}
}

var listenRE = regexp.MustCompile(`"msg":"http server listening"[^\n]*?"addr":"([^"]+)"`)

// TestDeployK8s_ProbesServedByServices runs each Deployment's service
// binary with the Deployment's environment and asks it for the probe paths
// of the manifest, the path of its Prometheus annotations and (poller) the
// webhook. Only what cannot work here is replaced: NATS (embedded, one
// replica), the listen address (a free port on 127.0.0.1), GitHub (the
// simulator), the workspace, and the values of Secrets.
func TestDeployK8s_ProbesServedByServices(t *testing.T) {
	t.Parallel()
	root := proctest.Root(t)
	b := renderK8s(t, root, readDockerfile(t, root))
	sim, conn := startTestSim(t), natstest.Start(t)
	const webhookSecret = "deploy-test-webhook-secret"
	for _, d := range b.deploys {
		t.Run(d.c.Name, func(t *testing.T) {
			t.Parallel()
			vars, _ := configVars(d.role.configs...)
			env := merged(d.env.image, d.env.env)
			for k, v := range map[string]string{"PRLOOP_NATS_URL": conn.URL, "PRLOOP_NATS_CREDS_FILE": conn.CredsFile, "PRLOOP_STREAM_REPLICAS": "1", "PRLOOP_HTTP_ADDR": "127.0.0.1:0",
				"PRLOOP_LOG_FORMAT": "json", "PRLOOP_WORKSPACE_DIR": t.TempDir(), "PRLOOP_DATA_DIR": t.TempDir(), "PRLOOP_WEBHOOK_SECRET": webhookSecret} {
				if _, reads := vars[k]; reads {
					env[k] = envValue{value: v, known: true}
				}
			}
			for _, kv := range sim.env() {
				k, v, _ := strings.Cut(kv, "=")
				env[k] = envValue{value: v, known: true}
			}
			p := proctest.Start(t, proctest.Build(t, d.role.pkg), env.literal())
			var base string
			require.Eventually(t, func() bool {
				if m := listenRE.FindStringSubmatch(p.Stderr.String()); m != nil {
					base = "http://" + m[1]
				}
				return base != "" || p.Exited()
			}, 30*time.Second, 10*time.Millisecond, "the HTTP server never listened")
			require.NotEmpty(t, base, "exited:\n%s", p.Stderr.String())
			get := func(path string) (int, string) {
				resp, err := http.Get(base + path)
				if err != nil {
					return 0, err.Error()
				}
				defer resp.Body.Close()
				return resp.StatusCode, string(must(io.ReadAll(resp.Body)))
			}
			for _, probe := range []*corev1.Probe{d.c.StartupProbe, d.c.LivenessProbe, d.c.ReadinessProbe} {
				if probe != nil { // readiness waits for NATS: poll as the kubelet does
					assert.EventuallyWithT(t, func(c *assert.CollectT) {
						code, body := get(probe.HTTPGet.Path)
						assert.Equal(c, http.StatusOK, code, "%s: probe GET %s answered %q", d.where, probe.HTTPGet.Path, body)
					}, 30*time.Second, 20*time.Millisecond)
				}
			}
			code, _ := get("/deploy-test-no-such-path")
			assert.Equal(t, http.StatusNotFound, code, "the server answers any path, so a wrong probe path would pass")
			metricsPath := d.Spec.Template.Annotations["prometheus.io/path"]
			code, body := get(metricsPath)
			assert.Equal(t, http.StatusOK, code, "%s: GET %s (prometheus.io/path)", d.where, metricsPath)
			assert.Contains(t, body, "# TYPE go_goroutines", "%s: GET %s: want the Prometheus text format", d.where, metricsPath)
			if d.c.Name != poller.Name {
				return
			}
			// The webhook Service targets this port; POST /webhook checks
			// the signature.
			for _, signed := range []bool{false, true} {
				body := `{"zen":"Keep it logically awesome.","hook_id":1}`
				req := must(http.NewRequestWithContext(t.Context(), http.MethodPost, base+"/webhook", strings.NewReader(body)))
				req.Header.Set("X-GitHub-Event", "ping")
				req.Header.Set("Content-Type", "application/json")
				want := http.StatusUnauthorized
				if signed {
					mac := hmac.New(sha256.New, []byte(webhookSecret))
					mac.Write([]byte(body))
					req.Header.Set("X-Hub-Signature-256", "sha256="+hex.EncodeToString(mac.Sum(nil)))
					want = http.StatusAccepted
				}
				resp, err := http.DefaultClient.Do(req)
				require.NoError(t, err)
				resp.Body.Close()
				assert.Equal(t, want, resp.StatusCode, "%s: webhook signed=%v", d.where, signed)
			}
		})
	}
}
