package main

// The deploy tests keep docker-compose.yml (+ docker-compose.demo.yml),
// deploy/k8s, deploy/nats and the Dockerfile honest, reading them with the
// libraries the real tools are made of (compose-go, krusty, BuildKit's
// parser, nats-server's parser, Pod Security admission). Every prloop
// container of compose and Kubernetes is a row of the same checks: each
// PRLOOP_* variable is a setting of its Config, the required ones are set,
// the values load and validate, ports, image and NATS address agree. The
// probes are asked of the real binaries; natsauth_test.go checks the NATS
// users and their permissions.

import (
	"cmp"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
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

	"github.com/prloop/prloop/pkg/config"
	"github.com/prloop/prloop/pkg/ghsim"
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
	roleSim         = "prloop ghsim"
)

// rolesNeedingGit run git and sh: the feedback service clones, pushes and
// runs the agent; the merger fetches to verify its branch updates; the
// simulator keeps real git repositories.
var rolesNeedingGit = []string{feedback.Name, merger.Name, roleSim}

// deployContainer is one prloop container of compose or Kubernetes: a row
// of the checks both deployments share.
type deployContainer struct {
	envCheck
	stage *dockerStage
	ports []int // the container ports others reach: published (compose) or named (Kubernetes)
	grace int64 // terminationGracePeriodSeconds; 0 under compose
}

// checkContainer checks a container's variables, image, HTTP port and NATS
// address: PRLOOP_NATS_URL must name one of natsAddrs (host:port reaching
// NATS's client port) and PRLOOP_STREAM_REPLICAS the number of NATS servers.
// It returns the environment the container starts with and its HTTP port.
func checkContainer(t *testing.T, c deployContainer, natsAddrs []string, natsServers int) (envSet, int) {
	t.Helper()
	probs := c.problems()
	assert.Empty(t, probs, strings.Join(probs, "\n"))
	if slices.Contains(rolesNeedingGit, c.role.name) {
		assert.Contains(t, c.stage.runs, "git", "%s: %s runs git; image target %s has none", c.where, c.role.name, c.stage.name)
	} else {
		assert.Contains(t, c.stage.base, "distroless/static", "%s: image target %s", c.where, c.stage.name)
	}
	assert.Positive(t, c.stage.uid, "%s: image target %s: USER: a numeric non-root UID (runAsNonRoot checks it)", c.where, c.stage.name)
	common, _ := configVars(config.Common{})
	for k := range c.image {
		assert.True(t, !strings.HasPrefix(k, config.Prefix) || common[k] != configVar{}, "%s: image target %s: ENV %s: images are shared, so only settings of config.Common belong there", c.where, c.stage.name, k)
	}
	env := merged(c.image, c.env)
	if c.role.newConfig == nil {
		return env, 0
	}
	addr := cmp.Or(env["PRLOOP_HTTP_ADDR"], envValue{value: "127.0.0.1:0", known: true, from: "config.Common's default"})
	host, p, err := net.SplitHostPort(addr.value)
	port, _ := strconv.Atoi(p)
	require.True(t, addr.known && err == nil && port > 0 && (host == "" || host == "0.0.0.0" || host == "::"),
		"%s: PRLOOP_HTTP_ADDR=%q (%s): want a fixed port on all interfaces (:8080): the probes and Prometheus need one", c.where, addr.value, addr.from)
	assert.Contains(t, c.ports, port, "%s: PRLOOP_HTTP_ADDR listens on %d; publish or name that container port", c.where, port)
	u, err := url.Parse(env["PRLOOP_NATS_URL"].value)
	require.NoError(t, err, c.where)
	assert.Contains(t, natsAddrs, u.Host, "%s: PRLOOP_NATS_URL must reach NATS's client port", c.where)
	assert.Equal(t, strconv.Itoa(natsServers), env["PRLOOP_STREAM_REPLICAS"].value, "%s: PRLOOP_STREAM_REPLICAS: a replica on each NATS server", c.where)
	return env, port
}

// dockerStage is what the tests read of a Dockerfile stage.
type dockerStage struct {
	name, base string
	uid        int64  // USER's numeric UID, or -1
	image      envSet // its ENV
	runs       string // its RUN command lines
	copies     string // its COPY sources, unexpanded
}

// readDockerfile parses the Dockerfile with BuildKit's parser and returns
// its stages by name.
func readDockerfile(t *testing.T, root string) map[string]*dockerStage {
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
	out := map[string]*dockerStage{}
	for _, st := range stages {
		s := &dockerStage{name: st.Name, base: os.Expand(st.BaseName, func(k string) string { return global[k] }), uid: -1, image: envSet{}}
		for _, c := range st.Commands {
			switch c := c.(type) {
			case *instructions.EnvCommand:
				for _, kv := range c.Env {
					s.image[kv.Key] = envValue{value: kv.Value, known: true, from: "Dockerfile stage " + st.Name}
				}
			case *instructions.UserCommand:
				u, _, _ := strings.Cut(c.User, ":")
				if n, err := strconv.ParseInt(u, 10, 64); err == nil {
					s.uid = n
				}
			case *instructions.RunCommand:
				s.runs += strings.Join(c.CmdLine, " ") + "\n"
			case *instructions.CopyCommand:
				s.copies += strings.Join(c.SourcePaths, " ") + "\n"
			}
		}
		out[st.Name] = s
	}
	return out
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

// composeCase is one prloop service of a compose project.
type composeCase struct {
	deployContainer
	name string
	svc  types.ServiceConfig
}

// composeCases loads the compose files as docker compose does, with the
// demo profile when the demo override is among them and an empty shell, and
// returns the project and its prloop services, enabled or not.
func composeCases(t *testing.T, root string, df map[string]*dockerStage, files ...string) (*types.Project, []composeCase) {
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
		role := s.Build.Args.ToMapping()["SERVICE"]
		if role == "prloop" && len(s.Command) > 0 {
			role += " " + s.Command[0]
		} else {
			assert.Empty(t, s.Command, "%s: the %s image runs the service itself; a command would be its arguments", where, role)
		}
		require.Contains(t, roles, role, "%s: build arg SERVICE and command: teach the deploy tests what it runs", where)
		stage := df[s.Build.Target]
		require.NotNil(t, stage, "%s: Dockerfile target %q: name one (static or git); the default is the last stage", where, s.Build.Target)
		env, values := envSet{}, s.Environment.ToMapping()
		for k, v := range s.Environment {
			env[k] = envValue{value: values[k], known: v != nil, from: where}
		}
		var ports []int
		for _, pc := range s.Ports {
			ports = append(ports, int(pc.Target))
		}
		out = append(out, composeCase{deployContainer{envCheck{where, roles[role], env, stage.image, nil}, stage, ports, 0}, name, s})
	}
	return p, out
}

// TestDeployCompose_VariablesPortsAndNATS checks docker-compose.yml, alone
// and with docker-compose.demo.yml: every service's variables, image and
// port, the simulator, and the NATS the services depend on.
func TestDeployCompose_VariablesPortsAndNATS(t *testing.T) {
	t.Parallel()
	root := proctest.Root(t)
	df := readDockerfile(t, root)
	demoToken := startTestSim(t).token // what ghsim -seed serves
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
			opts := parseNATSConf(t, string(confText))
			assert.True(t, opts.JetStream && opts.SyncAlways, "%s: want jetstream { sync_interval: always }", confSrc)
			assert.Truef(t, slices.ContainsFunc(volumes, func(m string) bool { return strings.HasPrefix(opts.StoreDir+"/", m) }),
				"%s: store_dir %s is not on a named volume (%v)", confSrc, opts.StoreDir, volumes)
			require.NotNil(t, nc.HealthCheck, "nats has no healthcheck; the services wait for service_healthy")
			assert.Contains(t, strings.Join(nc.HealthCheck.Test, " "), fmt.Sprintf("localhost:%d/healthz", opts.HTTPPort), "nats healthcheck vs http_port")
			assert.True(t, slices.ContainsFunc(nc.Ports, func(pc types.ServicePortConfig) bool { return int(pc.Target) == opts.Port }), "publish the NATS client port for nats sub")

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
			n, err := strconv.Atoi(port)
			require.NoError(t, err, "%s: -addr", sim.where)
			assert.Contains(t, sim.ports, n, "%s: publish -addr's port", sim.where)
			require.NotNil(t, sim.svc.HealthCheck, sim.where)
			assert.Contains(t, strings.Join(sim.svc.HealthCheck.Test, " "), "//"+simAddr+"/", "%s: healthcheck", sim.where)
			assert.Contains(t, sim.svc.Command, "-seed", "%s: seed the demo repository and tokens", sim.where)

			var seen []string
			for _, tc := range cases {
				w := tc.where
				if demo {
					tc.public = []string{demoToken}
				}
				env, _ := checkContainer(t, tc.deployContainer, []string{"nats:" + strconv.Itoa(opts.Port)}, 1)
				if tc.role.name == roleSim {
					continue
				}
				seen = append(seen, tc.role.name)
				assert.Equal(t, types.ServiceConditionHealthy, tc.svc.DependsOn["nats"].Condition, "%s: depends_on nats condition service_healthy", w)
				if dir := env["PRLOOP_WORKSPACE_DIR"].value; dir != "" {
					assert.Truef(t, slices.ContainsFunc(tc.svc.Volumes, func(v types.ServiceVolumeConfig) bool { return v.Target == dir }), "%s: PRLOOP_WORKSPACE_DIR=%s is not a volume", w, dir)
				}
				if !demo {
					continue
				}
				vars, _ := configVars(tc.role.configs...)
				assert.Equal(t, "http://"+simAddr+"/", env["PRLOOP_GITHUB_API_URL"].value, "%s: PRLOOP_GITHUB_API_URL must reach the simulator", w)
				assert.Equal(t, demoToken, env["GITHUB_TOKEN"].value, "%s: GITHUB_TOKEN must be the simulator's token for %s", w, ghsim.DemoPrloop)
				if _, ok := vars["PRLOOP_GITHUB_LOGIN"]; ok {
					assert.Equal(t, ghsim.DemoPrloop, env["PRLOOP_GITHUB_LOGIN"].value, w)
				}
				if tc.role.name == poller.Name {
					assert.Contains(t, strings.Split(env["PRLOOP_REPOS"].value, ","), ghsim.DemoOwner+"/"+ghsim.DemoRepo, w)
				}
				assert.Equal(t, types.ServiceConditionHealthy, tc.svc.DependsOn[sim.name].Condition, "%s: depends_on %s", w, sim.name)
			}
			assert.Subset(t, seen, []string{poller.Name, feedback.Name, merger.Name, escalator.Name}, "a service for each")
		})
	}
}

// TestDeployDockerfile_BuildsWithTheGoOfGoWork: the golang image sets
// GOTOOLCHAIN=local, so a build stage older than go.work's go line fails.
func TestDeployDockerfile_BuildsWithTheGoOfGoWork(t *testing.T) {
	t.Parallel()
	root := proctest.Root(t)
	text, err := os.ReadFile(filepath.Join(root, "go.work"))
	require.NoError(t, err)
	wf, err := modfile.ParseWork("go.work", text, nil)
	require.NoError(t, err)
	goVersion := strings.Join(strings.SplitN(wf.Go.Version, ".", 3)[:2], ".")
	var builders int
	for _, s := range readDockerfile(t, root) {
		if strings.Contains(s.runs, "go build") {
			builders++
			assert.Contains(t, s.base, "golang:"+goVersion, "stage %s: go.work wants go %s", s.name, goVersion)
		}
	}
	require.Positive(t, builders, "no stage runs go build")
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

// k8sDeployment is a prloop Deployment and its one container.
type k8sDeployment struct {
	deployContainer
	appsv1.Deployment
	c corev1.Container
}

// decodeStrict decodes a rendered object; a misspelt field is an error.
func decodeStrict[T any](t *testing.T, y []byte) T {
	t.Helper()
	var v T
	require.NoError(t, yaml.UnmarshalStrict(y, &v), "%s", y)
	return v
}

// k8sObject is one rendered object: its kind, name and YAML.
type k8sObject struct {
	kind, name string
	yaml       []byte
}

// renderK8s renders deploy/k8s as kubectl apply -k does.
func renderK8s(t *testing.T, root string, df map[string]*dockerStage) *k8sBase {
	t.Helper()
	dir := filepath.Join(root, k8sDir)
	kust, err := os.ReadFile(filepath.Join(dir, "kustomization.yaml"))
	require.NoError(t, err)
	b := readK8s(t, root, df, k8sDir, kustomize(t, dir), nil)
	b.kust = decodeStrict[ktypes.Kustomization](t, kust)
	return b
}

// kustomize renders a kustomization's objects.
func kustomize(t *testing.T, dir string) []k8sObject {
	t.Helper()
	rendered, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), dir)
	require.NoError(t, err, "kubectl apply -k %s would fail", dir)
	var objs []k8sObject
	for _, r := range rendered.Resources() {
		y, err := r.AsYAML()
		require.NoError(t, err, r.CurId().String())
		objs = append(objs, k8sObject{r.GetKind(), r.GetName(), y})
	}
	return objs
}

// readK8s decodes rendered objects (of deploy/k8s or the Helm chart,
// source) and pairs each Deployment's container with the role and image
// target docker-compose.yml builds for it. images, when not nil, is the
// image each container must run; else it must be the one compose builds.
func readK8s(t *testing.T, root string, df map[string]*dockerStage, source string, objs []k8sObject, images map[string]string) *k8sBase {
	t.Helper()
	b := &k8sBase{configMaps: map[string]corev1.ConfigMap{}}
	var deploys []appsv1.Deployment
	for _, o := range objs {
		y := o.yaml
		switch o.kind {
		case "Namespace":
			b.namespaces = append(b.namespaces, decodeStrict[corev1.Namespace](t, y))
		case "ConfigMap":
			b.configMaps[o.name] = decodeStrict[corev1.ConfigMap](t, y)
		case "Deployment":
			deploys = append(deploys, decodeStrict[appsv1.Deployment](t, y))
		case "StatefulSet":
			b.sts = append(b.sts, decodeStrict[appsv1.StatefulSet](t, y))
		case "Service":
			b.services = append(b.services, decodeStrict[corev1.Service](t, y))
		}
	}
	// The container names the service, and the compose service building
	// its image the Dockerfile target.
	_, cases := composeCases(t, root, df, composePath)
	for _, d := range deploys {
		where := source + ": Deployment " + d.Name
		require.Len(t, d.Spec.Template.Spec.Containers, 1, where)
		c := d.Spec.Template.Spec.Containers[0]
		i := slices.IndexFunc(cases, func(tc composeCase) bool { return tc.role.name == c.Name })
		require.GreaterOrEqual(t, i, 0, "%s: container %s runs no service docker-compose.yml builds", where, c.Name)
		tc := cases[i]
		if images == nil {
			assert.Equal(t, imageRepo(t, tc.svc.Image), imageRepo(t, c.Image), "%s: container %s runs the %s image docker-compose.yml builds", where, c.Name, tc.role.name)
		} else {
			assert.Equal(t, images[c.Name], c.Image, "%s: container %s: image", where, c.Name)
		}
		env := envSet{}
		for _, ef := range c.EnvFrom {
			require.NotNil(t, ef.ConfigMapRef, "%s: envFrom a Secret hides which variables it sets; use env with secretKeyRef", where)
			cm, ok := b.configMaps[ef.ConfigMapRef.Name]
			require.True(t, ok && ef.Prefix == "", "%s: envFrom ConfigMap %s: not rendered, or a prefix", where, ef.ConfigMapRef.Name)
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
		grace := cmp.Or(d.Spec.Template.Spec.TerminationGracePeriodSeconds, new(int64(corev1.DefaultTerminationGracePeriodSeconds)))
		row := deployContainer{envCheck{where, tc.role, env, tc.stage.image, nil}, tc.stage, []int{portOf(c, intstr.FromString("http"))}, *grace}
		b.deploys = append(b.deploys, k8sDeployment{row, d, c})
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
	results := eval.EvaluatePod(lv, &tpl.ObjectMeta, &tpl.Spec)
	if hu := tpl.Spec.HostUsers; hu != nil && !*hu {
		// The agent sandbox's one exception (deploy/k8s/feedback.yaml): a
		// fresh /proc needs procMount: Unmasked, which baseline allows in a
		// pod with its own user namespace and restricted never does.
		results = slices.DeleteFunc(results, func(r policy.CheckResult) bool { return r.ForbiddenReason == "procMount" })
		base := policy.AggregateCheckResults(eval.EvaluatePod(psapi.LevelVersion{Level: psapi.LevelBaseline, Version: lv.Version}, &tpl.ObjectMeta, &tpl.Spec))
		assert.True(t, base.Allowed, "%s: Pod Security baseline forbids: %s %v", where, base.ForbiddenReason(), base.ForbiddenDetails)
	}
	res := policy.AggregateCheckResults(results)
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
	assert.Equal(t, b.kust.Namespace, b.namespaces[0].Name, "kustomization.yaml: namespace")
	for _, d := range b.deploys {
		assert.True(t, slices.ContainsFunc(b.kust.Images, func(im ktypes.Image) bool { return im.Name == imageRepo(t, d.c.Image) }), "%s: kustomization.yaml images: lets users point %s at their registry", d.where, d.c.Image)
	}
	checkK8s(t, b)
}

// checkK8s checks rendered Kubernetes objects (deploy/k8s or the Helm
// chart): each Deployment's environment, ports, probes, Prometheus
// annotations and security, the Services, and the NATS cluster.
func checkK8s(t *testing.T, b *k8sBase) {
	t.Helper()
	require.Len(t, b.namespaces, 1)
	ns := b.namespaces[0]
	version, err := psapi.ParseVersion(ns.Labels[psapi.EnforceVersionLabel])
	require.NoError(t, err, "Namespace %s", ns.Name)
	lv := psapi.LevelVersion{Level: psapi.LevelRestricted, Version: version}
	// Enforced: baseline, which the agent sandbox needs (checkPod); every
	// pod is checked against restricted here, and the cluster warns and
	// audits against it.
	for label, level := range map[string]psapi.Level{psapi.EnforceLevelLabel: psapi.LevelBaseline, psapi.WarnLevelLabel: psapi.LevelRestricted, psapi.AuditLevelLabel: psapi.LevelRestricted} {
		assert.Equal(t, string(level), ns.Labels[label], "Namespace %s: %s", ns.Name, label)
	}
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
	for _, e := range nc.Env { // the server takes $POD_NAME from its environment
		if e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "metadata.name" {
			confText = strings.ReplaceAll(confText, "$"+e.Name, sts.Name+"-0")
		}
	}
	opts := parseNATSConf(t, confText)
	assert.True(t, opts.JetStream && opts.SyncAlways, "nats: want jetstream { sync_interval: always }")
	assert.Equal(t, sts.Name+"-0", opts.ServerName, "nats: server_name must be the pod's name: JetStream needs each node's own")
	storeVol, _ := mountFor(nc, opts.StoreDir)
	ci := slices.IndexFunc(sts.Spec.VolumeClaimTemplates, func(v corev1.PersistentVolumeClaim) bool { return v.Name == storeVol })
	require.GreaterOrEqual(t, ci, 0, "nats: store_dir %s is not on a volumeClaimTemplate", opts.StoreDir)
	assert.True(t, opts.JetStreamMaxStore > 0 && opts.JetStreamMaxStore < sts.Spec.VolumeClaimTemplates[ci].Spec.Resources.Requests.Storage().Value(), "nats: max_file_store must fit on the volume")
	checkPod(t, "StatefulSet nats", lv, sts.Spec.Template, -1)
	assert.True(t, *sts.Spec.Replicas >= 3 && *sts.Spec.Replicas%2 == 1, "nats: an odd number of 3 or more servers: JetStream's Raft needs a majority")
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
	var natsAddrs []string            // Service host:port reaching NATS's client port
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
			if targets[0] == "StatefulSet "+sts.Name && tp == opts.Port {
				natsAddrs = append(natsAddrs, fmt.Sprintf("%s:%d", s.Name, p.Port))
			}
		}
	}

	usedCMs := map[string]bool{}
	var seen []string
	for _, d := range b.deploys {
		where, c, pod := d.where, d.c, d.Spec.Template
		seen = append(seen, c.Name)
		assert.True(t, d.Spec.Replicas != nil && *d.Spec.Replicas > 0 && labels.SelectorFromSet(d.Spec.Selector.MatchLabels).Matches(labels.Set(pod.Labels)), "%s: replicas and a selector of its pods", where)
		for _, ef := range c.EnvFrom {
			usedCMs[ef.ConfigMapRef.Name] = true
		}
		env, port := checkContainer(t, d.deployContainer, natsAddrs, int(*sts.Spec.Replicas))
		assert.True(t, env["GITHUB_TOKEN"].secretRef, "%s: GITHUB_TOKEN must come from a Secret (secretKeyRef)", where)
		if c.Name == poller.Name {
			assert.True(t, servicePorts[fmt.Sprintf("%s/%d", where, port)], "%s: no Service for the webhook on the HTTP port", where)
		}
		// Liveness must not fail while NATS is away, or every pod restarts.
		require.True(t, c.LivenessProbe != nil && c.LivenessProbe.HTTPGet != nil && c.ReadinessProbe != nil && c.ReadinessProbe.HTTPGet != nil, "%s: liveness and readiness probes: httpGet", where)
		assert.Equal(t, []string{"/healthz", "/readyz"}, []string{c.LivenessProbe.HTTPGet.Path, c.ReadinessProbe.HTTPGet.Path}, "%s: liveness and readiness paths", where)
		for _, p := range []*corev1.Probe{c.StartupProbe, c.LivenessProbe, c.ReadinessProbe} {
			assert.True(t, p == nil || (p.HTTPGet != nil && portOf(c, p.HTTPGet.Port) == port), "%s: probes httpGet port %d", where, port)
		}
		for k, v := range map[string]string{"scrape": "true", "port": strconv.Itoa(port), "path": "/metrics"} {
			assert.Equal(t, v, pod.Annotations["prometheus.io/"+k], "%s: Prometheus annotation prometheus.io/%s", where, k)
		}
		checkPod(t, where, lv, pod, d.stage.uid, "/tmp", cmp.Or(d.stage.image["HOME"].value, "/tmp"), cmp.Or(env["PRLOOP_WORKSPACE_DIR"].value, "/tmp"))
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
	everything, _ := configVars(poller.Config{}, feedback.Config{}, merger.Config{}, escalator.Config{})
	for name, cm := range b.configMaps {
		for k := range cm.Data {
			assert.False(t, strings.HasPrefix(k, config.Prefix) && !usedCMs[name], "ConfigMap %s sets PRLOOP_* variables but no Deployment loads it", name)
			assert.False(t, everything[k].secret || slices.Contains(tokenVars, k), "ConfigMap %s holds the credential %s; put it in a Secret", name, k)
		}
	}
}

// TestDeployConfig_LoadsAndValidates loads each service's configuration
// from each container's environment, as the service does at start (values
// from Secrets and the shell stay unset), and checks that Kubernetes' grace
// period outlasts the service's shutdown. Not parallel: it sets variables.
func TestDeployConfig_LoadsAndValidates(t *testing.T) {
	root := proctest.Root(t)
	df := readDockerfile(t, root)
	var rows []deployContainer
	for _, files := range [][]string{{composePath}, {composePath, composeDemoPath}} {
		_, cases := composeCases(t, root, df, files...)
		for _, c := range cases {
			rows = append(rows, c.deployContainer)
		}
	}
	for _, d := range renderK8s(t, root, df).deploys {
		rows = append(rows, d.deployContainer)
	}
	for _, c := range rows {
		if c.role.newConfig == nil {
			continue
		}
		t.Run(c.where, func(t *testing.T) {
			for _, kv := range os.Environ() { // unset by the cleanups t.Setenv registers
				if k, _, _ := strings.Cut(kv, "="); strings.HasPrefix(k, config.Prefix) || slices.Contains(tokenVars, k) {
					t.Setenv(k, "")
					require.NoError(t, os.Unsetenv(k))
				}
			}
			for _, kv := range merged(c.image, c.env).literal() {
				k, v, _ := strings.Cut(kv, "=")
				t.Setenv(k, v)
			}
			cfg := c.role.newConfig()
			require.NoError(t, config.Load(cfg), "%s would not start", c.role.name)
			if c.grace > 0 {
				assert.Greater(t, time.Duration(c.grace)*time.Second, cfg.Shared().ShutdownGrace+time.Second, // app.Serve waits grace + 1s
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
	for _, d := range b.deploys {
		t.Run(d.c.Name, func(t *testing.T) {
			t.Parallel()
			vars, _ := configVars(d.role.configs...)
			env := merged(d.image, d.env)
			for k, v := range map[string]string{"PRLOOP_NATS_URL": conn.URL, "PRLOOP_NATS_CREDS_FILE": conn.CredsFile, "PRLOOP_STREAM_REPLICAS": "1", "PRLOOP_HTTP_ADDR": "127.0.0.1:0",
				"PRLOOP_LOG_FORMAT": "json", "PRLOOP_WORKSPACE_DIR": t.TempDir(), "PRLOOP_DATA_DIR": t.TempDir(), "PRLOOP_WEBHOOK_SECRET": "deploy-test-webhook-secret",
				// The image a deployment builds installs its agent; here it is missing.
				"PRLOOP_AGENT_CMD": "true"} {
				if _, reads := vars[k]; reads {
					env[k] = envValue{value: v, known: true}
				}
			}
			if _, reads := vars["PRLOOP_AGENT"]; reads {
				// The configured preset's agent is missing too: a stand-in.
				env["PRLOOP_AGENT"] = envValue{value: "command", known: true}
				env["PRLOOP_AGENT_CMD"] = envValue{value: "true", known: true}
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
			// get runs in EventuallyWithT's goroutine too: it reports
			// errors in what it returns.
			get := func(path string) (int, string) {
				resp, err := http.Get(base + path)
				if err != nil {
					return 0, err.Error()
				}
				defer resp.Body.Close()
				body, _ := io.ReadAll(resp.Body) // a short body fails the checks of its content
				return resp.StatusCode, string(body)
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
			if d.c.Name == poller.Name {
				// The webhook Service targets this port; an unsigned delivery
				// is refused only when PRLOOP_WEBHOOK_SECRET enabled it
				// (services/poller/webhook_test.go checks signatures).
				resp, err := http.Post(base+"/webhook", "application/json", strings.NewReader("{}"))
				require.NoError(t, err)
				resp.Body.Close()
				assert.Equal(t, http.StatusUnauthorized, resp.StatusCode, "%s: unsigned POST /webhook", d.where)
			}
		})
	}
}
