package policy

import (
	"errors"
	"fmt"
	"path"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Problem is one thing wrong with a policy file, where a person can find
// it: ".github/prloop.yml:4: unknown key "reviwers" (did you mean
// "reviewers"?)".
type Problem struct {
	// File is the file's name as shown to people (Path, or the local file
	// prloop policy check reads).
	File string
	// Line is 1-based; 0 when the problem has no place (an empty file).
	Line int
	// Key is the dotted key the problem is about ("review.timeout"), or "".
	Key string
	// Msg says what is wrong and, where it can, what would be right.
	Msg string
}

// Error is the problem in file:line: form.
func (p Problem) Error() string {
	if p.Line > 0 {
		return fmt.Sprintf("%s:%d: %s", p.File, p.Line, p.Msg)
	}
	return fmt.Sprintf("%s: %s", p.File, p.Msg)
}

// Invalid is every problem found in a file, in the order of the file. A
// repository whose policy is Invalid fails closed: no merge and no agent
// run until the file is fixed.
type Invalid struct {
	Problems []Problem
}

// Error is the first problem, and how many more there are: one line, for
// a status line.
func (e *Invalid) Error() string {
	if len(e.Problems) == 0 {
		return "invalid policy"
	}
	s := e.Problems[0].Error()
	if n := len(e.Problems) - 1; n == 1 {
		s += " (and 1 more problem)"
	} else if n > 1 {
		s += fmt.Sprintf(" (and %d more problems)", n)
	}
	return s
}

// Decode reads a policy file strictly: a syntax error, an unknown key, a
// wrong type or a value out of range is a Problem with the file's line,
// and the result is an *Invalid naming all of them. name is the file as
// people know it (Path for a repository's file).
func Decode(name string, data []byte) (*File, error) {
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		return nil, &Invalid{Problems: []Problem{syntaxProblem(name, err)}}
	}
	d := &decoder{name: name, lines: map[string]int{}}
	f := &File{}
	if root.Kind == 0 || len(root.Content) == 0 {
		d.problem(0, "", "the file is empty: write at least \"version: 1\"")
		return nil, d.invalid()
	}
	doc := root.Content[0]
	if doc.Kind != yaml.MappingNode {
		d.problem(doc.Line, "", fmt.Sprintf("want a mapping of keys (version, review, ...), got %s", describe(doc)))
		return nil, d.invalid()
	}
	d.value(doc, reflect.ValueOf(f).Elem(), "")
	if _, ok := d.lines["version"]; !ok && len(d.problems) == 0 {
		d.problem(doc.Line, "version", `missing key "version": write "version: 1" first`)
	}
	validate(f, d)
	if len(d.problems) > 0 {
		return nil, d.invalid()
	}
	return f, nil
}

var syntaxLine = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

func syntaxProblem(name string, err error) Problem {
	msg := err.Error()
	if m := syntaxLine.FindStringSubmatch(msg); m != nil {
		line, _ := strconv.Atoi(m[1])
		return Problem{File: name, Line: line, Msg: "syntax error: " + m[2]}
	}
	return Problem{File: name, Msg: "syntax error: " + strings.TrimPrefix(msg, "yaml: ")}
}

// decoder walks the YAML tree against the Go types, so that every problem
// knows its line and key, and records the line of every key it sets.
type decoder struct {
	name     string
	problems []Problem
	lines    map[string]int
}

func (d *decoder) problem(line int, key, msg string) {
	d.problems = append(d.problems, Problem{File: d.name, Line: line, Key: key, Msg: msg})
}

func (d *decoder) invalid() *Invalid {
	slices.SortStableFunc(d.problems, func(a, b Problem) int { return a.Line - b.Line })
	return &Invalid{Problems: d.problems}
}

var (
	unmarshalerType = reflect.TypeFor[yaml.Unmarshaler]()
	branchesType    = reflect.TypeFor[Branches]()
)

// value decodes n into v; key is v's dotted path.
func (d *decoder) value(n *yaml.Node, v reflect.Value, key string) {
	for n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	if key != "" {
		d.lines[key] = n.Line
	}
	if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
		return // "key:" with nothing: absent
	}
	switch {
	case v.Type() == branchesType:
		d.branches(n, v, key)
		return
	case reflect.PointerTo(v.Type()).Implements(unmarshalerType):
		if err := v.Addr().Interface().(yaml.Unmarshaler).UnmarshalYAML(n); err != nil {
			d.problem(n.Line, key, fmt.Sprintf("%s: %v", key, err))
		}
		return
	}
	switch v.Kind() {
	case reflect.Pointer:
		elem, before := reflect.New(v.Type().Elem()), len(d.problems)
		d.value(n, elem.Elem(), key)
		if len(d.problems) == before { // a value that failed is no value
			v.Set(elem)
		}
	case reflect.Struct:
		d.mapping(n, v, key)
	case reflect.Slice:
		if n.Kind != yaml.SequenceNode {
			d.problem(n.Line, key, fmt.Sprintf("%s: want a list, got %s", key, describe(n)))
			return
		}
		s := reflect.MakeSlice(v.Type(), len(n.Content), len(n.Content))
		for i, item := range n.Content {
			d.value(item, s.Index(i), fmt.Sprintf("%s[%d]", key, i))
		}
		v.Set(s)
	case reflect.String:
		if n.Kind != yaml.ScalarNode || n.Tag != "!!str" {
			d.problem(n.Line, key, fmt.Sprintf("%s: want a string, got %s", key, describe(n)))
			return
		}
		v.SetString(n.Value)
	case reflect.Int:
		i, err := strconv.Atoi(n.Value)
		if n.Kind != yaml.ScalarNode || n.Tag != "!!int" || err != nil {
			d.problem(n.Line, key, fmt.Sprintf("%s: want a whole number, got %s", key, describe(n)))
			return
		}
		v.SetInt(int64(i))
	case reflect.Bool:
		if n.Kind != yaml.ScalarNode || n.Tag != "!!bool" {
			d.problem(n.Line, key, fmt.Sprintf("%s: want true or false, got %s", key, describe(n)))
			return
		}
		v.SetBool(n.Value == "true")
	default:
		panic(fmt.Sprintf("policy: no decoding for %s", v.Type())) // a type added without its rule
	}
}

// mapping decodes a YAML mapping into a struct: unknown keys are problems
// with a suggestion, and repeated keys are refused by the YAML parser.
func (d *decoder) mapping(n *yaml.Node, v reflect.Value, key string) {
	if n.Kind != yaml.MappingNode {
		what := key
		if what == "" {
			what = "the file"
		}
		d.problem(n.Line, key, fmt.Sprintf("%s: want a mapping of keys, got %s", what, describe(n)))
		return
	}
	fields := fieldsOf(v.Type())
	seen := map[string]int{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, val := n.Content[i], n.Content[i+1]
		if first, ok := seen[k.Value]; ok {
			d.problem(k.Line, join(key, k.Value), fmt.Sprintf("repeated key %q (first at line %d)", k.Value, first))
			continue
		}
		seen[k.Value] = k.Line
		idx, ok := fields[k.Value]
		if !ok {
			msg := fmt.Sprintf("unknown key %q", k.Value)
			if s := suggest(k.Value, slices.Sorted(mapKeys(fields))); s != "" {
				msg += fmt.Sprintf(" (did you mean %q?)", s)
			}
			d.problem(k.Line, join(key, k.Value), msg)
			continue
		}
		d.value(val, v.FieldByIndex(idx), join(key, k.Value))
	}
}

// branches decodes the overrides, in file order.
func (d *decoder) branches(n *yaml.Node, v reflect.Value, key string) {
	if n.Kind != yaml.MappingNode {
		d.problem(n.Line, key, fmt.Sprintf("%s: want a mapping of branch globs to overrides, got %s", key, describe(n)))
		return
	}
	var out Branches
	seen := map[string]int{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, val := n.Content[i], n.Content[i+1]
		if first, ok := seen[k.Value]; ok {
			d.problem(k.Line, key, fmt.Sprintf("%s: repeated glob %q (first at line %d)", key, k.Value, first))
			continue
		}
		seen[k.Value] = k.Line
		bkey := fmt.Sprintf("%s.%q", key, k.Value)
		if _, err := path.Match(k.Value, ""); err != nil || k.Value == "" {
			d.problem(k.Line, bkey, fmt.Sprintf("%s: %q is not a branch glob (path.Match syntax: release/*)", key, k.Value))
			continue
		}
		b := Branch{Glob: k.Value, Line: k.Line}
		d.value(val, reflect.ValueOf(&b.Section).Elem(), bkey)
		out = append(out, b)
	}
	v.Set(reflect.ValueOf(out))
}

// fieldsOf maps the YAML names of t's fields (inline ones included) to
// their index paths.
func fieldsOf(t reflect.Type) map[string][]int {
	out := map[string][]int{}
	for i := range t.NumField() {
		f := t.Field(i)
		name, opts, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if opts == "inline" {
			for k, idx := range fieldsOf(f.Type) {
				out[k] = append([]int{i}, idx...)
			}
			continue
		}
		if name != "" && name != "-" {
			out[name] = []int{i}
		}
	}
	return out
}

func mapKeys(m map[string][]int) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

func join(key, name string) string {
	if key == "" {
		return name
	}
	return key + "." + name
}

// suggest returns the known name closest to an unknown one, when it is
// close enough to be a typo (at most a third of its letters differ).
func suggest(unknown string, known []string) string {
	best, bestDist := "", max(1, len(unknown)/3)+1
	for _, k := range known {
		if dist := levenshtein(strings.ToLower(unknown), k); dist < bestDist {
			best, bestDist = k, dist
		}
	}
	return best
}

func levenshtein(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	return prev[len(b)]
}

// errInvalid lets callers test for an invalid file with errors.As.
var _ error = (*Invalid)(nil)

// AsInvalid returns err's *Invalid, if it is one.
func AsInvalid(err error) (*Invalid, bool) {
	var inv *Invalid
	ok := errors.As(err, &inv)
	return inv, ok
}
