package policy

//go:generate go run ./cmd/schema -o ../../docs/prloop.schema.json

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strconv"
	"strings"
)

// SchemaID is where the published schema lives.
const SchemaID = "https://github.com/prloop/prloop/blob/main/docs/prloop.schema.json"

// Schema is the JSON Schema of .github/prloop.yml, generated from the Go
// types (their yaml names, doc and jsonschema tags), so that editors
// complete the file and it cannot drift from what Decode reads.
// docs/prloop.schema.json is its output (go generate ./pkg/policy).
func Schema() ([]byte, error) {
	root := schemaOf(reflect.TypeFor[File]())
	root["$schema"] = "https://json-schema.org/draft/2020-12/schema"
	root["$id"] = SchemaID
	root["title"] = "prloop repository policy (" + Path + ")"
	root["required"] = []string{"version"}
	out, err := json.MarshalIndent(root, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("policy schema: %w", err)
	}
	return append(out, '\n'), nil
}

type object = map[string]any

var durationType = reflect.TypeFor[Duration]()

func schemaOf(t reflect.Type) object {
	switch {
	case t == durationType:
		return object{"type": "string", "pattern": `^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$`}
	case t == branchesType:
		return object{"type": "object", "additionalProperties": schemaOf(reflect.TypeFor[Section]())}
	}
	switch t.Kind() {
	case reflect.Pointer:
		return schemaOf(t.Elem())
	case reflect.Struct:
		props := object{}
		addFields(t, props)
		return object{"type": "object", "additionalProperties": false, "properties": props}
	case reflect.Slice:
		return object{"type": "array", "items": schemaOf(t.Elem())}
	case reflect.String:
		return object{"type": "string"}
	case reflect.Int:
		return object{"type": "integer"}
	case reflect.Bool:
		return object{"type": "boolean"}
	}
	panic(fmt.Sprintf("policy: no schema for %s", t))
}

func addFields(t reflect.Type, props object) {
	for i := range t.NumField() {
		f := t.Field(i)
		name, opts, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if opts == "inline" {
			addFields(f.Type, props)
			continue
		}
		if name == "" || name == "-" {
			continue
		}
		s := schemaOf(f.Type)
		if doc := f.Tag.Get("doc"); doc != "" {
			s["description"] = doc
		}
		applyTag(s, f.Tag.Get("jsonschema"))
		props[name] = s
	}
}

// applyTag reads a jsonschema tag: "enum=a|b" (on a list: its items) and
// "minimum=n".
func applyTag(s object, tag string) {
	for _, part := range strings.Split(tag, ",") {
		k, v, _ := strings.Cut(part, "=")
		switch k {
		case "enum":
			target := s
			if s["type"] == "array" {
				target = s["items"].(object)
			}
			var vals []any
			for _, e := range strings.Split(v, "|") {
				if n, err := strconv.Atoi(e); err == nil && target["type"] == "integer" {
					vals = append(vals, n)
				} else {
					vals = append(vals, e)
				}
			}
			target["enum"] = vals
		case "minimum":
			n, _ := strconv.Atoi(v)
			s["minimum"] = n
		}
	}
}
