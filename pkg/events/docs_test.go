package events

import (
	"flag"
	"fmt"
	"go/ast"
	"go/constant"
	"go/parser"
	"go/token"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/prloop/prloop/pkg/ghref"
	"github.com/prloop/prloop/pkg/golden"
)

// update rewrites the generated reference instead of comparing with it:
// go generate ./pkg/events (generate.go) passes it.
var update = flag.Bool("update", false, "rewrite docs/events.md from pkg/events")

// eventsDoc is where the generated reference lives, from this package.
const eventsDoc = "../../docs/events.md"

// TestDocs_EventsReferenceIsCurrent: docs/events.md is what pkg/events
// says (types, subjects, publishers, data fields and their comments, the
// reason codes). Change types.go or publishers.go and run
// 'go generate ./pkg/events' to refresh it.
func TestDocs_EventsReferenceIsCurrent(t *testing.T) {
	golden.Check(t, eventsDoc, renderEventsDoc(t), *update, "go generate ./pkg/events")
}

// sourceDocs are the doc comments of the package's files: each type's,
// each field's (by "Type.Field") and each Reason constant's.
type sourceDocs struct {
	types  map[string]string
	fields map[string]string
	// reasons are the Reason constants' values and comments, in order.
	reasons [][2]string
}

func readSourceDocs(t *testing.T) sourceDocs {
	t.Helper()
	fset := token.NewFileSet()
	files, err := filepath.Glob("*.go")
	require.NoError(t, err)
	d := sourceDocs{types: map[string]string{}, fields: map[string]string{}}
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.ParseComments)
		require.NoError(t, err)
		d.add(f)
	}
	return d
}

// add reads one file's doc comments.
func (d *sourceDocs) add(f *ast.File) {
	for _, decl := range f.Decls {
		gd, ok := decl.(*ast.GenDecl)
		if !ok {
			continue
		}
		for _, spec := range gd.Specs {
			switch s := spec.(type) {
			case *ast.TypeSpec:
				doc := gd.Doc
				if s.Doc != nil {
					doc = s.Doc
				}
				d.types[s.Name.Name] = text(doc)
				st, ok := s.Type.(*ast.StructType)
				if !ok {
					continue
				}
				for _, fl := range st.Fields.List {
					c := text(fl.Doc)
					if c == "" {
						c = text(fl.Comment)
					}
					for _, n := range fl.Names {
						d.fields[s.Name.Name+"."+n.Name] = c
					}
				}
			case *ast.ValueSpec:
				if id, ok := s.Type.(*ast.Ident); ok && id.Name == "Reason" {
					lit := s.Values[0].(*ast.BasicLit)
					d.reasons = append(d.reasons, [2]string{constant.StringVal(constant.MakeFromLiteral(lit.Value, lit.Kind, 0)), text(s.Doc)})
				}
			}
		}
	}
}

// text is a comment as one paragraph, Markdown-safe in a table cell.
func text(g *ast.CommentGroup) string {
	if g == nil {
		return ""
	}
	return strings.ReplaceAll(strings.Join(strings.Fields(g.Text()), " "), "|", `\|`)
}

func renderEventsDoc(t *testing.T) string {
	t.Helper()
	src := readSourceDocs(t)
	var b strings.Builder
	b.WriteString(`# Events reference

<!-- Generated from pkg/events (the registry in registry.go and the data structs) by 'go generate ./pkg/events'; TestDocs_EventsReferenceIsCurrent fails when it is stale. Do not edit. -->

Every event is a CloudEvents 1.0 event in structured mode on NATS JetStream
(stream ` + "`" + StreamName + "`" + `): the message's body is the whole event as JSON, its
` + "`Content-Type`" + ` is ` + "`" + ContentType + "`" + `, and its id (also the message's
` + "`Nats-Msg-Id`" + `) is derived from what the event is about, so a repeated
publish is dropped. Events travel on

    pr.<owner>.<repo>.<number>.<Type>

with owner and repository folded to lower case and every byte outside
` + "`[a-z0-9_-]`" + ` escaped as ` + "`=`" + ` and two hex digits (` + "`socket.io`" + ` is
` + "`socket=2eio`" + `): ` + "`pr.*.*.*.PRMerged`" + ` selects a kind, ` + "`pr.acme.widgets.>`" + ` one
repository. "Published by" is the NATS user allowed to publish the type
(` + "`deploy/nats/nats.conf`" + ` is checked against the same table); ` + "`cli`" + ` is
the operator's ` + "`prloop watch`" + ` and ` + "`prloop open`" + `. The package documentation
of ` + "`pkg/events`" + ` (` + "`doc.go`" + `) says more: event ids, ordering, retention.

| type | published by | what it says |
|---|---|---|
`)
	for _, r := range registry {
		fmt.Fprintf(&b, "| [`%s`](#%s) | %s | %s |\n", r.Type, strings.ToLower(string(r.Type)), strings.Join(publishers(r.Type), ", "), r.Doc)
	}
	for _, typ := range Types {
		d, err := newData(typ)
		require.NoError(t, err)
		rt := reflect.TypeOf(d).Elem()
		fmt.Fprintf(&b, "\n## %s\n\n%s\n\nSubject `pr.<owner>.<repo>.<number>.%s`, published by %s.\n\n| field | type | meaning |\n|---|---|---|\n",
			typ, src.types[rt.Name()], typ, strings.Join(publishers(typ), ", "))
		for _, row := range fieldRows(rt, src) {
			b.WriteString(row)
		}
	}
	b.WriteString("\n## Reason codes\n\nThe `reason` of `ReviewTimeout`, `PRMergeFailed`, `PREscalationRequested` and `PREscalated`.\n\n| reason | meaning |\n|---|---|\n")
	for _, r := range src.reasons {
		fmt.Fprintf(&b, "| `%s` | %s |\n", r[0], r[1])
	}
	return b.String()
}

// publishers are the publishers of typ, from PublishedBy.
func publishers(typ Type) []string {
	var out []string
	for _, p := range Publishers() {
		for _, t := range PublishedBy(p) {
			if t == typ {
				out = append(out, p)
			}
		}
	}
	return out
}

// wellKnown are the meanings of the fixed data fields (doc.go) where the
// field has no comment of its own.
var wellKnown = map[string]string{
	"pr":       "the pull request: owner, repo, number, and its html url when the publisher knows it",
	"head_sha": "the head commit the event is about",
	"reason":   "a [reason code](#reason-codes)",
}

// fieldRows are the table rows of a data struct's JSON fields, the
// embedded Base's first.
func fieldRows(rt reflect.Type, src sourceDocs) []string {
	var rows []string
	for i := range rt.NumField() {
		f := rt.Field(i)
		if f.Anonymous {
			rows = append(rows, fieldRows(f.Type, src)...)
			continue
		}
		tag := f.Tag.Get("json")
		name, opts, _ := strings.Cut(tag, ",")
		if name == "-" || !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		meaning := src.fields[rt.Name()+"."+f.Name]
		if meaning == "" {
			meaning = wellKnown[name]
		}
		if strings.Contains(opts, "omitempty") {
			meaning = strings.TrimSpace(meaning + " (omitted when empty)")
		}
		rows = append(rows, fmt.Sprintf("| `%s` | %s | %s |\n", name, jsonType(f.Type), meaning))
	}
	return rows
}

// jsonType names a Go type as its JSON reads.
func jsonType(t reflect.Type) string {
	switch {
	case t == reflect.TypeOf(time.Time{}):
		return "string (RFC 3339 time)"
	case t == reflect.TypeOf(time.Duration(0)):
		return "integer (nanoseconds)"
	case t == reflect.TypeOf(ghref.PR{}):
		return "object (owner, repo, number, url)"
	}
	switch t.Kind() {
	case reflect.Pointer:
		return jsonType(t.Elem())
	case reflect.String:
		return "string"
	case reflect.Bool:
		return "boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64, reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "integer"
	case reflect.Float32, reflect.Float64:
		return "number"
	case reflect.Slice, reflect.Array:
		return "array of " + jsonType(t.Elem())
	case reflect.Map:
		return "object of " + jsonType(t.Elem())
	case reflect.Struct:
		var names []string
		for i := range t.NumField() {
			if n, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ","); n != "" && n != "-" {
				names = append(names, n)
			}
		}
		return "object (" + strings.Join(names, ", ") + ")"
	}
	return t.Kind().String()
}
