package htmlmd

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"strings"
	"time"
	"unicode"

	"github.com/JohannesKaufmann/html-to-markdown/v2/converter"
	"github.com/JohannesKaufmann/html-to-markdown/v2/plugin/base"
	"github.com/JohannesKaufmann/html-to-markdown/v2/plugin/commonmark"
	"github.com/JohannesKaufmann/html-to-markdown/v2/plugin/strikethrough"
	"github.com/JohannesKaufmann/html-to-markdown/v2/plugin/table"

	"golang.org/x/net/html"

	"github.com/lisabot/lisa/messages"
)

// Defaults, the same as the pandoc adapter's where both have one.
const (
	// DefaultTimeout is used when Config.Timeout is not positive.
	DefaultTimeout = 20 * time.Second
	// DefaultMaxInputBytes is used when Config.MaxInputBytes is not
	// positive: web.max_download_bytes's default, rounded up.
	DefaultMaxInputBytes = 2 << 20
	// DefaultMaxOutputBytes is used when Config.MaxOutputBytes is not
	// positive.
	DefaultMaxOutputBytes = 2 << 20

	// maxBlankLines is the longest run of blank lines kept in the output.
	maxBlankLines = 2
	// libraryModule is the module that renders the Markdown.
	libraryModule = "github.com/JohannesKaufmann/html-to-markdown/v2"
)

// Config configures a [Converter]. Zero values select the defaults.
type Config struct {
	// Timeout bounds one conversion. When it passes, the conversion stops
	// working (not only waiting) and fails with timeout.
	Timeout time.Duration
	// MaxInputBytes bounds the HTML converted; a larger page fails with
	// output_too_large before any work. The daemon passes
	// web.max_download_bytes, so no downloaded page is refused.
	MaxInputBytes int
	// MaxOutputBytes caps the Markdown; a larger result fails with
	// output_too_large.
	MaxOutputBytes int
}

// Converter converts HTML in pure Go. It is safe for concurrent use.
type Converter struct {
	cfg  Config
	conv *converter.Converter
}

// New returns a converter for cfg.
func New(cfg Config) *Converter {
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.MaxInputBytes <= 0 {
		cfg.MaxInputBytes = DefaultMaxInputBytes
	}
	if cfg.MaxOutputBytes <= 0 {
		cfg.MaxOutputBytes = DefaultMaxOutputBytes
	}
	conv := converter.NewConverter(
		// No escaping of Markdown characters in text: the pass that
		// decides which escapes to keep scans ahead from every "[" (and
		// other characters) to the end of its line, so a line of brackets
		// costs time quadratic in its length (60 KB: 1.5 s). The reader is
		// a model, for which a stray "*" or "[" in prose is prose.
		converter.WithEscapeMode(converter.EscapeModeDisabled),
		converter.WithPlugins(
			base.NewBasePlugin(),
			commonmark.NewCommonmarkPlugin(
				// A link whose target buildTree dropped is its text.
				commonmark.WithLinkEmptyHrefBehavior(commonmark.LinkBehaviorSkip),
				commonmark.WithLinkEmptyContentBehavior(commonmark.LinkBehaviorSkip),
				// No "<!--THE END-->" comments between adjacent lists.
				commonmark.WithListEndComment(false),
			),
			strikethrough.NewStrikethroughPlugin(),
			table.NewTablePlugin(
				// No padding to the widest cell: a long cell would repeat its
				// width in every row.
				table.WithCellPaddingBehavior(table.CellPaddingBehaviorMinimal),
				table.WithSpanCellBehavior(table.SpanBehaviorEmpty),
				table.WithSkipEmptyRows(true),
				table.WithHeaderPromotion(true),
			),
		))
	// Before any other handler: once the deadline has passed, every node
	// renders as nothing, so the remaining work is one cheap call per
	// node.
	conv.Register.Renderer(func(ctx converter.Context, _ converter.Writer, _ *html.Node) converter.RenderStatus {
		if ctx.Err() != nil {
			return converter.RenderSuccess
		}
		return converter.RenderTryNext
	}, converter.PriorityEarly-50)
	conv.Register.Renderer(quoteRenderer(), converter.PriorityEarly)
	return &Converter{cfg: cfg, conv: conv}
}

func toolErr(code messages.ToolCode, msg string) *messages.ToolError {
	return &messages.ToolError{Code: code, Message: msg}
}

// Convert turns html into cleaned GitHub-flavoured Markdown.
func (c *Converter) Convert(ctx context.Context, page []byte) (string, error) {
	if ctx.Err() != nil {
		return "", toolErr(messages.ToolConversionFailed, "The conversion was cancelled.")
	}
	if len(page) > c.cfg.MaxInputBytes {
		return "", toolErr(messages.ToolOutputTooLarge, "The page is larger than the converter accepts.")
	}
	runCtx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
	defer cancel()
	md, err := c.convert(runCtx, page)
	switch {
	case errors.Is(ctx.Err(), context.Canceled):
		return "", toolErr(messages.ToolConversionFailed, "The conversion was cancelled.")
	case runCtx.Err() != nil:
		return "", toolErr(messages.ToolTimeout, "The conversion did not finish in time.")
	case err != nil:
		return "", toolErr(messages.ToolConversionFailed, "The converter could not convert this page.")
	case len(md) > c.cfg.MaxOutputBytes:
		return "", toolErr(messages.ToolOutputTooLarge, "The converted page exceeded the configured output-size limit.")
	}
	return clean(md), nil
}

// convert builds the bounded tree and renders it.
func (c *Converter) convert(ctx context.Context, src []byte) (md []byte, err error) {
	defer func() {
		// The library is not expected to panic, but a page must never take
		// the daemon down with it.
		if r := recover(); r != nil {
			md, err = nil, fmt.Errorf("htmlmd: converter panicked: %v", r)
		}
	}()
	doc, err := buildTree(ctx, src)
	if err != nil {
		return nil, err
	}
	return c.conv.ConvertNode(doc, converter.WithContext(ctx))
}

// Check converts a small page and returns the converter's name and
// version, such as "built-in (html-to-markdown v2.5.2)". It fails with a
// conversion_failed error if the conversion does not give the expected
// Markdown.
func (c *Converter) Check(ctx context.Context) (string, error) {
	md, err := c.Convert(ctx, []byte(`<h1>Check</h1><p>A <a href="https://example.org/">link</a>.</p>`))
	if err != nil {
		return "", err
	}
	if want := "# Check\n\nA [link](https://example.org/)."; md != want {
		return "", toolErr(messages.ToolConversionFailed, fmt.Sprintf("the built-in converter gave %q, want %q", md, want))
	}
	return Version(), nil
}

// Version names the converter and, where the build records it, the
// library's version.
func Version() string {
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, m := range info.Deps {
			if m.Path == libraryModule {
				return "built-in (html-to-markdown " + m.Version + ")"
			}
		}
	}
	return "built-in (html-to-markdown)"
}

// clean post-processes the Markdown as the pandoc adapter does: invalid
// UTF-8 becomes U+FFFD, CRLF and lone CR become LF, control characters
// other than "\n" and "\t" are removed, whitespace-only lines become
// empty, runs of more than two blank lines are shortened to two, and
// leading and trailing blank lines are dropped.
func clean(out []byte) string {
	s := strings.ToValidUTF8(string(out), "\uFFFD")
	s = strings.ReplaceAll(s, "\r\n", "\n")
	s = strings.ReplaceAll(s, "\r", "\n")
	s = strings.Map(func(r rune) rune {
		if r == '\n' || r == '\t' {
			return r
		}
		if unicode.IsControl(r) {
			return -1
		}
		return r
	}, s)
	lines := strings.Split(s, "\n")
	kept := lines[:0]
	blank := 0
	for _, l := range lines {
		if strings.TrimSpace(l) == "" {
			blank++
			if blank > maxBlankLines {
				continue
			}
			l = ""
		} else {
			blank = 0
		}
		kept = append(kept, l)
	}
	return strings.Trim(strings.Join(kept, "\n"), "\n")
}
