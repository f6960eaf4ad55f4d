package main

import (
	"cmp"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
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

	"github.com/distribution/reference"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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
	"github.com/prloop/prloop/pkg/natsx/natstest"
	"github.com/prloop/prloop/pkg/proctest"
	"github.com/prloop/prloop/services/escalator"
	"github.com/prloop/prloop/services/feedback"
	"github.com/prloop/prloop/services/merger"
	"github.com/prloop/prloop/services/poller"
)

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
			for k, v := range map[string]string{"PRLOOP_NATS_URL": conn.URL, "PRLOOP_STREAM_REPLICAS": "1", "PRLOOP_HTTP_ADDR": "127.0.0.1:0",
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
