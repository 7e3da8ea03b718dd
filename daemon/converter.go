package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/lisabot/lisa/adapters/htmlmd"
	"github.com/lisabot/lisa/adapters/pandoc"
	"github.com/lisabot/lisa/adapters/research"
	"github.com/lisabot/lisa/config"
	"github.com/lisabot/lisa/messages"
)

// Converter is the html_to_markdown converter web.converter chooses: it
// converts, and checks that it can.
type Converter interface {
	research.Converter
	// Check checks that the converter can work: pandoc's version, the
	// built-in one's conversion of a small page. It returns a version
	// (pandoc: "2.17.1.1"; built-in: "built-in (html-to-markdown
	// v2.5.2)").
	Check(ctx context.Context) (string, error)
}

// The two converters behind the port.
var (
	_ Converter = (*pandoc.Converter)(nil)
	_ Converter = (*htmlmd.Converter)(nil)
)

// checkTimeout bounds CheckConverter.
const checkTimeout = 10 * time.Second

// NewConverter returns the converter cfg's web.converter names
// (config.ConverterPandoc or config.ConverterBuiltin), bounded as the
// configuration says: web.pandoc_timeout_seconds per conversion,
// web.max_download_bytes of HTML in (the built-in one refuses more) and
// four bytes per character of web.max_tool_output_characters out. log,
// if not nil, receives pandoc's failed runs at debug level. A value
// config.Validate refuses is treated as the default, pandoc.
func NewConverter(cfg config.Config, log *slog.Logger) Converter {
	w := cfg.Web
	if w.Converter == config.ConverterBuiltin {
		return htmlmd.New(htmlmd.Config{Timeout: w.PandocTimeout(), MaxInputBytes: w.MaxDownloadBytes, MaxOutputBytes: 4 * w.MaxToolOutputCharacters})
	}
	return pandoc.New(pandoc.Config{Timeout: w.PandocTimeout(), MaxOutputBytes: 4 * w.MaxToolOutputCharacters, Logger: log})
}

// CheckConverter checks the converter cfg's web.converter names and
// returns its name and version, such as "pandoc 2.17.1.1" or "built-in
// (html-to-markdown v2.5.2)". For pandoc it fails when the executable
// is missing or older than 2.15 (needed for --sandbox), with one line,
// starting with the key, that names both fixes: install pandoc, or set
// web.converter = "builtin".
func CheckConverter(ctx context.Context, cfg config.Config) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, checkTimeout)
	defer cancel()
	v, err := NewConverter(cfg, nil).Check(ctx)
	if err == nil {
		if cfg.Web.Converter != config.ConverterBuiltin {
			v = "pandoc " + v
		}
		return v, nil
	}
	why := err.Error()
	if te := (*messages.ToolError)(nil); errors.As(err, &te) {
		why = te.Message
	}
	if cfg.Web.Converter == config.ConverterBuiltin {
		return "", fmt.Errorf("web.converter: the built-in converter does not work: %s", why)
	}
	return "", fmt.Errorf("web.converter: %s; install pandoc %d.%d or newer (Debian package pandoc), or set web.converter = %q",
		why, pandoc.MinMajor, pandoc.MinMinor, config.ConverterBuiltin)
}
