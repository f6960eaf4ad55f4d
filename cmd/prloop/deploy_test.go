package main

// The tests in this file keep the deployment files honest: docker-compose.yml
// (and docker-compose.demo.yml), deploy/k8s, deploy/nats and the Dockerfile.
// They read the files the way Docker Compose, Kubernetes, NATS and Docker
// would, and compare them with the code: each PRLOOP_* variable a file sets
// must be a setting of that service's Config (found by reflecting over the
// envconfig tags), every required one must be set, the values must load and
// validate, ports must agree, and the probe paths must be served by the real
// service binaries.

import (
	"bufio"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"

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

// Paths of the deployment files, relative to the repository root.
const (
	composePath     = "docker-compose.yml"
	composeDemoPath = "docker-compose.demo.yml"
	dockerfilePath  = "Dockerfile"
	dockerignore    = ".dockerignore"
	k8sDir          = "deploy/k8s"
)

// ---- what each deployable binary reads ----

// deployRole is a binary a deployment file runs: a service, the all-in-one
// prloop run, or the simulator (prloop ghsim).
type deployRole struct {
	name string
	// pkg is the main package, relative to the repository root.
	pkg string
	// configs are zero values of the configuration structs whose envconfig
	// tags name every PRLOOP_* variable the binary reads.
	configs []any
	// newConfig returns the configuration to load, nil when the binary reads
	// no PRLOOP_* configuration.
	newConfig func() app.Config
	// other are the non-PRLOOP variables the binary reads.
	other []string
}

// goRuntimeVars are the Go runtime's variables, which a deployment may set
// for any Go binary.
var goRuntimeVars = []string{"GOMEMLIMIT", "GOMAXPROCS", "GOGC", "GODEBUG", "TZ"}

// tokenVars are where github.ResolveToken looks for the token.
var tokenVars = []string{"GITHUB_TOKEN", "GH_TOKEN"}

// roleAllInOne and roleSim are the prloop binary's commands a deployment may
// run; the services' roles are their names.
const (
	roleAllInOne = "prloop run"
	roleSim      = "prloop ghsim"
)

func deployRoles() map[string]deployRole {
	svc := func(name string, cfg any, newConfig func() app.Config, extra ...string) deployRole {
		return deployRole{
			name: name, pkg: "./services/" + name + "/cmd/" + name,
			configs: []any{cfg}, newConfig: newConfig,
			other: slices.Concat(tokenVars, goRuntimeVars, extra),
		}
	}
	return map[string]deployRole{
		poller.Name: svc(poller.Name, poller.Config{}, func() app.Config { return &poller.Config{} }),
		// The agent's own credentials: the feedback service passes its
		// environment, minus GitHub credentials, to PRLOOP_AGENT_CMD.
		feedback.Name:  svc(feedback.Name, feedback.Config{}, func() app.Config { return &feedback.Config{} }, "ANTHROPIC_API_KEY", "OPENAI_API_KEY"),
		merger.Name:    svc(merger.Name, merger.Config{}, func() app.Config { return &merger.Config{} }),
		escalator.Name: svc(escalator.Name, escalator.Config{}, func() app.Config { return &escalator.Config{} }),
		roleAllInOne: {
			name: roleAllInOne, pkg: "./cmd/prloop",
			configs:   []any{poller.Config{}, feedback.Config{}, merger.Config{}, escalator.Config{}},
			newConfig: func() app.Config { return &allConfig{} },
			other:     slices.Concat(tokenVars, goRuntimeVars, []string{"ANTHROPIC_API_KEY", "OPENAI_API_KEY"}),
		},
		// The simulator takes flags, not PRLOOP_* settings.
		roleSim: {name: roleSim, pkg: "./cmd/prloop", other: goRuntimeVars},
	}
}

// configVar is one variable a configuration struct reads.
type configVar struct {
	name     string
	field    string
	required bool
	// secret: the field is a github.Secret, so its value is a credential.
	secret bool
}

var secretType = reflect.TypeFor[github.Secret]()

// configVars returns the variables the configuration structs read, walking
// embedded structs as envconfig does and skipping ignored fields. Problems
// are fields envconfig would read under a name prloop does not spell.
func configVars(cfgs ...any) (map[string]configVar, []string) {
	out := map[string]configVar{}
	var problems []string
	var walk func(t reflect.Type, path string)
	walk = func(t reflect.Type, path string) {
		for i := range t.NumField() {
			f := t.Field(i)
			if !f.IsExported() {
				continue
			}
			if ignored, _ := strconv.ParseBool(f.Tag.Get("ignored")); ignored {
				continue
			}
			key := f.Tag.Get("envconfig")
			if key == "" && f.Anonymous && f.Type.Kind() == reflect.Struct {
				walk(f.Type, path+f.Name+".")
				continue
			}
			switch {
			case key == "":
				problems = append(problems, fmt.Sprintf("%s%s has no envconfig tag: envconfig would read it under an unprefixed name", path, f.Name))
				continue
			case !strings.HasPrefix(key, config.Prefix):
				problems = append(problems, fmt.Sprintf("%s%s reads %s, which lacks the %s prefix", path, f.Name, key, config.Prefix))
			}
			required, _ := strconv.ParseBool(f.Tag.Get("required"))
			v := configVar{name: key, field: path + f.Name, required: required, secret: f.Type == secretType}
			if prev, ok := out[key]; ok {
				// Two services may read the same variable (the all-in-one
				// role reads all four); it is required if any requires it.
				v.required = v.required || prev.required
				v.secret = v.secret || prev.secret
			}
			out[key] = v
		}
	}
	for _, c := range cfgs {
		walk(reflect.TypeOf(c), reflect.TypeOf(c).String()+".")
	}
	return out, problems
}

// ---- the environment a deployment file gives a container ----

// envValue is one variable as a deployment sets it.
type envValue struct {
	// value is the value, when known: written in a file or the image, or
	// (compose) interpolated with an empty shell environment.
	value string
	// known is false for values from a Secret or the pod's fields.
	known bool
	// from says where it is set, for messages.
	from string
	// secretRef: from a Kubernetes Secret.
	secretRef bool
	// shell: compose takes it from the shell (${VAR…}).
	shell bool
}

// envSet maps variable names to how they are set.
type envSet map[string]envValue

// literal returns the known values as KEY=VALUE, sorted.
func (e envSet) literal() []string {
	var out []string
	for k, v := range e {
		if v.known {
			out = append(out, k+"="+v.value)
		}
	}
	sort.Strings(out)
	return out
}

// envCheck is one container's environment to check against its role.
type envCheck struct {
	// where names the file and the service, for messages.
	where string
	role  deployRole
	// env is what the file sets; image is what the image's ENV sets, which
	// counts for required variables but is checked on its own.
	env, image envSet
	// public are values a credential may have in plain text: the
	// simulator's published demo tokens.
	public []string
}

// problems lists what is wrong with the environment: PRLOOP_* variables the
// role does not read, other variables not on its list, required variables
// not set, and credentials written in plain text.
func (c envCheck) problems() []string {
	vars, probs := configVars(c.role.configs...)
	var out []string
	for _, p := range probs {
		out = append(out, fmt.Sprintf("%s: %s", c.where, p))
	}
	names := make([]string, 0, len(c.env))
	for k := range c.env {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, name := range names {
		v := c.env[name]
		cv, known := vars[name]
		switch {
		case strings.HasPrefix(name, config.Prefix) && !known:
			out = append(out, fmt.Sprintf("%s: %s (set in %s) is not a setting of %s: no field of its Config has envconfig:%q", c.where, name, v.from, c.role.name, name))
		case !strings.HasPrefix(name, config.Prefix) && !slices.Contains(c.role.other, name):
			out = append(out, fmt.Sprintf("%s: %s (set in %s) is not read by %s (allowed besides PRLOOP_*: %s)", c.where, name, v.from, c.role.name, strings.Join(c.role.other, ", ")))
		}
		if (cv.secret || slices.Contains(tokenVars, name)) && v.known && !v.shell && !v.secretRef && v.value != "" && !slices.Contains(c.public, v.value) {
			out = append(out, fmt.Sprintf("%s: %s is a credential written in plain text in %s: take it from a Secret (Kubernetes) or the shell (compose)", c.where, name, v.from))
		}
	}
	req := make([]string, 0, len(vars))
	for name, cv := range vars {
		if cv.required {
			req = append(req, name)
		}
	}
	sort.Strings(req)
	for _, name := range req {
		v, ok := c.env[name]
		if !ok {
			v, ok = c.image[name]
		}
		if !ok || (v.known && v.value == "") {
			out = append(out, fmt.Sprintf("%s: %s is required by %s (%s) but not set", c.where, name, c.role.name, vars[name].field))
		}
	}
	return out
}

// httpPort returns the port PRLOOP_HTTP_ADDR (or its default) listens on,
// and an error when that address cannot be reached from outside a
// container.
func httpPort(env envSet) (int, error) {
	addr := "127.0.0.1:0" // config.Common's default
	if v, ok := env["PRLOOP_HTTP_ADDR"]; ok {
		if !v.known {
			return 0, fmt.Errorf("PRLOOP_HTTP_ADDR comes from %s: the port must be known", v.from)
		}
		addr = v.value
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return 0, fmt.Errorf("PRLOOP_HTTP_ADDR=%q: %w", addr, err)
	}
	n, err := strconv.Atoi(port)
	if err != nil || n <= 0 || n > 65535 {
		return 0, fmt.Errorf("PRLOOP_HTTP_ADDR=%q: want a fixed port, the probes and Prometheus need one", addr)
	}
	if host != "" && host != "0.0.0.0" && host != "::" {
		return 0, fmt.Errorf("PRLOOP_HTTP_ADDR=%q: in a container listen on all interfaces (:%d), not on %s", addr, n, host)
	}
	return n, nil
}

// ---- Docker Compose ----

type composeFile struct {
	Services map[string]*composeService `yaml:"services"`
	Volumes  map[string]any             `yaml:"volumes"`
}

type composeService struct {
	Image       string           `yaml:"image"`
	Build       *composeBuild    `yaml:"build"`
	Command     stringList       `yaml:"command"`
	Environment composeEnv       `yaml:"environment"`
	Ports       []string         `yaml:"ports"`
	Expose      []string         `yaml:"expose"`
	Volumes     []string         `yaml:"volumes"`
	DependsOn   composeDependsOn `yaml:"depends_on"`
	Healthcheck *composeHealth   `yaml:"healthcheck"`
	Profiles    []string         `yaml:"profiles"`
	Hostname    string           `yaml:"hostname"`
}

type composeBuild struct {
	Context    string            `yaml:"context"`
	Dockerfile string            `yaml:"dockerfile"`
	Target     string            `yaml:"target"`
	Args       map[string]string `yaml:"args"`
}

type composeHealth struct {
	Test stringList `yaml:"test"`
}

// stringList is a command: a list, or a string split on spaces.
type stringList []string

func (s *stringList) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode {
		*s = strings.Fields(n.Value)
		return nil
	}
	var l []string
	if err := n.Decode(&l); err != nil {
		return err
	}
	*s = l
	return nil
}

// composeEnv is an environment: a map, or a list of KEY=VALUE. A key with
// no value (passed through from the shell) maps to nil.
type composeEnv map[string]*string

func (e *composeEnv) UnmarshalYAML(n *yaml.Node) error {
	out := composeEnv{}
	if n.Kind == yaml.SequenceNode {
		var l []string
		if err := n.Decode(&l); err != nil {
			return err
		}
		for _, kv := range l {
			k, v, ok := strings.Cut(kv, "=")
			if ok {
				out[k] = &v
			} else {
				out[k] = nil
			}
		}
		*e = out
		return nil
	}
	var m map[string]any
	if err := n.Decode(&m); err != nil {
		return err
	}
	for k, v := range m {
		if v == nil {
			out[k] = nil
			continue
		}
		s := fmt.Sprint(v)
		out[k] = &s
	}
	*e = out
	return nil
}

// composeDependsOn maps a dependency to its condition; the list form means
// service_started.
type composeDependsOn map[string]string

func (d *composeDependsOn) UnmarshalYAML(n *yaml.Node) error {
	out := composeDependsOn{}
	if n.Kind == yaml.SequenceNode {
		var l []string
		if err := n.Decode(&l); err != nil {
			return err
		}
		for _, s := range l {
			out[s] = "service_started"
		}
		*d = out
		return nil
	}
	var m map[string]struct {
		Condition string `yaml:"condition"`
	}
	if err := n.Decode(&m); err != nil {
		return err
	}
	for k, v := range m {
		out[k] = orDefault(v.Condition, "service_started")
	}
	*d = out
	return nil
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

func readCompose(t *testing.T, root string, files ...string) *composeFile {
	t.Helper()
	var merged *composeFile
	for _, f := range files {
		b, err := os.ReadFile(filepath.Join(root, f))
		require.NoError(t, err)
		var c composeFile
		require.NoError(t, yaml.Unmarshal(b, &c), "parse %s", f)
		if merged == nil {
			merged = &c
			continue
		}
		mergeCompose(merged, &c)
	}
	return merged
}

// mergeCompose applies an override file as docker compose does for the
// fields these tests read: maps merge by key, lists append, scalars replace.
func mergeCompose(base, over *composeFile) {
	for name, o := range over.Services {
		b := base.Services[name]
		if b == nil {
			base.Services[name] = o
			continue
		}
		if o.Image != "" {
			b.Image = o.Image
		}
		if o.Build != nil {
			b.Build = o.Build
		}
		if o.Command != nil {
			b.Command = o.Command
		}
		if o.Hostname != "" {
			b.Hostname = o.Hostname
		}
		if o.Healthcheck != nil {
			b.Healthcheck = o.Healthcheck
		}
		if o.Profiles != nil {
			b.Profiles = o.Profiles
		}
		for k, v := range o.Environment {
			if b.Environment == nil {
				b.Environment = composeEnv{}
			}
			b.Environment[k] = v
		}
		for k, v := range o.DependsOn {
			if b.DependsOn == nil {
				b.DependsOn = composeDependsOn{}
			}
			b.DependsOn[k] = v
		}
		b.Ports = append(b.Ports, o.Ports...)
		b.Expose = append(b.Expose, o.Expose...)
		b.Volumes = append(b.Volumes, o.Volumes...)
	}
	for k, v := range over.Volumes {
		if base.Volumes == nil {
			base.Volumes = map[string]any{}
		}
		base.Volumes[k] = v
	}
}

var interpRE = regexp.MustCompile(`\$(?:(\$)|\{([A-Za-z_][A-Za-z0-9_]*)(?:(:?[-?+])([^}]*))?\}|([A-Za-z_][A-Za-z0-9_]*))`)

// interpolate expands ${…} as docker compose does when the shell sets none
// of the variables. It reports whether the value depends on the shell, and
// fails on ${VAR?…}, which compose refuses to start without.
func interpolate(s string) (string, bool, error) {
	var shell bool
	var err error
	out := interpRE.ReplaceAllStringFunc(s, func(m string) string {
		g := interpRE.FindStringSubmatch(m)
		if g[1] == "$" {
			return "$"
		}
		shell = true
		name, op, arg := g[2]+g[5], g[3], g[4]
		switch op {
		case "-", ":-":
			return arg
		case "?", ":?":
			err = fmt.Errorf("%s needs %s from the shell (%s)", s, name, arg)
		}
		return "" // ${VAR}, $VAR, ${VAR:+alt} with VAR unset
	})
	if strings.Contains(out, "${") {
		return "", false, fmt.Errorf("%q: nested or malformed ${…}", s)
	}
	return out, shell, err
}

// composeEnvOf returns the service's environment: the image's ENV, then
// the compose file's, interpolated with an empty shell.
func composeEnvOf(t *testing.T, file string, s *composeService, image envSet) envSet {
	t.Helper()
	env := envSet{}
	for k, v := range image {
		env[k] = v
	}
	for k, v := range s.Environment {
		if v == nil {
			env[k] = envValue{from: file + " (from the shell)", shell: true, known: true}
			continue
		}
		val, shell, err := interpolate(*v)
		require.NoError(t, err, "%s: %s", file, k)
		env[k] = envValue{value: val, known: true, shell: shell, from: file}
	}
	return env
}

// composeContainerPorts returns the container side of the service's ports.
func composeContainerPorts(t *testing.T, s *composeService) []int {
	t.Helper()
	var out []int
	for _, p := range append(slices.Clone(s.Ports), s.Expose...) {
		p, _, err := interpolate(p)
		require.NoError(t, err)
		p, _, _ = strings.Cut(p, "/")
		parts := strings.Split(p, ":")
		n, err := strconv.Atoi(parts[len(parts)-1])
		require.NoError(t, err, "compose port %q", p)
		out = append(out, n)
	}
	return out
}

// composeRole says which binary a compose service runs, from its build
// arguments and command. Services that run no prloop binary get "".
func composeRole(t *testing.T, name string, s *composeService) string {
	t.Helper()
	if s.Build == nil {
		require.False(t, strings.HasPrefix(s.Image, "prloop"), "compose service %s: a prloop image without build:", name)
		return ""
	}
	svc := s.Build.Args["SERVICE"]
	switch svc {
	case poller.Name, feedback.Name, merger.Name, escalator.Name:
		assert.Empty(t, s.Command, "compose service %s: the %s image runs the service itself; a command would be its arguments", name, svc)
		return svc
	case "prloop":
		require.NotEmpty(t, s.Command, "compose service %s: the prloop binary needs a command", name)
		switch s.Command[0] {
		case "run":
			return roleAllInOne
		case "ghsim":
			return roleSim
		}
	}
	require.Failf(t, "unknown compose service", "%s: build arg SERVICE=%q command %q: teach deploy_test.go what it runs", name, svc, s.Command)
	return ""
}

// ---- Kubernetes ----

type k8sMeta struct {
	Name        string            `yaml:"name"`
	Namespace   string            `yaml:"namespace"`
	Labels      map[string]string `yaml:"labels"`
	Annotations map[string]string `yaml:"annotations"`
}

type k8sObject struct {
	APIVersion string            `yaml:"apiVersion"`
	Kind       string            `yaml:"kind"`
	Metadata   k8sMeta           `yaml:"metadata"`
	Data       map[string]string `yaml:"data"`
	Spec       yaml.Node         `yaml:"spec"`
	file       string
}

type workloadSpec struct {
	Replicas    *int   `yaml:"replicas"`
	ServiceName string `yaml:"serviceName"`
	Selector    struct {
		MatchLabels map[string]string `yaml:"matchLabels"`
	} `yaml:"selector"`
	Template struct {
		Metadata k8sMeta `yaml:"metadata"`
		Spec     podSpec `yaml:"spec"`
	} `yaml:"template"`
	VolumeClaimTemplates []struct {
		Metadata k8sMeta `yaml:"metadata"`
		Spec     struct {
			AccessModes []string `yaml:"accessModes"`
			Resources   struct {
				Requests map[string]string `yaml:"requests"`
			} `yaml:"resources"`
		} `yaml:"spec"`
	} `yaml:"volumeClaimTemplates"`
}

type podSpec struct {
	AutomountServiceAccountToken  *bool  `yaml:"automountServiceAccountToken"`
	TerminationGracePeriodSeconds *int64 `yaml:"terminationGracePeriodSeconds"`
	SecurityContext               struct {
		RunAsNonRoot   *bool  `yaml:"runAsNonRoot"`
		RunAsUser      *int64 `yaml:"runAsUser"`
		SeccompProfile struct {
			Type string `yaml:"type"`
		} `yaml:"seccompProfile"`
	} `yaml:"securityContext"`
	Containers []k8sContainer `yaml:"containers"`
	Volumes    []struct {
		Name     string `yaml:"name"`
		EmptyDir *struct {
			SizeLimit string `yaml:"sizeLimit"`
		} `yaml:"emptyDir"`
		ConfigMap *struct {
			Name string `yaml:"name"`
		} `yaml:"configMap"`
		Secret *struct {
			SecretName string `yaml:"secretName"`
			Optional   bool   `yaml:"optional"`
		} `yaml:"secret"`
	} `yaml:"volumes"`
}

type k8sContainer struct {
	Name    string   `yaml:"name"`
	Image   string   `yaml:"image"`
	Command []string `yaml:"command"`
	Args    []string `yaml:"args"`
	Ports   []struct {
		Name          string `yaml:"name"`
		ContainerPort int    `yaml:"containerPort"`
	} `yaml:"ports"`
	Env     []k8sEnvVar `yaml:"env"`
	EnvFrom []struct {
		ConfigMapRef *struct {
			Name string `yaml:"name"`
		} `yaml:"configMapRef"`
		SecretRef *struct {
			Name string `yaml:"name"`
		} `yaml:"secretRef"`
		Prefix string `yaml:"prefix"`
	} `yaml:"envFrom"`
	Resources struct {
		Requests map[string]string `yaml:"requests"`
		Limits   map[string]string `yaml:"limits"`
	} `yaml:"resources"`
	StartupProbe    *k8sProbe `yaml:"startupProbe"`
	LivenessProbe   *k8sProbe `yaml:"livenessProbe"`
	ReadinessProbe  *k8sProbe `yaml:"readinessProbe"`
	SecurityContext struct {
		AllowPrivilegeEscalation *bool `yaml:"allowPrivilegeEscalation"`
		ReadOnlyRootFilesystem   *bool `yaml:"readOnlyRootFilesystem"`
		RunAsNonRoot             *bool `yaml:"runAsNonRoot"`
		Capabilities             struct {
			Drop []string `yaml:"drop"`
		} `yaml:"capabilities"`
	} `yaml:"securityContext"`
	VolumeMounts []struct {
		Name      string `yaml:"name"`
		MountPath string `yaml:"mountPath"`
		ReadOnly  bool   `yaml:"readOnly"`
	} `yaml:"volumeMounts"`
}

type k8sEnvVar struct {
	Name      string `yaml:"name"`
	Value     string `yaml:"value"`
	ValueFrom *struct {
		SecretKeyRef *struct {
			Name     string `yaml:"name"`
			Key      string `yaml:"key"`
			Optional bool   `yaml:"optional"`
		} `yaml:"secretKeyRef"`
		ConfigMapKeyRef *struct {
			Name string `yaml:"name"`
			Key  string `yaml:"key"`
		} `yaml:"configMapKeyRef"`
		FieldRef *struct {
			FieldPath string `yaml:"fieldPath"`
		} `yaml:"fieldRef"`
		ResourceFieldRef *struct {
			Resource string `yaml:"resource"`
		} `yaml:"resourceFieldRef"`
	} `yaml:"valueFrom"`
}

type k8sProbe struct {
	HTTPGet *struct {
		Path string      `yaml:"path"`
		Port intOrString `yaml:"port"`
	} `yaml:"httpGet"`
}

type serviceSpec struct {
	Type                     string            `yaml:"type"`
	ClusterIP                string            `yaml:"clusterIP"`
	PublishNotReadyAddresses bool              `yaml:"publishNotReadyAddresses"`
	Selector                 map[string]string `yaml:"selector"`
	Ports                    []struct {
		Name       string      `yaml:"name"`
		Port       int         `yaml:"port"`
		TargetPort intOrString `yaml:"targetPort"`
	} `yaml:"ports"`
}

// intOrString is a port given by number or by name.
type intOrString string

func (p *intOrString) UnmarshalYAML(n *yaml.Node) error {
	*p = intOrString(n.Value)
	return nil
}

// resolve returns the port number, looking a name up among the
// container's ports.
func (p intOrString) resolve(c k8sContainer) (int, error) {
	if n, err := strconv.Atoi(string(p)); err == nil {
		return n, nil
	}
	for _, cp := range c.Ports {
		if cp.Name == string(p) {
			return cp.ContainerPort, nil
		}
	}
	return 0, fmt.Errorf("container %s has no port named %q", c.Name, p)
}

// k8sWorkload is a Deployment or StatefulSet.
type k8sWorkload struct {
	obj  k8sObject
	spec workloadSpec
}

func (w k8sWorkload) where() string {
	return fmt.Sprintf("%s: %s %s", w.obj.file, w.obj.Kind, w.obj.Metadata.Name)
}

type k8sService struct {
	obj  k8sObject
	spec serviceSpec
}

// k8sBase is the Kustomize base, read as kustomize would assemble it.
type k8sBase struct {
	kustomization struct {
		Namespace string   `yaml:"namespace"`
		Resources []string `yaml:"resources"`
		Images    []struct {
			Name    string `yaml:"name"`
			NewName string `yaml:"newName"`
			NewTag  string `yaml:"newTag"`
		} `yaml:"images"`
	}
	objects      []k8sObject
	configMaps   map[string]k8sObject
	deployments  []k8sWorkload
	statefulSets []k8sWorkload
	services     []k8sService
}

func readK8s(t *testing.T, root string) *k8sBase {
	t.Helper()
	dir := filepath.Join(root, k8sDir)
	b := &k8sBase{configMaps: map[string]k8sObject{}}
	raw, err := os.ReadFile(filepath.Join(dir, "kustomization.yaml"))
	require.NoError(t, err)
	require.NoError(t, yaml.Unmarshal(raw, &b.kustomization), "parse kustomization.yaml")
	for _, res := range b.kustomization.Resources {
		f, err := os.Open(filepath.Join(dir, res))
		require.NoError(t, err, "kustomization.yaml lists %s", res)
		dec := yaml.NewDecoder(f)
		for {
			var obj k8sObject
			err := dec.Decode(&obj)
			if errors.Is(err, io.EOF) {
				break
			}
			require.NoError(t, err, "parse %s", res)
			if obj.Kind == "" {
				continue // an empty document
			}
			obj.file = path.Join(k8sDir, res)
			b.objects = append(b.objects, obj)
			switch obj.Kind {
			case "ConfigMap":
				require.NotContains(t, b.configMaps, obj.Metadata.Name, "two ConfigMaps named %s", obj.Metadata.Name)
				b.configMaps[obj.Metadata.Name] = obj
			case "Deployment", "StatefulSet":
				w := k8sWorkload{obj: obj}
				require.NoError(t, obj.Spec.Decode(&w.spec), "%s: %s %s", obj.file, obj.Kind, obj.Metadata.Name)
				if obj.Kind == "Deployment" {
					b.deployments = append(b.deployments, w)
				} else {
					b.statefulSets = append(b.statefulSets, w)
				}
			case "Service":
				s := k8sService{obj: obj}
				require.NoError(t, obj.Spec.Decode(&s.spec), "%s: Service %s", obj.file, obj.Metadata.Name)
				b.services = append(b.services, s)
			}
		}
		require.NoError(t, f.Close())
	}
	return b
}

// k8sEnvOf returns the container's environment: the image's ENV, the
// ConfigMaps of envFrom in order, then env.
func (b *k8sBase) k8sEnvOf(t *testing.T, where string, c k8sContainer, image envSet) envSet {
	t.Helper()
	env := envSet{}
	for k, v := range image {
		env[k] = v
	}
	for _, ef := range c.EnvFrom {
		require.Nil(t, ef.SecretRef, "%s: envFrom a Secret hides which variables it sets; use env with secretKeyRef", where)
		require.Empty(t, ef.Prefix, "%s: envFrom prefix", where)
		require.NotNil(t, ef.ConfigMapRef, "%s: envFrom without configMapRef", where)
		cm, ok := b.configMaps[ef.ConfigMapRef.Name]
		require.True(t, ok, "%s: envFrom ConfigMap %s is not in the base", where, ef.ConfigMapRef.Name)
		for k, v := range cm.Data {
			env[k] = envValue{value: v, known: true, from: "ConfigMap " + cm.Metadata.Name + " (" + cm.file + ")"}
		}
	}
	for _, e := range c.Env {
		switch {
		case e.ValueFrom == nil:
			env[e.Name] = envValue{value: e.Value, known: true, from: where}
		case e.ValueFrom.SecretKeyRef != nil:
			r := e.ValueFrom.SecretKeyRef
			env[e.Name] = envValue{secretRef: true, from: fmt.Sprintf("Secret %s key %s", r.Name, r.Key)}
		case e.ValueFrom.ConfigMapKeyRef != nil:
			r := e.ValueFrom.ConfigMapKeyRef
			cm, ok := b.configMaps[r.Name]
			require.True(t, ok, "%s: %s from ConfigMap %s, which is not in the base", where, e.Name, r.Name)
			v, ok := cm.Data[r.Key]
			require.True(t, ok, "%s: %s from ConfigMap %s key %s, which it lacks", where, e.Name, r.Name, r.Key)
			env[e.Name] = envValue{value: v, known: true, from: "ConfigMap " + r.Name}
		default:
			env[e.Name] = envValue{from: where + " (pod field)"}
		}
	}
	return env
}

// ---- Dockerfile ----

type dockerInstr struct {
	cmd, args string
}

type dockerStage struct {
	name, base string
	instrs     []dockerInstr
	env        map[string]string
	args       map[string]string
	user       string
	expose     []string
	entrypoint string
}

type dockerfile struct {
	globalArgs map[string]string
	stages     []*dockerStage
}

func (d *dockerfile) stage(name string) *dockerStage {
	for _, s := range d.stages {
		if s.name == name {
			return s
		}
	}
	return nil
}

// readDockerfile parses the Dockerfile's instructions: continuation lines
// joined, comments dropped, FROM starting a stage.
func readDockerfile(t *testing.T, root string) *dockerfile {
	t.Helper()
	f, err := os.Open(filepath.Join(root, dockerfilePath))
	require.NoError(t, err)
	defer f.Close()
	d := &dockerfile{globalArgs: map[string]string{}}
	var cur *dockerStage
	var pending strings.Builder
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(line, "#") || (line == "" && pending.Len() == 0) {
			continue
		}
		if rest, ok := strings.CutSuffix(line, "\\"); ok {
			pending.WriteString(rest + " ")
			continue
		}
		pending.WriteString(line)
		full := pending.String()
		pending.Reset()
		cmd, args, _ := strings.Cut(full, " ")
		cmd, args = strings.ToUpper(cmd), strings.TrimSpace(args)
		if cmd == "FROM" {
			fields := strings.Fields(args)
			cur = &dockerStage{base: expandArgs(fields[0], d.globalArgs), env: map[string]string{}, args: map[string]string{}}
			if len(fields) == 3 && strings.EqualFold(fields[1], "AS") {
				cur.name = fields[2]
			}
			d.stages = append(d.stages, cur)
			continue
		}
		if cur == nil {
			require.Equal(t, "ARG", cmd, "Dockerfile: only ARG may come before the first FROM")
			k, v, _ := strings.Cut(args, "=")
			d.globalArgs[k] = v
			continue
		}
		cur.instrs = append(cur.instrs, dockerInstr{cmd: cmd, args: args})
		switch cmd {
		case "ARG":
			k, v, _ := strings.Cut(args, "=")
			cur.args[k] = v
		case "ENV":
			for _, kv := range strings.Fields(args) {
				k, v, ok := strings.Cut(kv, "=")
				require.True(t, ok, "Dockerfile: write ENV as KEY=VALUE: %s", full)
				cur.env[k] = strings.Trim(v, `"`)
			}
		case "USER":
			cur.user = args
		case "EXPOSE":
			cur.expose = append(cur.expose, strings.Fields(args)...)
		case "ENTRYPOINT":
			cur.entrypoint = args
		}
	}
	require.NoError(t, sc.Err())
	return d
}

func expandArgs(s string, args map[string]string) string {
	return os.Expand(s, func(k string) string { return args[k] })
}

// imageEnv returns the ENV of a runtime stage as the container sees it.
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
	n, err := strconv.ParseInt(u, 10, 64)
	if err != nil {
		return -1
	}
	return n
}

// runs reports whether the stage has a RUN containing sub.
func (s *dockerStage) runs(sub string) bool {
	for _, in := range s.instrs {
		if in.cmd == "RUN" && strings.Contains(in.args, sub) {
			return true
		}
	}
	return false
}

// ---- helpers ----

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// imageRepo strips the tag from an image reference.
func imageRepo(image string) string {
	if i := strings.LastIndex(image, ":"); i > strings.LastIndex(image, "/") {
		return image[:i]
	}
	return image
}

// parseQuantity reads a Kubernetes size such as 10Gi or 512Mi.
func parseQuantity(q string) (int64, error) {
	units := []struct {
		suffix string
		mult   int64
	}{{"Ki", 1 << 10}, {"Mi", 1 << 20}, {"Gi", 1 << 30}, {"Ti", 1 << 40}, {"", 1}}
	for _, u := range units {
		if num, ok := strings.CutSuffix(q, u.suffix); ok {
			n, err := strconv.ParseInt(num, 10, 64)
			if err != nil {
				return 0, fmt.Errorf("quantity %q: want a whole number with Ki, Mi, Gi or Ti", q)
			}
			return n * u.mult, nil
		}
	}
	return 0, fmt.Errorf("quantity %q", q)
}

// labelsMatch reports whether every selector label is on the pod.
func labelsMatch(selector, labels map[string]string) bool {
	if len(selector) == 0 {
		return false
	}
	for k, v := range selector {
		if labels[k] != v {
			return false
		}
	}
	return true
}

// mountFor returns the volume mounted at dir or at a parent of it.
func mountFor(c k8sContainer, dir string) (name, mountPath string, ok bool) {
	best := ""
	for _, m := range c.VolumeMounts {
		if (dir == m.MountPath || strings.HasPrefix(dir, strings.TrimSuffix(m.MountPath, "/")+"/")) && len(m.MountPath) > len(best) {
			name, mountPath, best, ok = m.Name, m.MountPath, m.MountPath, true
		}
	}
	return name, mountPath, ok
}

// natsOptions parses a NATS server configuration with the server's own
// parser. vars replaces $NAME references the server would take from its
// environment.
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
	return opts
}

// configFlag returns the value of --config or -c in a command line.
func configFlag(args []string) string {
	for i, a := range args {
		if (a == "--config" || a == "-c" || a == "-config") && i+1 < len(args) {
			return args[i+1]
		}
		if v, ok := strings.CutPrefix(a, "--config="); ok {
			return v
		}
	}
	return ""
}

// sign returns GitHub's X-Hub-Signature-256 for body.
func sign(secret, body string) string {
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte(body))
	return "sha256=" + hex.EncodeToString(mac.Sum(nil))
}

// merged returns the environment a container starts with: the image's ENV
// overridden by the file's.
func merged(image, env envSet) envSet {
	out := envSet{}
	for k, v := range image {
		out[k] = v
	}
	for k, v := range env {
		out[k] = v
	}
	return out
}

// goMemLimit parses GOMEMLIMIT (a number of bytes with an optional B, KiB,
// MiB, GiB or TiB suffix).
func goMemLimit(s string) (int64, error) {
	for _, u := range []struct {
		suffix string
		mult   int64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40}, {"B", 1}, {"", 1}} {
		if num, ok := strings.CutSuffix(s, u.suffix); ok {
			n, err := strconv.ParseInt(num, 10, 64)
			if err != nil {
				return 0, fmt.Errorf("GOMEMLIMIT=%q: %w", s, err)
			}
			return n * u.mult, nil
		}
	}
	return 0, fmt.Errorf("GOMEMLIMIT=%q", s)
}

// rolesNeedingGit run git (and sh): the feedback service clones, commits,
// pushes and runs the agent; the merger fetches to verify its branch
// updates; the simulator keeps real git repositories.
var rolesNeedingGit = []string{feedback.Name, merger.Name, roleSim, roleAllInOne}

// ---- tests ----

type deployTestConfig struct {
	config.Common
	// Need is required.
	Need string `envconfig:"PRLOOP_TEST_NEED" required:"true"`
	// Token is a credential.
	Token github.Secret `envconfig:"PRLOOP_TEST_TOKEN"`
	// Skip is not configuration.
	Skip string `ignored:"true"`
}

type deployTestUntagged struct {
	config.Common
	Bare string
}

// TestDeployEnvCheck_ReportsUnknownMissingAndPlainTextCredentials shows the
// check the deployment tests rely on fails where it should.
func TestDeployEnvCheck_ReportsUnknownMissingAndPlainTextCredentials(t *testing.T) {
	t.Parallel()
	role := deployRole{name: "testsvc", configs: []any{deployTestConfig{}}, other: tokenVars}
	lit := func(v string) envValue { return envValue{value: v, known: true, from: "test.yml"} }
	need := lit("x")
	tests := []struct {
		name   string
		env    envSet
		image  envSet
		public []string
		want   []string
	}{
		{name: "complete", env: envSet{"PRLOOP_TEST_NEED": need, "PRLOOP_LOG_LEVEL": lit("debug"), "GITHUB_TOKEN": {secretRef: true, from: "Secret s key k"}}},
		{name: "unknown PRLOOP variable", env: envSet{"PRLOOP_TEST_NEED": need, "PRLOOP_NOPE": lit("1")},
			want: []string{"x.yml: service testsvc: PRLOOP_NOPE (set in test.yml) is not a setting of testsvc"}},
		{name: "ignored field is no variable", env: envSet{"PRLOOP_TEST_NEED": need, "SKIP": lit("1")},
			want: []string{"SKIP (set in test.yml) is not read by testsvc"}},
		{name: "other variable not on the list", env: envSet{"PRLOOP_TEST_NEED": need, "HOME": lit("/root")},
			want: []string{"HOME (set in test.yml) is not read by testsvc"}},
		{name: "required missing", env: envSet{},
			want: []string{"PRLOOP_TEST_NEED is required by testsvc (main.deployTestConfig.Need) but not set"}},
		{name: "required empty", env: envSet{"PRLOOP_TEST_NEED": lit("")},
			want: []string{"PRLOOP_TEST_NEED is required by testsvc"}},
		{name: "required from a Secret", env: envSet{"PRLOOP_TEST_NEED": {secretRef: true, from: "Secret s key k"}}},
		{name: "required from the image", env: envSet{}, image: envSet{"PRLOOP_TEST_NEED": need}},
		{name: "image variables are not name-checked here", env: envSet{"PRLOOP_TEST_NEED": need}, image: envSet{"HOME": lit("/home/x")}},
		{name: "credential field in plain text", env: envSet{"PRLOOP_TEST_NEED": need, "PRLOOP_TEST_TOKEN": lit("hunter2hunter2")},
			want: []string{"PRLOOP_TEST_TOKEN is a credential written in plain text in test.yml"}},
		{name: "token in plain text", env: envSet{"PRLOOP_TEST_NEED": need, "GITHUB_TOKEN": lit("ghp_0123456789")},
			want: []string{"GITHUB_TOKEN is a credential written in plain text"}},
		{name: "token from the shell", env: envSet{"PRLOOP_TEST_NEED": need, "GITHUB_TOKEN": {known: true, shell: true, from: "c.yml"}}},
		{name: "published demo token", env: envSet{"PRLOOP_TEST_NEED": need, "GITHUB_TOKEN": lit("demo-token")}, public: []string{"demo-token"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := envCheck{where: "x.yml: service testsvc", role: role, env: tt.env, image: tt.image, public: tt.public}.problems()
			require.Len(t, got, len(tt.want), "%q", got)
			for i, w := range tt.want {
				assert.Contains(t, got[i], w)
			}
		})
	}

	t.Run("untagged field", func(t *testing.T) {
		t.Parallel()
		_, probs := configVars(deployTestUntagged{})
		require.Len(t, probs, 1)
		assert.Contains(t, probs[0], "main.deployTestUntagged.Bare has no envconfig tag")
	})
	t.Run("embedded structs of the real configs", func(t *testing.T) {
		t.Parallel()
		vars, probs := configVars(poller.Config{})
		assert.Empty(t, probs)
		for _, name := range []string{"PRLOOP_NATS_URL", "PRLOOP_HTTP_ADDR", "PRLOOP_GITHUB_API_URL", "PRLOOP_GITHUB_APP_ID", "PRLOOP_REVIEW_PROTOCOLS", "PRLOOP_REPOS"} {
			assert.Contains(t, vars, name)
		}
		assert.True(t, vars["PRLOOP_WEBHOOK_SECRET"].secret)
		assert.False(t, vars["PRLOOP_REPOS"].secret)
		assert.NotContains(t, vars, "PRLOOP_MERGE_METHOD", "a merger setting")
	})
	t.Run("interpolation", func(t *testing.T) {
		t.Parallel()
		for _, tc := range []struct {
			in, want string
			shell    bool
		}{
			{"plain", "plain", false},
			{"$$PRLOOP_PR", "$PRLOOP_PR", false},
			{"${GITHUB_TOKEN:-}", "", true},
			{"${PRLOOP_POLL_INTERVAL:-30s}", "30s", true},
			{"${A-x}/${B}/$C", "x//", true},
			{"${A:+set}", "", true},
		} {
			got, shell, err := interpolate(tc.in)
			require.NoError(t, err, tc.in)
			assert.Equal(t, tc.want, got, tc.in)
			assert.Equal(t, tc.shell, shell, tc.in)
		}
		_, _, err := interpolate("${GITHUB_TOKEN:?set it}")
		assert.Error(t, err)
	})
}

// composeCase is one prloop service of a compose configuration.
type composeCase struct {
	file, name string
	svc        *composeService
	role       deployRole
	stage      *dockerStage
}

// composeCases reads a compose configuration and returns its prloop
// services, with the Dockerfile stage each one builds.
func composeCases(t *testing.T, root string, df *dockerfile, files ...string) (*composeFile, []composeCase) {
	t.Helper()
	c := readCompose(t, root, files...)
	roles := deployRoles()
	var out []composeCase
	for _, name := range sortedKeys(c.Services) {
		s := c.Services[name]
		role := composeRole(t, name, s)
		if role == "" {
			continue
		}
		where := strings.Join(files, " + ")
		require.NotNil(t, s.Build, "%s: service %s", where, name)
		assert.Equal(t, ".", s.Build.Context, "%s: service %s builds from the repository root", where, name)
		assert.Contains(t, []string{"", dockerfilePath}, s.Build.Dockerfile, "%s: service %s", where, name)
		require.NotEmpty(t, s.Build.Target, "%s: service %s: name the Dockerfile target (static or git); the default is the last stage", where, name)
		stage := df.stage(s.Build.Target)
		require.NotNil(t, stage, "%s: service %s builds target %q, which the Dockerfile lacks", where, name, s.Build.Target)
		out = append(out, composeCase{file: where, name: name, svc: s, role: roles[role], stage: stage})
	}
	return c, out
}

// runComposeGHSim runs the simulator with the command line the compose
// file gives it (on a free port) and returns what it prints: its URL and
// the demo's repository and tokens.
func runComposeGHSim(t *testing.T, args []string) string {
	t.Helper()
	args = slices.Clone(args)
	for i := range args {
		if i+1 >= len(args) {
			break
		}
		switch args[i] {
		case "-addr":
			args[i+1] = "127.0.0.1:0"
		case "-dir":
			args[i+1] = t.TempDir() // a container path (/ghsim) on this machine would collide between runs
		}
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var stdout, stderr proctest.Buffer
	done := make(chan error, 1)
	go func() { done <- run(ctx, args, &stdout, &stderr) }()
	var exited bool
	var runErr error
	require.Eventually(t, func() bool {
		select {
		case runErr = <-done:
			exited = true
			return true
		default:
			return strings.Contains(stdout.String(), ghsim.DemoPrloop)
		}
	}, 30*time.Second, 20*time.Millisecond, "prloop %s printed no tokens", strings.Join(args, " "))
	require.False(t, exited, "prloop %s stopped: %v\n%s", strings.Join(args, " "), runErr, stderr.String())
	cancel()
	require.NoError(t, <-done)
	return stdout.String()
}

// TestDeployCompose_VariablesPortsAndNATS checks docker-compose.yml, alone
// and with docker-compose.demo.yml: every service's variables against its
// Config, its port against PRLOOP_HTTP_ADDR, its image, and the NATS it
// depends on.
func TestDeployCompose_VariablesPortsAndNATS(t *testing.T) {
	t.Parallel()
	root := proctest.Root(t)
	df := readDockerfile(t, root)
	for _, files := range [][]string{{composePath}, {composePath, composeDemoPath}} {
		t.Run(strings.Join(files, "+"), func(t *testing.T) {
			t.Parallel()
			demo := len(files) > 1
			c, cases := composeCases(t, root, df, files...)
			where := strings.Join(files, " + ")

			// NATS: JetStream, fsync always, data on a volume, healthy
			// only when JetStream is up.
			nc := c.Services["nats"]
			require.NotNil(t, nc, "%s: no service nats", where)
			confPath := configFlag(nc.Command)
			require.NotEmpty(t, confPath, "%s: nats: start nats-server with --config", where)
			var confSrc string
			var natsVolumes []string
			for _, v := range nc.Volumes {
				parts := strings.Split(v, ":")
				require.GreaterOrEqual(t, len(parts), 2, "%s: nats volume %q", where, v)
				if parts[1] == confPath {
					confSrc = parts[0]
				}
				if _, named := c.Volumes[parts[0]]; named {
					natsVolumes = append(natsVolumes, parts[1])
				}
			}
			require.NotEmpty(t, confSrc, "%s: nats: no volume mounts %s", where, confPath)
			confText, err := os.ReadFile(filepath.Join(root, confSrc))
			require.NoError(t, err)
			opts := natsOptions(t, string(confText), nil)
			assert.True(t, opts.JetStream, "%s: JetStream is off", confSrc)
			assert.True(t, opts.SyncAlways, "%s: want sync_interval: always in jetstream {}", confSrc)
			assert.Truef(t, slices.ContainsFunc(natsVolumes, func(m string) bool {
				return opts.StoreDir == m || strings.HasPrefix(opts.StoreDir, m+"/")
			}), "%s: store_dir %s is not on a named volume (%v)", confSrc, opts.StoreDir, natsVolumes)
			require.NotNil(t, nc.Healthcheck, "%s: nats has no healthcheck; the services wait for service_healthy", where)
			assert.Contains(t, strings.Join(nc.Healthcheck.Test, " "), fmt.Sprintf("localhost:%d/healthz", opts.HTTPPort),
				"%s: the nats healthcheck must ask the monitoring port of %s", where, confSrc)
			assert.Contains(t, composeContainerPorts(t, nc), opts.Port, "%s: publish the client port for nats sub", where)

			var tokens, demoRepo string
			var sim *composeService
			var simAddr string
			for name, s := range c.Services {
				if s.Build != nil && s.Build.Args["SERVICE"] == "prloop" && len(s.Command) > 0 && s.Command[0] == "ghsim" {
					require.Nil(t, sim, "%s: two simulators", where)
					sim = s
					assert.Contains(t, s.Profiles, "demo", "%s: %s runs only with --profile demo", where, name)
					for i, a := range s.Command {
						if a == "-addr" && i+1 < len(s.Command) {
							simAddr = s.Command[i+1]
						}
					}
					host, port, err := net.SplitHostPort(simAddr)
					require.NoError(t, err, "%s: %s -addr", where, name)
					// The simulator writes its listen address into
					// clone_url and Link headers; other containers must
					// reach it there.
					assert.Contains(t, []string{name, s.Hostname}, host, "%s: %s: -addr %s: listen on the service's name, which the other containers resolve", where, name, simAddr)
					p, _ := strconv.Atoi(port)
					assert.Contains(t, composeContainerPorts(t, s), p, "%s: %s", where, name)
					require.NotNil(t, s.Healthcheck, "%s: %s", where, name)
					assert.Contains(t, strings.Join(s.Healthcheck.Test, " "), "//"+simAddr+"/", "%s: %s healthcheck", where, name)
					if demo {
						tokens = runComposeGHSim(t, s.Command)
						m := regexp.MustCompile(`seeded (\S+) with PR`).FindStringSubmatch(tokens)
						require.NotNil(t, m, tokens)
						demoRepo = m[1]
					}
				}
			}
			require.NotNil(t, sim, "%s: no simulator service (prloop ghsim) for the demo profile", where)
			var public []string
			if demo {
				m := regexp.MustCompile(`(?m)^\s+` + regexp.QuoteMeta(ghsim.DemoPrloop) + `\s+(\S+)$`).FindStringSubmatch(tokens)
				require.NotNil(t, m, tokens)
				public = []string{m[1]}
			}

			seen := map[string]bool{}
			for _, tc := range cases {
				w := fmt.Sprintf("%s: service %s", where, tc.name)
				fileEnv := envSet{}
				all := composeEnvOf(t, where, tc.svc, nil)
				for k := range tc.svc.Environment {
					fileEnv[k] = all[k]
				}
				probs := envCheck{where: w, role: tc.role, env: fileEnv, image: tc.stage.imageEnv(), public: public}.problems()
				assert.Empty(t, probs, strings.Join(probs, "\n"))

				needsGit := slices.Contains(rolesNeedingGit, tc.role.name)
				if needsGit {
					assert.True(t, tc.stage.runs("git"), "%s: %s runs git; target %s has none", w, tc.role.name, tc.stage.name)
				} else {
					assert.Contains(t, tc.stage.base, "distroless/static", "%s: target %s", w, tc.stage.name)
				}
				if tc.role.name == roleSim {
					continue
				}
				seen[tc.role.name] = true
				env := merged(tc.stage.imageEnv(), all)

				port, err := httpPort(env)
				require.NoError(t, err, w)
				assert.Contains(t, composeContainerPorts(t, tc.svc), port, "%s: PRLOOP_HTTP_ADDR listens on %d; publish or expose that container port", w, port)
				assert.Contains(t, tc.stage.expose, strconv.Itoa(port), "%s: image target %s exposes %v", w, tc.stage.name, tc.stage.expose)

				assert.Equal(t, "service_healthy", tc.svc.DependsOn["nats"], "%s: depends_on nats condition service_healthy", w)
				u, err := url.Parse(env["PRLOOP_NATS_URL"].value)
				require.NoError(t, err, w)
				assert.Equal(t, "nats", u.Hostname(), "%s: PRLOOP_NATS_URL", w)
				assert.Equal(t, strconv.Itoa(opts.Port), u.Port(), "%s: PRLOOP_NATS_URL port vs %s", w, confSrc)
				assert.Equal(t, "1", env["PRLOOP_STREAM_REPLICAS"].value, "%s: one NATS server holds one replica", w)

				if dir := env["PRLOOP_WORKSPACE_DIR"].value; dir != "" {
					assert.Truef(t, slices.ContainsFunc(tc.svc.Volumes, func(v string) bool {
						parts := strings.Split(v, ":")
						return len(parts) >= 2 && parts[1] == dir
					}), "%s: PRLOOP_WORKSPACE_DIR=%s is not a volume", w, dir)
				}
				if demo {
					vars, _ := configVars(tc.role.configs...)
					api, err := url.Parse(env["PRLOOP_GITHUB_API_URL"].value)
					require.NoError(t, err, w)
					assert.Equal(t, "http://"+simAddr+"/", api.String(), "%s: PRLOOP_GITHUB_API_URL must reach the simulator", w)
					assert.Equal(t, public[0], env["GITHUB_TOKEN"].value, "%s: GITHUB_TOKEN must be the simulator's token for %s", w, ghsim.DemoPrloop)
					if _, ok := vars["PRLOOP_GITHUB_LOGIN"]; ok {
						assert.Equal(t, ghsim.DemoPrloop, env["PRLOOP_GITHUB_LOGIN"].value, w)
					}
					if tc.role.name == poller.Name {
						assert.Contains(t, strings.Split(env["PRLOOP_REPOS"].value, ","), demoRepo, w)
					}
					assert.Equal(t, "service_healthy", tc.svc.DependsOn["ghsim"], "%s: depends_on ghsim", w)
				}
			}
			for _, name := range []string{poller.Name, feedback.Name, merger.Name, escalator.Name} {
				assert.True(t, seen[name], "%s: no %s service", where, name)
			}
		})
	}
}

// k8sImages maps each image repository docker-compose.yml builds to its
// compose service, so a Deployment's image tells its Dockerfile target.
func k8sImages(t *testing.T, root string, df *dockerfile) map[string]composeCase {
	t.Helper()
	_, cases := composeCases(t, root, df, composePath)
	out := map[string]composeCase{}
	for _, tc := range cases {
		out[imageRepo(tc.svc.Image)] = tc
	}
	return out
}

// checkPodSecurity checks the restricted pod security settings; uid is the
// image's user, or -1 when the image does not say; claims are the
// StatefulSet's volumeClaimTemplates.
func checkPodSecurity(t *testing.T, where string, spec podSpec, uid int64, claims ...string) {
	t.Helper()
	sc := spec.SecurityContext
	assert.True(t, sc.RunAsNonRoot != nil && *sc.RunAsNonRoot, "%s: runAsNonRoot: true", where)
	require.NotNil(t, sc.RunAsUser, "%s: set runAsUser", where)
	assert.NotZero(t, *sc.RunAsUser, "%s: runAsUser 0 is root", where)
	if uid >= 0 {
		assert.Equal(t, uid, *sc.RunAsUser, "%s: runAsUser differs from the image's USER, which owns its directories", where)
	}
	assert.Equal(t, "RuntimeDefault", sc.SeccompProfile.Type, "%s: seccompProfile", where)
	assert.True(t, spec.AutomountServiceAccountToken != nil && !*spec.AutomountServiceAccountToken,
		"%s: automountServiceAccountToken: false; prloop does not use the Kubernetes API", where)
	volumes := map[string]bool{}
	for _, c := range claims {
		volumes[c] = true
	}
	for _, v := range spec.Volumes {
		volumes[v.Name] = true
	}
	for _, c := range spec.Containers {
		w := where + " container " + c.Name
		csc := c.SecurityContext
		assert.True(t, csc.AllowPrivilegeEscalation != nil && !*csc.AllowPrivilegeEscalation, "%s: allowPrivilegeEscalation: false", w)
		assert.True(t, csc.ReadOnlyRootFilesystem != nil && *csc.ReadOnlyRootFilesystem, "%s: readOnlyRootFilesystem: true", w)
		assert.Contains(t, csc.Capabilities.Drop, "ALL", "%s: capabilities drop ALL", w)
		for _, res := range []string{"cpu", "memory"} {
			assert.NotEmpty(t, c.Resources.Requests[res], "%s: resources.requests.%s", w, res)
			assert.NotEmpty(t, c.Resources.Limits[res], "%s: resources.limits.%s", w, res)
		}
		for _, m := range c.VolumeMounts {
			assert.True(t, volumes[m.Name], "%s: mounts volume %s, which the pod lacks", w, m.Name)
		}
	}
}

// writableDir checks that dir is on an emptyDir: the root file system is
// read-only.
func writableDir(t *testing.T, where string, spec podSpec, c k8sContainer, dir, why string) {
	t.Helper()
	name, _, ok := mountFor(c, dir)
	if !assert.True(t, ok, "%s: %s (%s) is on the read-only root file system; mount an emptyDir there", where, dir, why) {
		return
	}
	for _, v := range spec.Volumes {
		if v.Name == name {
			assert.NotNil(t, v.EmptyDir, "%s: %s (%s) is on volume %s, which is not an emptyDir", where, dir, why, name)
		}
	}
}

// TestDeployK8s_VariablesPortsSecurityAndNATS checks the Kustomize base:
// each Deployment's environment against its service's Config, its ports,
// probes and Prometheus annotations against PRLOOP_HTTP_ADDR, its security
// settings, the webhook Service, and the NATS cluster.
func TestDeployK8s_VariablesPortsSecurityAndNATS(t *testing.T) {
	t.Parallel()
	root := proctest.Root(t)
	roles := deployRoles()
	df := readDockerfile(t, root)
	b := readK8s(t, root)
	images := k8sImages(t, root, df)

	// kustomization.yaml lists every manifest, and the namespace exists.
	files, err := filepath.Glob(filepath.Join(root, k8sDir, "*.yaml"))
	require.NoError(t, err)
	var manifests []string
	for _, f := range files {
		if filepath.Base(f) != "kustomization.yaml" {
			manifests = append(manifests, filepath.Base(f))
		}
	}
	assert.ElementsMatch(t, manifests, b.kustomization.Resources, "kustomization.yaml resources vs the files in %s", k8sDir)
	require.NotEmpty(t, b.kustomization.Namespace, "kustomization.yaml: set namespace")
	assert.True(t, slices.ContainsFunc(b.objects, func(o k8sObject) bool {
		return o.Kind == "Namespace" && o.Metadata.Name == b.kustomization.Namespace
	}), "no Namespace %s", b.kustomization.Namespace)
	var kustImages []string
	for _, im := range b.kustomization.Images {
		kustImages = append(kustImages, im.Name)
	}

	require.Len(t, b.statefulSets, 1, "one NATS StatefulSet")
	sts := b.statefulSets[0]
	natsPods := sts.spec.Template.Metadata.Labels

	usedCMs := map[string]bool{}
	natsURLs := map[string]string{}
	seen := map[string]bool{}
	for _, d := range b.deployments {
		where := d.where()
		pod := d.spec.Template
		require.Len(t, pod.Spec.Containers, 1, where)
		c := pod.Spec.Containers[0]
		r, ok := roles[c.Name]
		require.True(t, ok && r.newConfig != nil && c.Name != roleAllInOne, "%s: container %s is not a prloop service", where, c.Name)
		seen[c.Name] = true
		assert.Equal(t, c.Name, d.obj.Metadata.Name, "%s: name the Deployment after its service", where)
		assert.True(t, labelsMatch(d.spec.Selector.MatchLabels, pod.Metadata.Labels), "%s: selector does not match the pod's labels", where)
		require.NotNil(t, d.spec.Replicas, "%s: replicas", where)
		assert.Positive(t, *d.spec.Replicas, where)

		img, ok := images[imageRepo(c.Image)]
		require.True(t, ok, "%s: image %s is not one docker-compose.yml builds, so its Dockerfile target is unknown", where, c.Image)
		assert.Equal(t, c.Name, img.role.name, "%s: image %s is the %s image", where, c.Image, img.role.name)
		assert.Contains(t, kustImages, imageRepo(c.Image), "%s: kustomization.yaml images: lets users point %s at their registry", where, c.Image)
		stage := img.stage

		for _, ef := range c.EnvFrom {
			if ef.ConfigMapRef != nil {
				usedCMs[ef.ConfigMapRef.Name] = true
			}
		}
		env := b.k8sEnvOf(t, where, c, nil)
		probs := envCheck{where: where, role: r, env: env, image: stage.imageEnv()}.problems()
		assert.Empty(t, probs, strings.Join(probs, "\n"))
		all := merged(stage.imageEnv(), env)
		assert.True(t, all["GITHUB_TOKEN"].secretRef, "%s: GITHUB_TOKEN must come from a Secret (secretKeyRef)", where)
		assert.Equal(t, strconv.Itoa(*sts.spec.Replicas), all["PRLOOP_STREAM_REPLICAS"].value,
			"%s: PRLOOP_STREAM_REPLICAS: one replica of the stream and KV on each NATS node", where)
		u, err := url.Parse(all["PRLOOP_NATS_URL"].value)
		require.NoError(t, err, where)
		natsURLs[where] = u.Host

		// The HTTP port: named, probed, scraped and exposed where the
		// service listens.
		port, err := httpPort(all)
		require.NoError(t, err, where)
		named, err := intOrString("http").resolve(c)
		require.NoError(t, err, "%s: name the HTTP port http", where)
		assert.Equal(t, port, named, "%s: containerPort http vs PRLOOP_HTTP_ADDR", where)
		assert.Contains(t, stage.expose, strconv.Itoa(port), "%s: image target %s", where, stage.name)
		for _, p := range []struct {
			kind  string
			probe *k8sProbe
			path  string
		}{{"liveness", c.LivenessProbe, "/healthz"}, {"readiness", c.ReadinessProbe, "/readyz"}, {"startup", c.StartupProbe, ""}} {
			if p.kind == "startup" && p.probe == nil {
				continue
			}
			require.True(t, p.probe != nil && p.probe.HTTPGet != nil, "%s: %s probe: httpGet", where, p.kind)
			if p.path != "" {
				assert.Equal(t, p.path, p.probe.HTTPGet.Path, "%s: %s probe path", where, p.kind)
			}
			pp, err := p.probe.HTTPGet.Port.resolve(c)
			require.NoError(t, err, "%s: %s probe", where, p.kind)
			assert.Equal(t, port, pp, "%s: %s probe port", where, p.kind)
		}
		ann := pod.Metadata.Annotations
		assert.Equal(t, "true", ann["prometheus.io/scrape"], "%s: prometheus.io/scrape", where)
		assert.Equal(t, strconv.Itoa(port), ann["prometheus.io/port"], "%s: prometheus.io/port", where)
		assert.Equal(t, "/metrics", ann["prometheus.io/path"], "%s: prometheus.io/path", where)

		// Restricted security, and writable directories on emptyDirs.
		checkPodSecurity(t, where, pod.Spec, stage.uid())
		writableDir(t, where, pod.Spec, c, "/tmp", "os.TempDir")
		if home := stage.env["HOME"]; home != "" {
			writableDir(t, where, pod.Spec, c, home, "HOME of image target "+stage.name)
		}
		if v, ok := all["PRLOOP_WORKSPACE_DIR"]; ok {
			writableDir(t, where, pod.Spec, c, v.value, "PRLOOP_WORKSPACE_DIR")
		}
		if v, ok := all["GOMEMLIMIT"]; ok {
			soft, err := goMemLimit(v.value)
			require.NoError(t, err, where)
			hard, err := parseQuantity(c.Resources.Limits["memory"])
			require.NoError(t, err, where)
			assert.Less(t, soft, hard, "%s: GOMEMLIMIT must leave headroom below the memory limit", where)
		}
	}
	for _, name := range []string{poller.Name, feedback.Name, merger.Name, escalator.Name} {
		assert.True(t, seen[name], "no Deployment runs %s", name)
	}
	// ConfigMaps are readable by anyone who can read the namespace's
	// configuration: no credential belongs there, even one a Secret
	// overrides.
	everything, _ := configVars(roles[roleAllInOne].configs...)
	for _, name := range sortedKeys(b.configMaps) {
		cm := b.configMaps[name]
		if slices.ContainsFunc(sortedKeys(cm.Data), func(k string) bool { return strings.HasPrefix(k, config.Prefix) }) {
			assert.True(t, usedCMs[name], "%s: ConfigMap %s sets PRLOOP_* variables but no Deployment loads it", cm.file, name)
		}
		for k := range cm.Data {
			assert.False(t, everything[k].secret || slices.Contains(tokenVars, k),
				"%s: ConfigMap %s holds the credential %s; put it in a Secret", cm.file, name, k)
		}
	}

	// Every Service selects pods and targets ports they have; the poller's
	// HTTP port (POST /webhook) has one.
	workloads := slices.Concat(b.deployments, b.statefulSets)
	var webhook bool
	for _, s := range b.services {
		where := fmt.Sprintf("%s: Service %s", s.obj.file, s.obj.Metadata.Name)
		var target *k8sWorkload
		for i, w := range workloads {
			if labelsMatch(s.spec.Selector, w.spec.Template.Metadata.Labels) {
				if target != nil {
					require.Failf(t, "Service selects two workloads", "%s: selects the pods of %s and %s", where, target.where(), w.where())
				}
				target = &workloads[i]
			}
		}
		require.NotNil(t, target, "%s: selects no pods", where)
		c := target.spec.Template.Spec.Containers[0]
		for _, p := range s.spec.Ports {
			tp, err := p.TargetPort.resolve(c)
			require.NoError(t, err, "%s: port %s", where, p.Name)
			if c.Name == poller.Name {
				env := b.k8sEnvOf(t, where, c, images[imageRepo(c.Image)].stage.imageEnv())
				port, err := httpPort(env)
				require.NoError(t, err)
				assert.Equal(t, port, tp, "%s: the webhook is served on the poller's HTTP port", where)
				webhook = true
			}
		}
	}
	assert.True(t, webhook, "no Service for the poller's webhook")

	// NATS: three nodes, a PVC each, fsync always, routes through the
	// headless Service, and the client Service prloop connects to.
	where := sts.where()
	require.NotNil(t, sts.spec.Replicas, where)
	assert.Equal(t, 3, *sts.spec.Replicas, "%s: replicas", where)
	var claims []string
	for _, vct := range sts.spec.VolumeClaimTemplates {
		claims = append(claims, vct.Metadata.Name)
	}
	checkPodSecurity(t, where, sts.spec.Template.Spec, -1, claims...)
	require.Len(t, sts.spec.Template.Spec.Containers, 1, where)
	nc := sts.spec.Template.Spec.Containers[0]
	confPath := configFlag(append(slices.Clone(nc.Command), nc.Args...))
	require.NotEmpty(t, confPath, "%s: start nats-server with --config", where)
	mountName, mountPath, ok := mountFor(nc, confPath)
	require.True(t, ok, "%s: %s is not mounted", where, confPath)
	var confText string
	for _, v := range sts.spec.Template.Spec.Volumes {
		if v.Name == mountName {
			require.NotNil(t, v.ConfigMap, "%s: %s is not from a ConfigMap", where, confPath)
			cm, ok := b.configMaps[v.ConfigMap.Name]
			require.True(t, ok, "%s: ConfigMap %s", where, v.ConfigMap.Name)
			confText, ok = cm.Data[strings.TrimPrefix(confPath, mountPath+"/")]
			require.True(t, ok, "%s: ConfigMap %s has no %s", where, v.ConfigMap.Name, path.Base(confPath))
		}
	}
	vars := map[string]string{}
	for _, e := range nc.Env {
		if e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "metadata.name" {
			vars[e.Name] = sts.obj.Metadata.Name + "-0"
		}
	}
	opts := natsOptions(t, confText, vars)
	assert.True(t, opts.JetStream, "%s: JetStream is off", where)
	assert.True(t, opts.SyncAlways, "%s: want sync_interval: always in jetstream {}", where)
	assert.Equal(t, sts.obj.Metadata.Name+"-0", opts.ServerName, "%s: server_name must be the pod's name ($POD_NAME): JetStream needs each node's own", where)

	storeVol, _, ok := mountFor(nc, opts.StoreDir)
	require.True(t, ok, "%s: store_dir %s is not on a volume", where, opts.StoreDir)
	var pvc bool
	for _, vct := range sts.spec.VolumeClaimTemplates {
		if vct.Metadata.Name == storeVol {
			pvc = true
			size, err := parseQuantity(vct.Spec.Resources.Requests["storage"])
			require.NoError(t, err, "%s: volumeClaimTemplate %s", where, storeVol)
			assert.Positive(t, opts.JetStreamMaxStore, "%s: set max_file_store below the volume's size", where)
			assert.Less(t, opts.JetStreamMaxStore, size, "%s: max_file_store must fit on the volume", where)
		}
	}
	assert.True(t, pvc, "%s: store_dir %s is on volume %s, not a volumeClaimTemplate", where, opts.StoreDir, storeVol)

	var headless *k8sService
	for i, s := range b.services {
		if s.obj.Metadata.Name == sts.spec.ServiceName {
			headless = &b.services[i]
		}
	}
	require.NotNil(t, headless, "%s: serviceName %s has no Service", where, sts.spec.ServiceName)
	assert.Equal(t, "None", headless.spec.ClusterIP, "%s: Service %s must be headless", where, headless.obj.Metadata.Name)
	assert.True(t, headless.spec.PublishNotReadyAddresses, "%s: the routes must resolve before the pods are ready, or the cluster cannot form", where)
	var routes []string
	for _, r := range opts.Routes {
		assert.Equal(t, strconv.Itoa(opts.Cluster.Port), r.Port(), "%s: route %s", where, r)
		routes = append(routes, r.Hostname())
	}
	var want []string
	for i := range *sts.spec.Replicas {
		want = append(want, fmt.Sprintf("%s-%d.%s", sts.obj.Metadata.Name, i, headless.obj.Metadata.Name))
	}
	assert.ElementsMatch(t, want, routes, "%s: cluster routes, one per pod through %s", where, headless.obj.Metadata.Name)
	var clusterPort bool
	for _, p := range headless.spec.Ports {
		tp, err := p.TargetPort.resolve(nc)
		require.NoError(t, err)
		clusterPort = clusterPort || tp == opts.Cluster.Port
	}
	assert.True(t, clusterPort, "%s: Service %s lacks the cluster port %d", where, headless.obj.Metadata.Name, opts.Cluster.Port)
	for _, p := range []*k8sProbe{nc.StartupProbe, nc.LivenessProbe, nc.ReadinessProbe} {
		require.True(t, p != nil && p.HTTPGet != nil, "%s: probes", where)
		pp, err := p.HTTPGet.Port.resolve(nc)
		require.NoError(t, err)
		assert.Equal(t, opts.HTTPPort, pp, "%s: probes ask the monitoring port", where)
		assert.True(t, strings.HasPrefix(p.HTTPGet.Path, "/healthz"), "%s: probe path %s", where, p.HTTPGet.Path)
	}

	// prloop connects to a Service that selects the NATS pods and forwards
	// to the client port.
	for w, hostPort := range natsURLs {
		host, port, err := net.SplitHostPort(hostPort)
		require.NoError(t, err, "%s: PRLOOP_NATS_URL needs a port", w)
		var found bool
		for _, s := range b.services {
			if s.obj.Metadata.Name != host {
				continue
			}
			assert.True(t, labelsMatch(s.spec.Selector, natsPods), "%s: Service %s does not select the NATS pods", w, host)
			for _, p := range s.spec.Ports {
				tp, err := p.TargetPort.resolve(nc)
				require.NoError(t, err)
				if strconv.Itoa(p.Port) == port && tp == opts.Port {
					found = true
				}
			}
		}
		assert.True(t, found, "%s: PRLOOP_NATS_URL %s is no Service port forwarding to NATS's client port %d", w, hostPort, opts.Port)
	}
}

// TestDeployDockerfile_MultiStageStaticNonRoot checks the Dockerfile: a
// build stage compiles a static binary with the Go version of go.work, and
// every image compose and Kubernetes run is a small non-root stage.
func TestDeployDockerfile_MultiStageStaticNonRoot(t *testing.T) {
	t.Parallel()
	root := proctest.Root(t)
	df := readDockerfile(t, root)
	require.GreaterOrEqual(t, len(df.stages), 2, "multi-stage: build, then a small runtime image")

	work, err := os.ReadFile(filepath.Join(root, "go.work"))
	require.NoError(t, err)
	m := regexp.MustCompile(`(?m)^go (\d+\.\d+)`).FindSubmatch(work)
	require.NotNil(t, m, "go.work: go directive")
	goVersion := string(m[1])

	builders := map[string]bool{}
	for _, s := range df.stages {
		if !s.runs("go build") {
			continue
		}
		require.NotEmpty(t, s.name, "Dockerfile: name the build stage (FROM … AS build)")
		builders[s.name] = true
		img, tag, _ := strings.Cut(s.base, ":")
		assert.Equal(t, "golang", path.Base(img), "stage %s: build with the golang image", s.name)
		assert.True(t, strings.HasPrefix(tag, goVersion), "stage %s: golang:%s, but go.work wants go %s", s.name, tag, goVersion)
		assert.Contains(t, s.args, "SERVICE", "stage %s: ARG SERVICE selects the binary", s.name)
		for _, in := range s.instrs {
			if in.cmd != "RUN" || !strings.Contains(in.args, "go build") {
				continue
			}
			assert.Contains(t, in.args, "$SERVICE", "stage %s: the go build RUN must use SERVICE", s.name)
			if s.env["CGO_ENABLED"] != "0" {
				before, _, _ := strings.Cut(in.args, "go build")
				assert.Contains(t, before, "CGO_ENABLED=0", "stage %s: build with CGO_ENABLED=0: a static binary for distroless/static", s.name)
			}
		}
	}
	require.NotEmpty(t, builders, "no stage runs go build")

	// The runtime stages: every compose build target, and the last stage
	// (what a plain docker build produces).
	_, cases := composeCases(t, root, df, composePath, composeDemoPath)
	runtime := map[string]bool{df.stages[len(df.stages)-1].name: true}
	for _, tc := range cases {
		runtime[tc.stage.name] = true
	}
	for _, name := range sortedKeys(runtime) {
		s := df.stage(name)
		require.NotNil(t, s, name)
		assert.False(t, builders[name], "stage %s: a runtime image must not carry the Go toolchain", name)
		assert.NotEmpty(t, s.user, "stage %s: set USER; images run as root otherwise", name)
		assert.Positive(t, s.uid(), "stage %s: USER %q: use a numeric non-root UID (Kubernetes' runAsNonRoot checks it)", name, s.user)
		assert.NotEmpty(t, s.entrypoint, "stage %s: ENTRYPOINT", name)
		assert.True(t, slices.ContainsFunc(s.instrs, func(in dockerInstr) bool {
			from, ok := strings.CutPrefix(in.args, "--from=")
			return in.cmd == "COPY" && ok && builders[strings.Fields(from)[0]]
		}), "stage %s: COPY --from the build stage", name)
		port, err := httpPort(s.imageEnv())
		require.NoError(t, err, "stage %s: set PRLOOP_HTTP_ADDR for containers", name)
		assert.Equal(t, []string{strconv.Itoa(port)}, s.expose, "stage %s: EXPOSE the port of PRLOOP_HTTP_ADDR", name)
		for k := range s.env {
			if strings.HasPrefix(k, config.Prefix) {
				vars, _ := configVars(config.Common{})
				assert.Contains(t, vars, k, "stage %s: ENV %s: images are shared, so only settings of config.Common belong there", name, k)
			}
		}
	}

	ignore, err := os.ReadFile(filepath.Join(root, dockerignore))
	require.NoError(t, err)
	var patterns []string
	for _, l := range strings.Split(string(ignore), "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
			patterns = append(patterns, l)
		}
	}
	assert.Contains(t, patterns, ".git", ".dockerignore: keep .git out of the build context")
	for _, need := range []string{"go.work", "go.work.sum", "pkg", "services", "cmd", "cmd/prloop/main.go", "services/feedback/prompt.tmpl"} {
		for _, p := range patterns {
			ok, err := filepath.Match(strings.TrimPrefix(p, "**/"), need)
			require.NoError(t, err)
			assert.False(t, ok || p == need, ".dockerignore: %s excludes %s, which the build needs", p, need)
		}
	}
}

// isolateEnv unsets the process's prloop and token variables for the test.
func isolateEnv(t *testing.T) {
	t.Helper()
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, config.Prefix) || slices.Contains(tokenVars, k) {
			t.Setenv(k, "") // restored when the test ends
			require.NoError(t, os.Unsetenv(k))
		}
	}
}

// TestDeployConfig_LoadsAndValidates loads every service's configuration
// from each deployment's environment, as the service does at start (values
// from Secrets and the shell stay unset), and checks the Kubernetes grace
// period outlasts the service's shutdown.
func TestDeployConfig_LoadsAndValidates(t *testing.T) {
	root := proctest.Root(t)
	roles := deployRoles()
	df := readDockerfile(t, root)
	type loadCase struct {
		name  string
		role  deployRole
		env   envSet
		grace *int64
	}
	var cases []loadCase
	for _, files := range [][]string{{composePath}, {composePath, composeDemoPath}} {
		_, cs := composeCases(t, root, df, files...)
		for _, tc := range cs {
			if tc.role.newConfig == nil {
				continue
			}
			cases = append(cases, loadCase{
				name: strings.Join(files, "+") + "/" + tc.name, role: tc.role,
				env: merged(tc.stage.imageEnv(), composeEnvOf(t, tc.file, tc.svc, nil)),
			})
		}
	}
	b := readK8s(t, root)
	images := k8sImages(t, root, df)
	for _, d := range b.deployments {
		c := d.spec.Template.Spec.Containers[0]
		grace := d.spec.Template.Spec.TerminationGracePeriodSeconds
		if grace == nil {
			grace = new(int64(30)) // Kubernetes' default
		}
		cases = append(cases, loadCase{
			name: "k8s/" + d.obj.Metadata.Name, role: roles[c.Name], grace: grace,
			env: b.k8sEnvOf(t, d.where(), c, images[imageRepo(c.Image)].stage.imageEnv()),
		})
	}
	require.NotEmpty(t, cases)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			isolateEnv(t)
			for _, kv := range tc.env.literal() {
				k, v, _ := strings.Cut(kv, "=")
				t.Setenv(k, v)
			}
			cfg := tc.role.newConfig()
			require.NoError(t, config.Load(cfg), "%s: %s would not start", tc.name, tc.role.name)
			if tc.grace != nil {
				shutdown := cfg.Shared().ShutdownGrace + time.Second // app.Serve waits grace + 1s
				assert.Greater(t, time.Duration(*tc.grace)*time.Second, shutdown,
					"%s: terminationGracePeriodSeconds %d must outlast PRLOOP_SHUTDOWN_GRACE (%s) + 1s, or Kubernetes kills in-flight work", tc.name, *tc.grace, cfg.Shared().ShutdownGrace)
			}
		})
	}
}

// pollUntilOK asks get for path until it answers 200 or d has passed, and
// returns the last answer.
func pollUntilOK(get func(string) (int, string), path string, d time.Duration) (int, string) {
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		code, body := get(path)
		if code == http.StatusOK {
			return code, body
		}
		select {
		case <-deadline.C:
			return code, body
		case <-tick.C:
		}
	}
}

// listenRE finds the HTTP server's address in a service's JSON log.
var listenRE = regexp.MustCompile(`"msg":"http server listening"[^\n]*?"addr":"([^"]+)"`)

// TestDeployK8s_ProbesServedByServices runs each Deployment's service
// binary with the Deployment's environment and asks its HTTP server for the
// probe paths the manifest names, the Prometheus path its annotations name,
// and (poller) the webhook its Service exposes. Only what cannot work on a
// test machine is replaced: NATS (an embedded server with one replica), the
// listen address (a free port on 127.0.0.1; the port itself is checked
// against the manifest by TestDeployK8s_VariablesPortsSecurityAndNATS),
// GitHub (the simulator), the workspace, and the values of Secrets.
func TestDeployK8s_ProbesServedByServices(t *testing.T) {
	t.Parallel()
	root := proctest.Root(t)
	roles := deployRoles()
	df := readDockerfile(t, root)
	b := readK8s(t, root)
	images := k8sImages(t, root, df)
	sim := startTestSim(t)
	conn := natstest.Start(t)
	const webhookSecret = "deploy-test-webhook-secret"

	for _, d := range b.deployments {
		c := d.spec.Template.Spec.Containers[0]
		r := roles[c.Name]
		t.Run(c.Name, func(t *testing.T) {
			t.Parallel()
			where := d.where()
			env := b.k8sEnvOf(t, where, c, images[imageRepo(c.Image)].stage.imageEnv())
			vars, _ := configVars(r.configs...)
			overrides := map[string]string{
				"PRLOOP_NATS_URL": conn.URL, "PRLOOP_NATS_CREDS_FILE": conn.CredsFile, "PRLOOP_STREAM_REPLICAS": "1",
				"PRLOOP_HTTP_ADDR": "127.0.0.1:0", "PRLOOP_LOG_FORMAT": "json",
				"PRLOOP_WORKSPACE_DIR": t.TempDir(), "PRLOOP_DATA_DIR": t.TempDir(),
				"PRLOOP_WEBHOOK_SECRET": webhookSecret,
			}
			for _, kv := range sim.env() {
				k, v, _ := strings.Cut(kv, "=")
				overrides[k] = v
			}
			var procEnv []string
			for _, kv := range env.literal() {
				if k, _, _ := strings.Cut(kv, "="); overrides[k] == "" {
					procEnv = append(procEnv, kv)
				}
			}
			for k, v := range overrides {
				if _, reads := vars[k]; reads || slices.Contains(tokenVars, k) {
					procEnv = append(procEnv, k+"="+v)
				}
			}
			p := proctest.Start(t, proctest.Build(t, r.pkg), procEnv)

			var base string
			require.Eventually(t, func() bool {
				if m := listenRE.FindStringSubmatch(p.Stderr.String()); m != nil {
					base = "http://" + m[1]
				}
				return base != "" || p.Exited()
			}, 30*time.Second, 10*time.Millisecond, "%s: the HTTP server never listened", c.Name)
			require.NotEmpty(t, base, "%s exited:\n%s", c.Name, p.Stderr.String())

			get := func(path string) (int, string) {
				resp, err := http.Get(base + path)
				if err != nil {
					return 0, err.Error()
				}
				defer resp.Body.Close()
				body, _ := io.ReadAll(resp.Body)
				return resp.StatusCode, string(body)
			}
			for _, pr := range []struct {
				kind  string
				probe *k8sProbe
			}{{"startup", c.StartupProbe}, {"liveness", c.LivenessProbe}, {"readiness", c.ReadinessProbe}} {
				if pr.probe == nil {
					continue
				}
				path := pr.probe.HTTPGet.Path
				code, body := pollUntilOK(get, path, 30*time.Second)
				assert.Equal(t, http.StatusOK, code, "%s: %s probe GET %s answered %q", where, pr.kind, path, body)
			}
			// The server does not answer everything: a wrong probe path
			// would fail.
			code, _ := get("/deploy-test-no-such-path")
			assert.Equal(t, http.StatusNotFound, code, "the server answers any path")

			// What the Prometheus annotations point at.
			metricsPath := d.spec.Template.Metadata.Annotations["prometheus.io/path"]
			code, body := get(metricsPath)
			assert.Equal(t, http.StatusOK, code, "%s: GET %s (prometheus.io/path)", where, metricsPath)
			assert.Contains(t, body, "# TYPE go_goroutines", "%s: GET %s: want the Prometheus text format", where, metricsPath)

			if c.Name != poller.Name {
				return
			}
			// The webhook Service targets this port; POST /webhook is
			// served there and checks the signature.
			post := func(sig string) int {
				body := `{"zen":"Keep it logically awesome.","hook_id":1}`
				req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, base+"/webhook", strings.NewReader(body))
				require.NoError(t, err)
				req.Header.Set("X-GitHub-Event", "ping")
				req.Header.Set("Content-Type", "application/json")
				if sig != "" {
					req.Header.Set("X-Hub-Signature-256", sign(webhookSecret, body))
				}
				resp, err := http.DefaultClient.Do(req)
				require.NoError(t, err)
				resp.Body.Close()
				return resp.StatusCode
			}
			assert.Equal(t, http.StatusUnauthorized, post(""), "%s: unsigned webhook", where)
			assert.Equal(t, http.StatusAccepted, post("sign"), "%s: signed webhook", where)
		})
	}
}
