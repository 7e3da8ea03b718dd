package doctor

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/lisabot/lisa/adapters/research"
	"github.com/lisabot/lisa/config"
	"github.com/lisabot/lisa/daemon"
)

// testPage is the small page the converter must turn into Markdown, and
// wantMarkdown what its Markdown must contain.
const testPage = `<!doctype html><html><head><title>Doctor</title><style>p{color:red}</style></head>
<body><h1>Lisa's test page</h1><p>A <strong>short</strong> paragraph with <a href="https://example.org/page">a link</a>.</p>
<ul><li>one</li><li>two</li></ul><script>document.write("never")</script></body></html>`

var wantMarkdown = []string{"Lisa's test page", "**short**", "[a link](https://example.org/page)", "one", "two"}

// converterSection: the HTML-to-Markdown converter Lisa would use turns a
// small page into Markdown.
func converterSection() Section {
	return Section{Name: "converter", Checks: []Check{{
		Name: "convert",
		// pandoc --version, then one conversion.
		Timeout: func(e *Env) time.Duration { return 2*e.Res.Config.Web.PandocTimeout() + e.RequestTimeout },
		Run:     checkConverter,
	}}}
}

// converter is the HTML-to-Markdown converter the daemon builds for cfg,
// its name, and its own readiness check (nil when it has none).
type converter struct {
	name  string
	conv  research.Converter
	ready func(ctx context.Context) (string, error)
	fix   string
}

// converterFor builds the converter of cfg as the daemon does
// (web.converter: pandoc or the built-in one).
func converterFor(cfg config.Config) converter {
	c := daemon.NewConverter(cfg, nil)
	if cfg.Web.Converter == config.ConverterBuiltin {
		return converter{name: "the built-in converter", conv: c, ready: c.Check,
			fix: `report a bug: the built-in converter needs nothing outside Lisa; meanwhile set web.converter = "pandoc" and install pandoc`}
	}
	return converter{name: "pandoc", conv: c, ready: c.Check,
		fix: `install pandoc 2.15 or newer (Debian: apt install pandoc), or set web.converter = "builtin"`}
}

func checkConverter(ctx context.Context, e *Env) []Result {
	c := converterFor(e.Res.Config)
	name := c.name
	if c.ready != nil {
		version, err := c.ready(ctx)
		if err != nil {
			return []Result{{Status: Failed, Message: fmt.Sprintf("%s: %v", c.name, err), Fix: c.fix}}
		}
		name += " " + version
		if c.name != "pandoc" {
			name = version // "built-in (html-to-markdown v…)"
		}
	}
	start := time.Now()
	md, err := c.conv.Convert(ctx, []byte(testPage))
	took := time.Since(start).Round(time.Millisecond)
	if err != nil {
		return []Result{{Status: Failed, Message: fmt.Sprintf("%s failed to convert a small test page: %v", name, err), Fix: c.fix}}
	}
	for _, w := range wantMarkdown {
		if !strings.Contains(md, w) {
			return []Result{{Status: Failed, Message: fmt.Sprintf("%s converted a small test page, but its Markdown lacks %q", name, w), Fix: c.fix}}
		}
	}
	if strings.Contains(md, "never") || strings.Contains(md, "color:red") {
		return []Result{{Status: Failed, Message: fmt.Sprintf("%s kept a script or style of the test page in its Markdown", name), Fix: c.fix}}
	}
	return []Result{{Status: OK, Message: fmt.Sprintf("%s turns a small test page into Markdown (%s)", name, took)}}
}
