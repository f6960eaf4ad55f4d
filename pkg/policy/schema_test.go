package policy

import (
	"encoding/json"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"
)

// TestSchema_PublishedFileIsCurrent fails when docs/prloop.schema.json no
// longer matches the Go types: run go generate ./pkg/policy.
func TestSchema_PublishedFileIsCurrent(t *testing.T) {
	t.Parallel()
	want, err := Schema()
	require.NoError(t, err)
	got, err := os.ReadFile("../../docs/prloop.schema.json")
	require.NoError(t, err)
	assert.Equal(t, string(want), string(got), "docs/prloop.schema.json is stale: go generate ./pkg/policy")
}

// TestSchema_CoversEveryKeyOfTheExample walks the issue's example file
// against the schema: every key it uses is a property the schema names,
// so an editor completes each of them.
func TestSchema_CoversEveryKeyOfTheExample(t *testing.T) {
	t.Parallel()
	b, err := Schema()
	require.NoError(t, err)
	var schema map[string]any
	require.NoError(t, json.Unmarshal(b, &schema))
	var doc map[string]any
	require.NoError(t, yaml.Unmarshal([]byte(issueExample), &doc))
	var walk func(path string, v any, s map[string]any)
	walk = func(path string, v any, s map[string]any) {
		m, ok := v.(map[string]any)
		if !ok {
			return
		}
		props, _ := s["properties"].(map[string]any)
		for k, sub := range m {
			ps, ok := props[k].(map[string]any)
			if !ok {
				if add, isMap := s["additionalProperties"].(map[string]any); isMap {
					ps = add
				} else {
					t.Errorf("%s.%s: not in the schema", path, k)
					continue
				}
			}
			walk(path+"."+k, sub, ps)
		}
	}
	walk("", doc, schema)
	assert.Equal(t, []any{"version"}, schema["required"])
}
