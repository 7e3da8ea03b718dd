package hostile_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/lisabot/lisa/config"
	"github.com/lisabot/lisa/daemon"
	"github.com/lisabot/lisa/devkit/webpages"
	"github.com/lisabot/lisa/messages"
	"github.com/lisabot/lisa/testkit/hostile"
	"github.com/lisabot/lisa/testkit/need"
)

// fuzzPandocBytes bounds the inputs FuzzConverters gives pandoc.
const fuzzPandocBytes = 256

// pandocTimeout is web.pandoc_timeout_seconds for pandoc in these tests:
// short, so that its hostile pages end at their deadline quickly. The
// built-in converter keeps the default (10 s), and must finish every page
// well within it, even under the race detector.
const pandocTimeout = 2

// converterConfig is Lisa's default configuration with the converter
// named: the bounds the daemon gives it.
func converterConfig(name string) config.Config {
	cfg := config.Default()
	cfg.Web.Converter = name
	if name == config.ConverterPandoc {
		cfg.Web.PandocTimeoutSeconds = pandocTimeout
	}
	return cfg
}

// converters runs f once per converter, as a subtest: the built-in one
// always, pandoc where it is installed (need.Pandoc).
func converters(t *testing.T, f func(t *testing.T, name string, conv daemon.Converter, cfg config.Config)) {
	for _, name := range []string{config.ConverterBuiltin, config.ConverterPandoc} {
		t.Run(name, func(t *testing.T) {
			if name == config.ConverterPandoc {
				need.Pandoc(t)
			}
			cfg := converterConfig(name)
			f(t, name, daemon.NewConverter(cfg, nil), cfg)
		})
	}
}

// checkOutput holds what every converter promises of its Markdown.
func checkOutput(t testing.TB, name, md string, cfg config.Config) {
	t.Helper()
	if !utf8.ValidString(md) {
		t.Errorf("%s: output is not valid UTF-8", name)
	}
	if max := 4 * cfg.Web.MaxToolOutputCharacters; len(md) > max {
		t.Errorf("%s: output is %d bytes, bound %d", name, len(md), max)
	}
	if i := strings.IndexFunc(md, func(r rune) bool { return unicode.IsControl(r) && r != '\n' && r != '\t' }); i >= 0 {
		t.Errorf("%s: output has control character %U at %d", name, []rune(md[i:])[0], i)
	}
	if strings.HasPrefix(md, "\n") || strings.HasSuffix(md, "\n") || strings.Contains(md, "\n\n\n\n") {
		t.Errorf("%s: output is not cleaned of blank lines", name)
	}
}

// checkError holds a failure to the codes a converter may give: the
// built-in one only refuses output over its bound; pandoc also times out
// or fails (it exits when its heap limit is reached).
func checkError(t testing.TB, converter, what string, err error) {
	t.Helper()
	var te *messages.ToolError
	if !errors.As(err, &te) {
		t.Fatalf("%s on %s: error %v (%T) is not a *messages.ToolError", converter, what, err, err)
	}
	switch {
	case te.Code == messages.ToolOutputTooLarge:
	case converter == config.ConverterPandoc && (te.Code == messages.ToolTimeout || te.Code == messages.ToolConversionFailed):
	default:
		t.Errorf("%s on %s: failed with %s (%s)", converter, what, te.Code, te.Message)
	}
}

// TestConvertersOnTheDemoPages: both converters turn the demo's articles,
// as its web server serves them, into Markdown with the article's title
// as a heading, its sections, its links and none of its style sheet.
func TestConvertersOnTheDemoPages(t *testing.T) {
	srv, err := webpages.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	pages := srv.Pages()
	if len(pages) < 2 {
		t.Fatalf("%d demo pages", len(pages))
	}
	bodies := make([][]byte, len(pages))
	for i, p := range pages {
		resp, err := http.Get(p.URL)
		if err != nil {
			t.Fatal(err)
		}
		bodies[i], err = io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: %d %v", p.URL, resp.StatusCode, err)
		}
	}
	converters(t, func(t *testing.T, name string, conv daemon.Converter, cfg config.Config) {
		for i, p := range pages {
			md, err := conv.Convert(context.Background(), bodies[i])
			if err != nil {
				t.Fatalf("%s: %v", p.URL, err)
			}
			checkOutput(t, p.URL, md, cfg)
			for _, want := range []string{"# " + p.Title + "\n", "\n## ", "](/articles/", "An article of the Lisa demo site"} {
				if !strings.Contains(md, want) {
					t.Errorf("%s: Markdown lacks %q:\n%s", p.URL, want, md)
				}
			}
			for _, gone := range []string{"font-family", "<style", "<html", "<p>"} {
				if strings.Contains(md, gone) {
					t.Errorf("%s: Markdown keeps %q:\n%s", p.URL, gone, md)
				}
			}
		}
	})
}

// TestConvertersOnHostilePages runs every hostile page through both
// converters, one at a time. Each ends with Markdown within the output
// bound or a bounded error, before its deadline. The built-in converter,
// which runs inside Lisa, never times out and stays within
// hostile.ConvertCPUBound and ConvertAllocBound of the page's size;
// pandoc, a child process with its own heap limit, may run into its
// deadline, and its CPU time stays within it.
func TestConvertersOnHostilePages(t *testing.T) {
	pages := hostile.Pages()
	converters(t, func(t *testing.T, name string, conv daemon.Converter, cfg config.Config) {
		timeout := cfg.Web.PandocTimeout()
		for _, p := range pages {
			var (
				md  string
				err error
			)
			start := time.Now()
			cost := hostile.Measure(func() { md, err = conv.Convert(context.Background(), p.HTML) })
			wall := time.Since(start)
			outcome := "ok"
			if te := (*messages.ToolError)(nil); errors.As(err, &te) {
				outcome = string(te.Code)
			}
			if err != nil {
				checkError(t, name, p.Name, err)
			} else {
				checkOutput(t, p.Name, md, cfg)
			}
			t.Logf("%-28s in=%8d out=%7d %-16s wall=%v cpu=%v child_cpu=%v alloc=%.1f MiB",
				p.Name, len(p.HTML), len(md), outcome, wall.Round(time.Millisecond), cost.CPU.Round(time.Millisecond),
				cost.ChildCPU.Round(time.Millisecond), float64(cost.Alloc)/(1<<20))
			if wall > timeout+2*time.Second {
				t.Errorf("%s: took %v, deadline %v", p.Name, wall, timeout)
			}
			if name == config.ConverterBuiltin {
				if cpu, bound := cost.CPU, hostile.ConvertCPUBound(len(p.HTML)); cpu > bound {
					t.Errorf("%s: %v of CPU for %d bytes, bound %v", p.Name, cpu, len(p.HTML), bound)
				}
				if alloc, bound := cost.Alloc, hostile.ConvertAllocBound(len(p.HTML)); alloc > bound {
					t.Errorf("%s: allocated %.1f MiB for %d bytes, bound %.1f MiB", p.Name, float64(alloc)/(1<<20), len(p.HTML), float64(bound)/(1<<20))
				}
				if outcome == string(messages.ToolTimeout) {
					t.Errorf("%s: the built-in converter ran out of time", p.Name)
				}
			} else if cost.ChildCPU > timeout+time.Second {
				t.Errorf("%s: pandoc used %v of CPU, deadline %v", p.Name, cost.ChildCPU, timeout)
			}
		}
	})
}

// FuzzConverters feeds both converters the same HTML: each must return
// Markdown that keeps the output promises, or a bounded tool error,
// never panic, and the built-in one never passes a script through.
// Pandoc takes part where it is installed, on inputs up to
// fuzzPandocBytes (larger hostile shapes keep it busy up to its deadline,
// which would leave the fuzzing engine a few inputs a minute; the cost
// test gives it the large ones).
func FuzzConverters(f *testing.F) {
	for _, p := range hostile.Pages() {
		f.Add(p.HTML[:min(len(p.HTML), 1024)])
	}
	f.Add([]byte(`<h1>T</h1><p>a <a href="https://x.example/">link</a><script>alert(1)</script><table><tr><td>1<td>2</table>`))
	f.Add([]byte("<svg><script>x</script></svg><template><style>y</style></template><noscript><p>z</noscript>"))
	f.Add([]byte("<ul><li>a<ol><li>b</ul><dl><dt>t<dd>d</dl><pre>  code\n</pre><blockquote>q"))
	names := []string{config.ConverterBuiltin}
	if need.HavePandoc() {
		names = append(names, config.ConverterPandoc)
	} else {
		f.Logf("pandoc is not installed: fuzzing the built-in converter only")
	}
	convs := map[string]daemon.Converter{}
	cfgs := map[string]config.Config{}
	for _, n := range names {
		cfgs[n] = converterConfig(n)
		convs[n] = daemon.NewConverter(cfgs[n], nil)
	}
	f.Fuzz(func(t *testing.T, page []byte) {
		for _, n := range names {
			if n == config.ConverterPandoc && len(page) > fuzzPandocBytes {
				continue
			}
			md, err := convs[n].Convert(context.Background(), page)
			if err != nil {
				checkError(t, n, fmt.Sprintf("%.200q", page), err)
				continue
			}
			checkOutput(t, n, md, cfgs[n])
			if n == config.ConverterBuiltin && strings.Contains(strings.ToLower(md), "<script") {
				t.Errorf("built-in output passes a script through: %q", md)
			}
		}
	})
}
