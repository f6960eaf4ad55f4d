package ghsim_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The contract is GitHub's own OpenAPI description (dereferenced, 3.0.3).
// kin-openapi is not used: its dependencies are not in pkg/go.sum, and the
// subset of JSON Schema these responses use (type, nullable, required,
// properties, items, enum, allOf/anyOf/oneOf, date-time and uri formats)
// is small enough to check here.

var (
	specOnce sync.Once
	specDoc  map[string]any
	specErr  error
)

// specFile is GitHub's OpenAPI description cut down to the operations the
// simulator serves; testdata/README.md says where it comes from.
const specFile = "testdata/rest-openapi.json"

func loadSpec(t *testing.T) map[string]any {
	t.Helper()
	specOnce.Do(func() {
		b, err := os.ReadFile(specFile)
		if err != nil {
			specErr = fmt.Errorf("read the GitHub OpenAPI contract: %w", err)
			return
		}
		specErr = json.Unmarshal(b, &specDoc)
	})
	require.NoError(t, specErr, "load the OpenAPI contract")
	return specDoc
}

// responseSchema returns the JSON schema of the operation's response for
// status, or nil when GitHub documents that response without a body.
func responseSchema(t *testing.T, method, tmpl string, status int) map[string]any {
	t.Helper()
	doc := loadSpec(t)
	paths := doc["paths"].(map[string]any)
	item, ok := paths[tmpl].(map[string]any)
	require.True(t, ok, "path %s is not in the OpenAPI subset", tmpl)
	op, ok := item[strings.ToLower(method)].(map[string]any)
	require.True(t, ok, "%s %s is not in the OpenAPI subset", method, tmpl)
	resp, ok := op["responses"].(map[string]any)[strconv.Itoa(status)].(map[string]any)
	require.True(t, ok, "%s %s does not document status %d", method, tmpl, status)
	content, ok := resp["content"].(map[string]any)
	if !ok {
		return nil
	}
	mt, ok := content["application/json"].(map[string]any)
	if !ok {
		return nil
	}
	sch, _ := mt["schema"].(map[string]any)
	return sch
}

// checkContract validates a response against the operation's documented
// response: the status must be documented, and the body must satisfy the
// schema.
func checkContract(t *testing.T, method, tmpl string, status int, body []byte) {
	t.Helper()
	sch := responseSchema(t, method, tmpl, status)
	if sch == nil {
		if status == 204 || status == 304 || len(bytes.TrimSpace(body)) == 0 {
			require.Empty(t, bytes.TrimSpace(body), "%s %s %d: GitHub sends no body", method, tmpl, status)
			return
		}
		// Documented without a body, but GitHub answers errors with its
		// basic error object anyway.
		var e struct {
			Message *string `json:"message"`
		}
		require.NoError(t, json.Unmarshal(body, &e), "%s %s %d: %.200s", method, tmpl, status, body)
		require.NotNil(t, e.Message, "%s %s %d: error body without message: %.200s", method, tmpl, status, body)
		return
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var v any
	require.NoError(t, dec.Decode(&v), "%s %s %d: body is not JSON: %.200s", method, tmpl, status, body)
	errs := validateSchema(sch, v, "$")
	require.Empty(t, errs, "%s %s %d: body does not match GitHub's schema", method, tmpl, status)
}

func validateSchema(s map[string]any, v any, at string) []string {
	var errs []string
	if v == nil {
		if nullable(s) {
			return nil
		}
		if _, typed := s["type"]; typed {
			return []string{at + ": null, want " + fmt.Sprint(s["type"])}
		}
	}
	if all, ok := s["allOf"].([]any); ok {
		for _, sub := range all {
			errs = append(errs, validateSchema(sub.(map[string]any), v, at)...)
		}
	}
	for _, k := range []string{"anyOf", "oneOf"} {
		alts, ok := s[k].([]any)
		if !ok {
			continue
		}
		var best []string
		matched := false
		for _, sub := range alts {
			e := validateSchema(sub.(map[string]any), v, at)
			if len(e) == 0 {
				matched = true
				break
			}
			if best == nil || len(e) < len(best) {
				best = e
			}
		}
		if !matched {
			errs = append(errs, fmt.Sprintf("%s: matches no %s alternative; closest: %v", at, k, best))
		}
	}
	if v == nil {
		return errs
	}
	switch s["type"] {
	case "object":
		m, ok := v.(map[string]any)
		if !ok {
			return append(errs, fmt.Sprintf("%s: %T, want object", at, v))
		}
		req, _ := s["required"].([]any)
		for _, r := range req {
			if _, ok := m[r.(string)]; !ok {
				errs = append(errs, at+": missing required "+r.(string))
			}
		}
		props, _ := s["properties"].(map[string]any)
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			if ps, ok := props[k].(map[string]any); ok {
				errs = append(errs, validateSchema(ps, m[k], at+"."+k)...)
			} else if ap, ok := s["additionalProperties"].(map[string]any); ok {
				errs = append(errs, validateSchema(ap, m[k], at+"."+k)...)
			}
		}
	case "array":
		a, ok := v.([]any)
		if !ok {
			return append(errs, fmt.Sprintf("%s: %T, want array", at, v))
		}
		if items, ok := s["items"].(map[string]any); ok {
			for i, x := range a {
				errs = append(errs, validateSchema(items, x, fmt.Sprintf("%s[%d]", at, i))...)
			}
		}
	case "string":
		str, ok := v.(string)
		if !ok {
			return append(errs, fmt.Sprintf("%s: %T, want string", at, v))
		}
		switch s["format"] {
		case "date-time":
			if _, err := time.Parse(time.RFC3339, str); err != nil {
				errs = append(errs, fmt.Sprintf("%s: %q is not date-time", at, str))
			}
		case "uri":
			if u, err := url.Parse(str); err != nil || u.Scheme == "" {
				errs = append(errs, fmt.Sprintf("%s: %q is not a uri", at, str))
			}
		}
	case "integer":
		n, ok := v.(json.Number)
		if !ok {
			return append(errs, fmt.Sprintf("%s: %T, want integer", at, v))
		}
		if _, err := n.Int64(); err != nil {
			errs = append(errs, fmt.Sprintf("%s: %s is not an integer", at, n))
		}
	case "number":
		if _, ok := v.(json.Number); !ok {
			return append(errs, fmt.Sprintf("%s: %T, want number", at, v))
		}
	case "boolean":
		if _, ok := v.(bool); !ok {
			return append(errs, fmt.Sprintf("%s: %T, want boolean", at, v))
		}
	}
	if enum, ok := s["enum"].([]any); ok {
		found := false
		for _, e := range enum {
			if fmt.Sprint(e) == fmt.Sprint(v) {
				found = true
			}
		}
		if !found {
			errs = append(errs, fmt.Sprintf("%s: %v not in enum %v", at, v, enum))
		}
	}
	return errs
}

func nullable(s map[string]any) bool {
	if b, _ := s["nullable"].(bool); b {
		return true
	}
	for _, k := range []string{"anyOf", "oneOf", "allOf"} {
		if alts, ok := s[k].([]any); ok {
			for _, a := range alts {
				if m, ok := a.(map[string]any); ok && nullable(m) {
					return true
				}
			}
		}
	}
	return false
}

// TestValidator_RejectsBadBodies guards the validator itself: a contract
// check that cannot fail proves nothing.
func TestValidator_RejectsBadBodies(t *testing.T) {
	t.Parallel()
	sch := responseSchema(t, "POST", "/repos/{owner}/{repo}/issues/{issue_number}/reactions", 201)
	good := `{"id":1,"node_id":"x","user":null,"content":"+1","created_at":"2026-01-01T00:00:00Z"}`
	tests := []struct {
		name, body string
		ok         bool
	}{
		{name: "valid", body: good, ok: true},
		{name: "missing created_at", body: `{"id":1,"node_id":"x","user":null,"content":"+1"}`},
		{name: "bad enum", body: strings.Replace(good, `"+1"`, `"thumbs"`, 1)},
		{name: "string id", body: strings.Replace(good, `"id":1`, `"id":"1"`, 1)},
		{name: "bad time", body: strings.Replace(good, `2026-01-01T00:00:00Z`, `yesterday`, 1)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dec := json.NewDecoder(strings.NewReader(tt.body))
			dec.UseNumber()
			var v any
			require.NoError(t, dec.Decode(&v))
			errs := validateSchema(sch, v, "$")
			if tt.ok {
				require.Empty(t, errs)
			} else {
				require.NotEmpty(t, errs)
			}
		})
	}
}
