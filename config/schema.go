package config

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
)

// The schema is derived from the koanf tags of Config, so the list of known
// keys can never drift from the struct. Load uses it to report unknown keys
// and wrong types, and to find environment overrides.

// kind is the value type a configuration key accepts.
type kind int

const (
	kindString kind = iota
	kindInt
	kindFloat
	kindBool
	kindList
	kindSecret
)

// describe names the kind for problem messages.
func (k kind) describe() string {
	switch k {
	case kindInt:
		return "an integer"
	case kindFloat:
		return "a number"
	case kindBool:
		return "a boolean (true or false)"
	case kindList:
		return "a list of strings"
	default:
		return "a string"
	}
}

// field is one leaf key of the schema.
type field struct {
	section, name string
	kind          kind
	// optional keys are pointers in Config: nil when the key is left out.
	optional bool
	index    []int // reflect field index path within Config
}

// key returns the dotted key, "section.name".
func (f field) key() string { return f.section + "." + f.name }

// schema lists every leaf key of Config in declaration order. It panics on
// a field type it does not know, which a test catches.
func schema() []field {
	var out []field
	ct := reflect.TypeFor[Config]()
	for i := range ct.NumField() {
		sf := ct.Field(i)
		section := sf.Tag.Get("koanf")
		for j := range sf.Type.NumField() {
			lf := sf.Type.Field(j)
			t, optional := lf.Type, false
			if t.Kind() == reflect.Pointer {
				t, optional = t.Elem(), true
			}
			out = append(out, field{
				section:  section,
				name:     lf.Tag.Get("koanf"),
				kind:     kindOf(t),
				optional: optional,
				index:    []int{i, j},
			})
		}
	}
	return out
}

func kindOf(t reflect.Type) kind {
	switch {
	case t == reflect.TypeFor[SecretRef]():
		return kindSecret
	case t.Kind() == reflect.String:
		return kindString
	case t.Kind() == reflect.Int:
		return kindInt
	case t.Kind() == reflect.Float64:
		return kindFloat
	case t.Kind() == reflect.Bool:
		return kindBool
	case t.Kind() == reflect.Slice && t.Elem().Kind() == reflect.String:
		return kindList
	}
	panic(fmt.Sprintf("config: field type %s has no schema kind", t))
}

// Keys returns every configuration key, "section.name", in the order the
// sections and keys are declared.
func Keys() []string {
	fs := schema()
	keys := make([]string, len(fs))
	for i, f := range fs {
		keys[i] = f.key()
	}
	return keys
}

// EnvOverrideName returns the environment variable that overrides key:
// "LISA_" followed by the upper-cased key with the section separator "."
// written as "__". For example llm.model is overridden by LISA_LLM__MODEL.
func EnvOverrideName(key string) string {
	return EnvOverridePrefix + strings.ToUpper(strings.ReplaceAll(key, ".", "__"))
}

// EnvOverridePrefix starts the name of every environment override.
const EnvOverridePrefix = "LISA_"

// toMap converts c into the nested map koanf merges, keyed by section and
// key name. Secret references keep their raw text, which only ever travels
// back into a Config.
func toMap(c Config) map[string]any {
	out := map[string]any{}
	cv := reflect.ValueOf(c)
	for _, f := range schema() {
		sec, ok := out[f.section].(map[string]any)
		if !ok {
			sec = map[string]any{}
			out[f.section] = sec
		}
		v := cv.FieldByIndex(f.index)
		if f.optional {
			if v.IsNil() {
				continue // left out: no default to merge
			}
			v = v.Elem()
		}
		switch f.kind {
		case kindSecret:
			sec[f.name] = v.Interface().(SecretRef).raw()
		case kindList:
			sec[f.name] = slices.Clone(v.Interface().([]string))
		default:
			sec[f.name] = v.Interface()
		}
	}
	return out
}

// suggest returns the known key of section closest to name, or "" when
// none is close enough to be a likely typo.
func suggest(fields []field, section, name string) string {
	best, bestDist := "", 3 // suggest at most two edits away
	for _, f := range fields {
		if f.section != section {
			continue
		}
		if d := editDistance(f.name, name); d < bestDist {
			best, bestDist = f.key(), d
		}
	}
	return best
}

// editDistance is the Levenshtein distance between a and b, in bytes.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
