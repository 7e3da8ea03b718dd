package config

import (
	"fmt"
	"slices"
	"strings"
)

// Problem is one thing wrong with a configuration.
type Problem struct {
	// Key is the dotted configuration key the problem is about, with an
	// index for list elements ("matrix.allowed_room_ids[1]"). Problems
	// about the file as a whole use the file name instead.
	Key string
	// Message says what is wrong and, where useful, what to do. It never
	// contains a secret value.
	Message string
}

// String returns "key: message".
func (p Problem) String() string { return p.Key + ": " + p.Message }

// Problems is a list of configuration problems. As an error it lists every
// problem, one per line, in a stable order.
type Problems []Problem

// Error joins the problems, one per line.
func (ps Problems) Error() string {
	lines := make([]string, len(ps))
	for i, p := range ps {
		lines[i] = p.String()
	}
	return strings.Join(lines, "\n")
}

// Err returns ps as an error, or nil when there are no problems, so callers
// never receive a non-nil error holding an empty list.
func (ps Problems) Err() error {
	if len(ps) == 0 {
		return nil
	}
	return ps
}

// Merge returns ps followed by those problems of more that are not already
// in ps, so running several checks that share rules reports each problem
// once.
func (ps Problems) Merge(more Problems) Problems {
	seen := make(map[Problem]bool, len(ps))
	for _, p := range ps {
		seen[p] = true
	}
	out := slices.Clone(ps)
	for _, p := range more {
		if !seen[p] {
			seen[p] = true
			out = append(out, p)
		}
	}
	return out
}

// add records a problem.
func (ps *Problems) add(key, format string, args ...any) {
	*ps = append(*ps, Problem{Key: key, Message: fmt.Sprintf(format, args...)})
}

// indexed returns the key of element i of the list at key.
func indexed(key string, i int) string { return fmt.Sprintf("%s[%d]", key, i) }

func itoa(n int) string { return fmt.Sprint(n) }

// baseKey strips list indices: "a.b[2]" becomes "a.b".
func baseKey(key string) string {
	if i := strings.IndexByte(key, '['); i >= 0 {
		return key[:i]
	}
	return key
}

// sorted returns the problems ordered as the keys appear in the file
// format: section by section, keys in declaration order, unknown keys at
// the end of their section and unknown sections last. The order of
// problems with the same key is kept.
func (ps Problems) sorted() Problems {
	fields := schema()
	rank := map[string]int{}
	sectionFirst := map[string]int{}
	sectionLast := map[string]int{}
	for i, f := range fields {
		rank[f.key()] = 4*i + 1
		if _, ok := sectionFirst[f.section]; !ok {
			sectionFirst[f.section] = 4 * i
		}
		sectionLast[f.section] = 4*i + 2
	}
	rankOf := func(key string) int {
		key = baseKey(key)
		if r, ok := rank[key]; ok {
			return r
		}
		if r, ok := sectionFirst[key]; ok {
			return r
		}
		section, _, _ := strings.Cut(key, ".")
		if r, ok := sectionLast[section]; ok {
			return r
		}
		return 4 * len(fields)
	}
	out := slices.Clone(ps)
	slices.SortStableFunc(out, func(a, b Problem) int { return rankOf(a.Key) - rankOf(b.Key) })
	return out
}

// without returns the problems whose key (list indices ignored) is not
// the key of any problem in earlier. A value Load could not use is left at
// its default, and later checks of that default would only add noise.
func (ps Problems) without(earlier Problems) Problems {
	skip := map[string]bool{}
	for _, p := range earlier {
		skip[baseKey(p.Key)] = true
	}
	var out Problems
	for _, p := range ps {
		if !skip[baseKey(p.Key)] {
			out = append(out, p)
		}
	}
	return out
}
