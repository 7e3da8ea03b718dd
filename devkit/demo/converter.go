package demo

import (
	"context"
	"fmt"

	"github.com/lisabot/lisa/config"
)

// installPandoc is the command that installs pandoc on Debian and Ubuntu.
const installPandoc = "sudo apt-get install pandoc"

// converterChoice is the HTML→Markdown converter the demo's Lisa uses.
type converterChoice struct {
	// setting is the [web] line of the demo's configuration that selects
	// it; empty keeps the default (pandoc).
	setting string
	// note is the one line the demo prints about it.
	note string
}

// chooseConverter picks the converter for html_to_markdown: pandoc when
// checkPandoc finds a usable one (present, and new enough for
// --sandbox), else the built-in converter (web.converter = "builtin").
// Pandoc is never a prerequisite of the demo.
func chooseConverter(ctx context.Context, checkPandoc func(context.Context) (string, error)) converterChoice {
	version, err := checkPandoc(ctx)
	if err == nil {
		return converterChoice{note: "[demo] pages are converted by pandoc " + version}
	}
	return converterChoice{setting: fmt.Sprintf("converter = %q", config.ConverterBuiltin),
		note: fmt.Sprintf("[demo] pandoc is not usable (%v); pages are converted by the built-in converter (install pandoc for the default: %s)", err, installPandoc)}
}
