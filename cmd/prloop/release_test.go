package main

// The release (.goreleaser.yaml, .github/workflows/release.yml) against the
// deployment: goreleaser builds every binary a deployment runs, and its
// images are the Dockerfile's, built as docker-compose.yml builds them and
// named as the Helm chart pulls them. `goreleaser check` (in .ci/run)
// validates the file with goreleaser's own code; this test checks what
// goreleaser cannot know.

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	yamlv3 "go.yaml.in/yaml/v3"
	"sigs.k8s.io/yaml"

	"github.com/prloop/prloop/pkg/proctest"
)

// goreleaserConfig is the part of .goreleaser.yaml the test reads.
type goreleaserConfig struct {
	Builds   []goreleaserBuild `json:"builds"`
	Archives []struct {
		IDs   []string `json:"ids"`
		Files []string `json:"files"`
	} `json:"archives"`
	DockersV2 []goreleaserImage `json:"dockers_v2"`
}

// readGoreleaser reads .goreleaser.yaml.
func readGoreleaser(t *testing.T, root string) goreleaserConfig {
	t.Helper()
	text, err := os.ReadFile(filepath.Join(root, ".goreleaser.yaml"))
	require.NoError(t, err)
	var cfg goreleaserConfig
	require.NoError(t, yaml.Unmarshal(text, &cfg), ".goreleaser.yaml")
	return cfg
}

type goreleaserBuild struct {
	ID      string   `json:"id"`
	Main    string   `json:"main"`
	Binary  string   `json:"binary"`
	Goos    []string `json:"goos"`
	Goarch  []string `json:"goarch"`
	Ldflags []string `json:"ldflags"`
	Env     []string `json:"env"`
}

type goreleaserImage struct {
	ID         string            `json:"id"`
	IDs        []string          `json:"ids"`
	Dockerfile string            `json:"dockerfile"`
	Images     []string          `json:"images"`
	Tags       []string          `json:"tags"`
	Platforms  []string          `json:"platforms"`
	BuildArgs  map[string]string `json:"build_args"`
	Flags      []string          `json:"flags"`
}

// TestRelease_GoreleaserBuildsWhatTheDeploymentRuns: a build for each
// binary docker-compose.yml builds an image of (linux amd64 and arm64, the
// all-in-one prloop for darwin too), static and stamped with its version;
// an image of each, made by the Dockerfile's target and SERVICE that
// compose uses, from the binary goreleaser built, named as the Helm chart
// pulls it, for both platforms.
func TestRelease_GoreleaserBuildsWhatTheDeploymentRuns(t *testing.T) {
	t.Parallel()
	root := proctest.Root(t)
	cfg := readGoreleaser(t, root)
	df := readDockerfile(t, root)
	_, cases := composeCases(t, root, df, composePath)

	// The chart's default registry: values.yaml's image.registry.
	values, err := os.ReadFile(filepath.Join(root, helmChart, "values.yaml"))
	require.NoError(t, err)
	var hv struct {
		Image struct{ Registry string } `json:"image"`
	}
	require.NoError(t, yaml.Unmarshal(values, &hv))

	linux := []string{"linux/amd64", "linux/arm64"}
	for _, tc := range cases {
		service := tc.svc.Build.Args.ToMapping()["SERVICE"]
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			bi := slices.IndexFunc(cfg.Builds, func(b goreleaserBuild) bool { return b.Main == tc.role.pkg })
			require.GreaterOrEqual(t, bi, 0, ".goreleaser.yaml: no build of %s (%s)", tc.role.pkg, tc.where)
			b := cfg.Builds[bi]
			assert.Contains(t, b.Env, "CGO_ENABLED=0", "build %s: static, as the Dockerfile builds (distroless has no libc)", b.ID)
			for _, p := range linux {
				goos, goarch, _ := strings.Cut(p, "/")
				assert.True(t, slices.Contains(b.Goos, goos) && slices.Contains(b.Goarch, goarch), "build %s: %s", b.ID, p)
			}
			if service == "prloop" {
				assert.Contains(t, b.Goos, "darwin", "build %s: prloop runs on a Mac too", b.ID)
				assert.Contains(t, strings.Join(b.Ldflags, " "), "-X main.version=", "build %s: prloop version prints the release", b.ID)
			}

			di := slices.IndexFunc(cfg.DockersV2, func(d goreleaserImage) bool { return slices.Equal(d.IDs, []string{b.ID}) })
			require.GreaterOrEqual(t, di, 0, ".goreleaser.yaml: no image of build %s", b.ID)
			d := cfg.DockersV2[di]
			assert.Equal(t, "Dockerfile", d.Dockerfile, "dockers_v2 %s: the Dockerfile compose builds with", d.ID)
			assert.Equal(t, service, d.BuildArgs["SERVICE"], "dockers_v2 %s: SERVICE as %s", d.ID, tc.where)
			assert.Contains(t, d.Flags, "--target="+tc.svc.Build.Target, "dockers_v2 %s: the target of %s", d.ID, tc.where)
			assert.Equal(t, b.Binary, d.BuildArgs["BINARY"], "dockers_v2 %s: BINARY is build %s's binary", d.ID, b.ID)
			from := d.BuildArgs["BINARY_FROM"]
			require.Contains(t, df, from, "dockers_v2 %s: BINARY_FROM=%s is no stage of the Dockerfile", d.ID, from)
			assert.Contains(t, df[from].copies, "${TARGETPLATFORM}/${BINARY}", "Dockerfile stage %s: copy goreleaser's binary of the platform", from)
			assert.Subset(t, d.Platforms, linux, "dockers_v2 %s", d.ID)
			want := hv.Image.Registry + "/" + imageRepo(t, tc.svc.Image)
			assert.Equal(t, []string{want}, d.Images, "dockers_v2 %s: the image %s pulls (%s's image.registry + compose's name)", d.ID, helmChart, helmChart)
			// The chart's image.tag defaults to its appVersion: a version
			// without the v.
			assert.Contains(t, d.Tags, "{{ .Version }}", "dockers_v2 %s: tag the version the chart's appVersion names", d.ID)
		})
	}
	require.Len(t, cfg.Archives, 1)
	assert.Subset(t, cfg.Archives[0].Files, []string{"LICENSE", "README.md", "CHANGELOG.md"})
}

var goreleaserRunRE = regexp.MustCompile(`github\.com/goreleaser/goreleaser/v2@(v[0-9][0-9.]*)`)

// TestRelease_WorkflowRunsTheCheckedGoreleaser: the release workflow is a
// GitHub Actions file this machine cannot run; it parses, runs on a tag v*,
// may write the release and the images, and runs goreleaser release at the
// version whose `goreleaser check` .ci/run passes.
func TestRelease_WorkflowRunsTheCheckedGoreleaser(t *testing.T) {
	t.Parallel()
	root := proctest.Root(t)
	text, err := os.ReadFile(filepath.Join(root, ".github/workflows/release.yml"))
	require.NoError(t, err)
	var wf struct {
		On struct {
			Push struct {
				Tags []string `yaml:"tags"`
			} `yaml:"push"`
		} `yaml:"on"`
		Permissions map[string]string `yaml:"permissions"`
		Jobs        map[string]struct {
			Steps []struct {
				Uses string            `yaml:"uses"`
				With map[string]any    `yaml:"with"`
				Env  map[string]string `yaml:"env"`
			} `yaml:"steps"`
		} `yaml:"jobs"`
	}
	// YAML 1.2, as GitHub reads it: "on" is a key, not true.
	require.NoError(t, yamlv3.Unmarshal(text, &wf), "release.yml")
	assert.Equal(t, []string{"v*"}, wf.On.Push.Tags, "release.yml: on a tag v*")
	assert.Equal(t, map[string]string{"contents": "write", "packages": "write"}, wf.Permissions, "release.yml: the release and ghcr.io, nothing more")

	ci, err := os.ReadFile(filepath.Join(root, ".ci/run"))
	require.NoError(t, err)
	m := goreleaserRunRE.FindSubmatch(ci)
	require.NotNil(t, m, ".ci/run does not run goreleaser check")
	var ran []string
	for _, job := range wf.Jobs {
		for _, s := range job.Steps {
			if strings.HasPrefix(s.Uses, "goreleaser/goreleaser-action@") {
				ran = append(ran, fmt.Sprint(s.With["version"]))
				assert.Contains(t, fmt.Sprint(s.With["args"]), "release", "release.yml: goreleaser release")
				assert.Equal(t, "${{ secrets.GITHUB_TOKEN }}", s.Env["GITHUB_TOKEN"], "release.yml: the workflow's own token")
			}
		}
	}
	assert.Equal(t, []string{string(m[1])}, ran, "release.yml: run the goreleaser whose check .ci/run passes")
}

// TestRelease_VersionStampedByLdflags builds prloop with the release's
// ldflags (the prloop build's in .goreleaser.yaml, for the tag v9.8.7) and
// runs `prloop version`: the tag is what it prints. The release's other
// flag, -trimpath, and CGO_ENABLED=0 only change file paths and the C
// toolchain's part, and would rebuild every package instead of linking
// from the build cache, so they are left out.
func TestRelease_VersionStampedByLdflags(t *testing.T) {
	t.Parallel()
	root := proctest.Root(t)
	cfg := readGoreleaser(t, root)
	i := slices.IndexFunc(cfg.Builds, func(b goreleaserBuild) bool { return b.Main == "./cmd/prloop" })
	require.GreaterOrEqual(t, i, 0, ".goreleaser.yaml: no build of ./cmd/prloop")
	const tag = "v9.8.7"
	ldflags := strings.NewReplacer("{{ .Tag }}", tag, "{{.Tag}}", tag).Replace(strings.Join(cfg.Builds[i].Ldflags, " "))
	require.NotContains(t, ldflags, "{{", "a template this test does not know: %s", ldflags)
	bin := filepath.Join(t.TempDir(), "prloop")
	build := exec.CommandContext(t.Context(), "go", "build", "-ldflags", ldflags, "-o", bin, "./cmd/prloop")
	build.Dir = root
	out, err := build.CombinedOutput()
	require.NoError(t, err, "go build -ldflags %q:\n%s", ldflags, out)
	out, err = exec.CommandContext(t.Context(), bin, "version").CombinedOutput()
	require.NoError(t, err, "%s", out)
	assert.Equal(t, "prloop "+tag+"\n", string(out))
}
