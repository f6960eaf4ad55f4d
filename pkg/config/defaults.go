package config

import (
	"encoding"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/kelseyhightower/envconfig"
)

// Defaults returns a T whose fields hold their `default:` tags' values,
// and zero where a field has none: the configuration an empty environment
// gives, without reading the environment. The tags are the one place a
// default is written; tests and code that build a configuration start
// from Defaults rather than from a copy of its values.
func Defaults[T any]() (T, error) {
	var c T
	v := reflect.ValueOf(&c).Elem()
	if v.Kind() != reflect.Struct {
		return c, fmt.Errorf("defaults of %T: not a struct", c)
	}
	err := eachVar(v, func(name, def string, f reflect.Value) error {
		if def == "" {
			return nil
		}
		if err := decode(f, def); err != nil {
			return fmt.Errorf("default of %s=%q: %w", name, def, err)
		}
		return nil
	})
	return c, err
}

// MustDefaults is Defaults for package-level values: a malformed tag is a
// programming error, which any test of the package finds.
func MustDefaults[T any]() T {
	c, err := Defaults[T]()
	if err != nil {
		panic(err)
	}
	return c
}

// DefaultZero sets each field of *cfg that its variable names and that
// holds its zero value to its `default:` tag's value: for New, where a
// configuration built in code may leave a setting unset that has no
// sensible zero. It panics on a name cfg does not declare (a programming
// error).
func DefaultZero[T any](cfg *T, names ...string) {
	want := map[string]bool{}
	for _, n := range names {
		want[n] = true
	}
	err := eachVar(reflect.ValueOf(cfg).Elem(), func(name, def string, f reflect.Value) error {
		if !want[name] {
			return nil
		}
		delete(want, name)
		if !f.IsZero() || def == "" {
			return nil
		}
		if err := decode(f, def); err != nil {
			return fmt.Errorf("default of %s=%q: %w", name, def, err)
		}
		return nil
	})
	if err == nil && len(want) > 0 {
		err = fmt.Errorf("%T declares no variable %v", *cfg, want)
	}
	if err != nil {
		panic(err)
	}
}

// eachVar calls fn for each field of the struct v that a variable sets
// (an envconfig tag), descending into embedded and untagged struct fields
// as envconfig does.
func eachVar(v reflect.Value, fn func(name, def string, f reflect.Value) error) error {
	t := v.Type()
	for i := range t.NumField() {
		sf, f := t.Field(i), v.Field(i)
		if !sf.IsExported() {
			continue
		}
		name := sf.Tag.Get("envconfig")
		if name == "" && f.Kind() == reflect.Struct && !decodes(f) {
			if err := eachVar(f, fn); err != nil {
				return err
			}
			continue
		}
		if name == "" {
			continue
		}
		if err := fn(name, sf.Tag.Get("default"), f); err != nil {
			return err
		}
	}
	return nil
}

// decodes reports whether f decodes itself from a string.
func decodes(f reflect.Value) bool {
	p := f.Addr().Interface()
	_, d := p.(envconfig.Decoder)
	_, s := p.(envconfig.Setter)
	_, u := p.(encoding.TextUnmarshaler)
	return d || s || u
}

// decode sets f from s as envconfig reads a variable: its own decoder if
// it has one, a duration, a number, a bool, or a comma-separated list.
func decode(f reflect.Value, s string) error {
	switch p := f.Addr().Interface().(type) {
	case envconfig.Decoder:
		return p.Decode(s)
	case envconfig.Setter:
		return p.Set(s)
	case encoding.TextUnmarshaler:
		return p.UnmarshalText([]byte(s))
	}
	if f.Type() == reflect.TypeFor[time.Duration]() {
		d, err := time.ParseDuration(s)
		f.SetInt(int64(d))
		return err
	}
	switch f.Kind() {
	case reflect.String:
		f.SetString(s)
	case reflect.Bool:
		b, err := strconv.ParseBool(s)
		f.SetBool(b)
		return err
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		n, err := strconv.ParseInt(s, 0, f.Type().Bits())
		f.SetInt(n)
		return err
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		n, err := strconv.ParseUint(s, 0, f.Type().Bits())
		f.SetUint(n)
		return err
	case reflect.Float32, reflect.Float64:
		x, err := strconv.ParseFloat(s, f.Type().Bits())
		f.SetFloat(x)
		return err
	case reflect.Slice:
		parts := strings.Split(s, ",")
		out := reflect.MakeSlice(f.Type(), len(parts), len(parts))
		for i, part := range parts {
			if err := decode(out.Index(i), part); err != nil {
				return err
			}
		}
		f.Set(out)
	default:
		return fmt.Errorf("cannot decode a %s", f.Type())
	}
	return nil
}
