package main

// The Helm chart (deploy/helm/prloop) is checked with Helm's own library as
// deploy_test.go checks deploy/k8s: with its defaults it renders the
// kustomization's objects (the same containers, variables, security
// contexts, probes and NATS configuration, but for Helm's labels), and
// under other values every rendered variant passes the same checks
// (checkK8s). Only the chart loader, the template engine and the linter are
// used, not pkg/action: action.Install's dry run and action.Lint run these
// same functions, and pkg/action would add about a hundred modules
// (registries, kubectl) to this module's tests.

import (
	"maps"
	"path/filepath"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	"helm.sh/helm/v3/pkg/lint"
	"helm.sh/helm/v3/pkg/lint/support"
	"helm.sh/helm/v3/pkg/releaseutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/prloop/prloop/pkg/proctest"
)

const (
	helmChart     = "deploy/helm/prloop"
	helmNamespace = "prloop" // deploy/k8s's, so the objects compare
)

// helmOnly are the labels and pod annotations the chart adds to
// deploy/k8s's objects: Helm's bookkeeping, and the ConfigMaps' checksum
// that restarts the pods on helm upgrade.
var (
	helmOnlyLabels      = []string{"helm.sh/chart", "app.kubernetes.io/managed-by", "app.kubernetes.io/instance"}
	helmOnlyAnnotations = []string{"checksum/config"}
)

// renderHelm renders the chart as helm install --dry-run does: values.yaml
// under values, release prloop in the namespace prloop.
func renderHelm(t *testing.T, root string, values map[string]any) []k8sObject {
	t.Helper()
	chrt, err := loader.Load(filepath.Join(root, helmChart))
	require.NoError(t, err, "helm cannot load %s", helmChart)
	vals, err := chartutil.ToRenderValues(chrt, values,
		chartutil.ReleaseOptions{Name: "prloop", Namespace: helmNamespace, Revision: 1, IsInstall: true}, chartutil.DefaultCapabilities)
	require.NoError(t, err, "%s: values", helmChart)
	files, err := engine.Render(chrt, vals)
	require.NoError(t, err, "helm install would fail to render %s", helmChart)
	var objs []k8sObject
	for _, name := range slices.Sorted(maps.Keys(files)) {
		for _, doc := range releaseutil.SplitManifests(files[name]) {
			var head struct {
				metav1.TypeMeta
				Metadata metav1.ObjectMeta `json:"metadata"`
			}
			require.NoError(t, yaml.Unmarshal([]byte(doc), &head), "%s", name)
			if head.Kind == "" { // a template that renders nothing here
				continue
			}
			objs = append(objs, k8sObject{head.Kind, head.Metadata.Name, []byte(doc)})
		}
	}
	return objs
}

// comparable returns an object as plain data without what only Helm adds.
func comparable(t *testing.T, o k8sObject) map[string]any {
	t.Helper()
	var m map[string]any
	require.NoError(t, yaml.Unmarshal(o.yaml, &m), "%s %s", o.kind, o.name)
	del := func(path []string, keys []string) {
		cur := m
		for _, p := range path {
			next, ok := cur[p].(map[string]any)
			if !ok {
				return
			}
			cur = next
		}
		for _, k := range keys {
			delete(cur, k)
		}
	}
	del([]string{"metadata", "labels"}, helmOnlyLabels)
	del([]string{"spec", "template", "metadata", "annotations"}, helmOnlyAnnotations)
	return m
}

// TestDeployHelm_DefaultsRenderDeployK8s: with its defaults (local images
// tagged dev, as the kustomization names them, and the namespace created)
// the chart renders deploy/k8s's objects, field for field, but for Helm's
// labels and the checksum annotation. So every check of
// TestDeployK8s_VariablesPortsSecurityAndNATS, TestDeployConfig_* and
// TestNATSAuth_* on deploy/k8s holds for the chart too.
func TestDeployHelm_DefaultsRenderDeployK8s(t *testing.T) {
	t.Parallel()
	root := proctest.Root(t)
	kustomized := map[string]map[string]any{}
	for _, o := range kustomize(t, filepath.Join(root, k8sDir)) {
		kustomized[o.kind+"/"+o.name] = comparable(t, o)
	}
	helm := map[string]map[string]any{}
	for _, o := range renderHelm(t, root, map[string]any{
		"namespace": map[string]any{"create": true},
		"image":     map[string]any{"registry": "", "tag": "dev"},
	}) {
		key := o.kind + "/" + o.name
		require.NotContains(t, helm, key, "%s renders %s twice", helmChart, key)
		helm[key] = comparable(t, o)
	}
	assert.ElementsMatch(t, slices.Sorted(maps.Keys(kustomized)), slices.Sorted(maps.Keys(helm)), "%s and %s render different objects", helmChart, k8sDir)
	for key, want := range kustomized {
		if got, ok := helm[key]; ok {
			assert.Equal(t, want, got, "%s: %s differs from %s's", helmChart, key, k8sDir)
		}
	}
}

// TestDeployHelm_Lint runs helm lint's rules on the chart, with its
// defaults and with every value the other tests set.
func TestDeployHelm_Lint(t *testing.T) {
	t.Parallel()
	root := proctest.Root(t)
	// As shipped (no namespace of its own), and under each test's values.
	for _, tc := range append(helmValueCases(), helmValueCase{name: "values.yaml alone"}) {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			l := lint.AllWithKubeVersion(filepath.Join(root, helmChart), tc.values, helmNamespace, nil)
			for _, m := range l.Messages {
				assert.Less(t, m.Severity, support.WarningSev, "helm lint: %s", m)
				t.Log("helm lint:", m)
			}
		})
	}
}

// helmValueCase is a way to install the chart and the images it must run.
type helmValueCase struct {
	name   string
	values map[string]any
	images map[string]string // container: image
	// check looks at what else these values must change.
	check func(t *testing.T, b *k8sBase)
}

func helmValueCases() []helmValueCase {
	images := func(prefix, tag string) map[string]string {
		out := map[string]string{}
		for _, s := range []string{"poller", "feedback", "merger", "escalator"} {
			out[s] = prefix + "prloop-" + s + ":" + tag
		}
		return out
	}
	withNS := func(v map[string]any) map[string]any {
		v["namespace"] = map[string]any{"create": true}
		return v
	}
	return []helmValueCase{
		{
			name:   "defaults: the released images",
			values: withNS(map[string]any{}),
			images: images("ghcr.io/prloop/", "0.1.0"),
		},
		{
			name: "own registry and tag, five NATS servers, more pollers",
			values: withNS(map[string]any{
				"image":  map[string]any{"registry": "registry.example.com/team", "tag": "v1.2.3"},
				"nats":   map[string]any{"replicas": 5},
				"poller": map[string]any{"replicas": 3},
			}),
			images: images("registry.example.com/team/", "v1.2.3"),
			check: func(t *testing.T, b *k8sBase) {
				// checkK8s holds the routes and PRLOOP_STREAM_REPLICAS to
				// the StatefulSet's replicas.
				require.Len(t, b.sts, 1)
				assert.EqualValues(t, 5, *b.sts[0].Spec.Replicas)
				i := slices.IndexFunc(b.deploys, func(d k8sDeployment) bool { return d.c.Name == "poller" })
				assert.EqualValues(t, 3, *b.deploys[i].Spec.Replicas)
			},
		},
		{
			name: "GitHub App and settings",
			values: withNS(map[string]any{
				"githubApp": map[string]any{"id": "123456", "installationId": "7890"},
				"config": map[string]any{
					"identity": map[string]any{"PRLOOP_GITHUB_LOGIN": "prloop-bot[bot]"},
					"poller":   map[string]any{"PRLOOP_REPOS": "acme/widgets"},
				},
				"feedback": map[string]any{"image": "registry.example.com/prloop-feedback-claude:1"},
			}),
			images: func() map[string]string {
				m := images("ghcr.io/prloop/", "0.1.0")
				m["feedback"] = "registry.example.com/prloop-feedback-claude:1"
				return m
			}(),
			check: func(t *testing.T, b *k8sBase) {
				common := b.configMaps["prloop-common"].Data
				assert.Equal(t, "123456", common["PRLOOP_GITHUB_APP_ID"])
				assert.Equal(t, "7890", common["PRLOOP_GITHUB_APP_INSTALLATION_ID"])
				// Where every Deployment mounts the Secret's key.
				for _, d := range b.deploys {
					name, mount := mountFor(d.c, common["PRLOOP_GITHUB_APP_PRIVATE_KEY_PATH"])
					assert.Equal(t, "github-app", name, "%s: the App's key is not on the github-app volume", d.where)
					assert.Equal(t, "/run/secrets/prloop/github-app", mount, d.where)
				}
				assert.Equal(t, "prloop-bot[bot]", b.configMaps["prloop-identity"].Data["PRLOOP_GITHUB_LOGIN"])
				assert.Equal(t, "acme/widgets", b.configMaps["prloop-poller"].Data["PRLOOP_REPOS"])
			},
		},
	}
}

// TestDeployHelm_ValuesKeepTheChecks renders the chart under other values
// and runs deploy/k8s's checks on each: security contexts, Pod Security,
// probes, Services and the NATS cluster; the variables
// (checkContainer) are each a setting of the service's Config.
func TestDeployHelm_ValuesKeepTheChecks(t *testing.T) {
	t.Parallel()
	root := proctest.Root(t)
	df := readDockerfile(t, root)
	for _, tc := range helmValueCases() {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := readK8s(t, root, df, helmChart, renderHelm(t, root, tc.values), tc.images)
			checkK8s(t, b)
			if tc.check != nil {
				tc.check(t, b)
			}
		})
	}
}

// TestDeployHelm_RefusesWhatCannotWork: the chart fails at render time
// rather than deploy a JetStream cluster without a majority after a loss,
// or a credential in a ConfigMap.
func TestDeployHelm_RefusesWhatCannotWork(t *testing.T) {
	t.Parallel()
	root := proctest.Root(t)
	chrt, err := loader.Load(filepath.Join(root, helmChart))
	require.NoError(t, err)
	tests := []struct {
		name   string
		values map[string]any
		want   string
	}{
		{name: "one NATS server", values: map[string]any{"nats": map[string]any{"replicas": 1}}, want: "nats.replicas: an odd number, 3 or more"},
		{name: "two NATS servers", values: map[string]any{"nats": map[string]any{"replicas": 2}}, want: "nats.replicas: an odd number, 3 or more"},
		{name: "four NATS servers", values: map[string]any{"nats": map[string]any{"replicas": 4}}, want: "nats.replicas: an odd number, 3 or more"},
		{name: "token in a ConfigMap", values: map[string]any{"config": map[string]any{"common": map[string]any{"GITHUB_TOKEN": "ghp_x"}}}, want: "GITHUB_TOKEN is a credential"},
		{name: "webhook secret in a ConfigMap", values: map[string]any{"config": map[string]any{"poller": map[string]any{"PRLOOP_WEBHOOK_SECRET": "s"}}}, want: "PRLOOP_WEBHOOK_SECRET is a credential"},
		{name: "App without its installation", values: map[string]any{"githubApp": map[string]any{"id": "1"}}, want: "githubApp.installationId"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			vals, err := chartutil.ToRenderValues(chrt, tt.values,
				chartutil.ReleaseOptions{Name: "prloop", Namespace: helmNamespace, IsInstall: true}, chartutil.DefaultCapabilities)
			require.NoError(t, err)
			_, err = engine.Render(chrt, vals)
			assert.ErrorContains(t, err, tt.want)
		})
	}
}
