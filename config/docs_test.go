package config_test

import (
	"bufio"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/lisabot/lisa/config"
)

// The operator documentation must describe exactly the keys the code
// accepts. These tests read the Markdown and compare it with config.Keys(),
// which is derived from the struct tags, so docs and struct cannot drift.

const (
	configurationDoc = "../docs/configuration.md"
	operationsDoc    = "../docs/operations.md"
)

var (
	// sectionHeading matches a key-table heading such as "## [matrix]".
	sectionHeading = regexp.MustCompile("^##\\s+\\[([a-z_]+)\\]\\s*$")
	// anyHeading matches any level-1 or level-2 heading; it ends a section.
	anyHeading = regexp.MustCompile(`^#{1,2}\s`)
	// keyRow matches a table row whose first cell is one backticked name.
	keyRow = regexp.MustCompile("^\\|\\s*`([^`]+)`\\s*\\|")
	// dottedKey matches a whole backticked span that looks like a key,
	// "section.name".
	dottedKey = regexp.MustCompile("`([a-z][a-z0-9_]*)\\.([a-z][a-z0-9_]*)`")
)

// knownKeys returns config.Keys() as a set and the set of section names.
func knownKeys(t *testing.T) (keys, sections map[string]bool) {
	t.Helper()
	keys, sections = map[string]bool{}, map[string]bool{}
	for _, k := range config.Keys() {
		sec, name, ok := strings.Cut(k, ".")
		if !ok || sec == "" || name == "" {
			t.Fatalf("config.Keys() returned %q, want section.name", k)
		}
		keys[k] = true
		sections[sec] = true
	}
	if len(keys) == 0 {
		t.Fatal("config.Keys() is empty")
	}
	return keys, sections
}

// docTables returns, per "## [section]" heading of the doc, the keys named
// in the first cell of that section's table rows, in order, together with
// the line each was found on.
func docTables(t *testing.T, path string) map[string][]docKey {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string][]docKey{}
	section, inFence := "", false
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			inFence = !inFence
			continue
		}
		if inFence {
			continue
		}
		if m := sectionHeading.FindStringSubmatch(line); m != nil {
			section = m[1]
			if _, dup := out[section]; dup {
				t.Errorf("%s:%d: section [%s] is documented twice", path, n, section)
			}
			out[section] = []docKey{}
			continue
		}
		if anyHeading.MatchString(line) {
			section = ""
			continue
		}
		if section == "" {
			continue
		}
		if m := keyRow.FindStringSubmatch(line); m != nil {
			out[section] = append(out[section], docKey{name: m[1], line: n})
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

type docKey struct {
	name string
	line int
}

func TestConfigurationDocListsEveryKey(t *testing.T) {
	tables := docTables(t, configurationDoc)
	for _, key := range config.Keys() {
		sec, name, _ := strings.Cut(key, ".")
		rows, ok := tables[sec]
		if !ok {
			t.Errorf("%s: no \"## [%s]\" section, but %s is a key", configurationDoc, sec, key)
			continue
		}
		if !slices.ContainsFunc(rows, func(d docKey) bool { return d.name == name }) {
			t.Errorf("%s: key %s is missing from the [%s] table", configurationDoc, key, sec)
		}
	}
}

func TestConfigurationDocNamesOnlyKnownKeys(t *testing.T) {
	keys, sections := knownKeys(t)
	tables := docTables(t, configurationDoc)
	for sec, rows := range tables {
		if !sections[sec] {
			t.Errorf("%s: section [%s] is documented but the code has no such section", configurationDoc, sec)
			continue
		}
		seen := map[string]bool{}
		for _, r := range rows {
			key := sec + "." + r.name
			if !keys[key] {
				t.Errorf("%s:%d: %s is documented but is not a key the code accepts", configurationDoc, r.line, key)
			}
			if seen[r.name] {
				t.Errorf("%s:%d: %s is documented twice", configurationDoc, r.line, key)
			}
			seen[r.name] = true
		}
	}
}

// Every backticked "section.key" of a known section, anywhere in the
// operator docs (prose, rule tables, examples), must be a real key.
func TestDocsReferOnlyToKnownKeys(t *testing.T) {
	keys, sections := knownKeys(t)
	for _, path := range []string{configurationDoc, operationsDoc} {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		found := 0
		for n, line := range strings.Split(string(data), "\n") {
			for _, m := range dottedKey.FindAllStringSubmatch(line, -1) {
				if !sections[m[1]] {
					continue // a file name or Go identifier, not a key
				}
				found++
				if key := m[1] + "." + m[2]; !keys[key] {
					t.Errorf("%s:%d: `%s` looks like a configuration key but the code has no such key", path, n+1, key)
				}
			}
		}
		if found == 0 {
			t.Errorf("%s: found no `section.key` references; is the pattern still right?", path)
		}
	}
}

// The parser itself must see something, or the tests above pass vacuously.
func TestConfigurationDocParserFindsTables(t *testing.T) {
	tables := docTables(t, configurationDoc)
	total := 0
	for _, rows := range tables {
		total += len(rows)
	}
	if total != len(config.Keys()) {
		t.Errorf("%s: the key tables have %d rows, config.Keys() has %d keys", configurationDoc, total, len(config.Keys()))
	}
}
