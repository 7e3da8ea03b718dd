package htmlmd

import (
	"bytes"
	"context"

	"github.com/JohannesKaufmann/html-to-markdown/v2/converter"
	"golang.org/x/net/html"
	"golang.org/x/net/html/atom"
)

// quoteCheckEvery is how many bytes the quote passes handle between two checks
// of the deadline.
const quoteCheckEvery = 64 << 10

// quoteRenderer renders <blockquote> as the commonmark plugin does (trim,
// at most two consecutive newlines, no hard breaks before a blank line,
// "> " before every line), but in passes that allocate their result once,
// check the deadline as they go. The plugin's passes grow their buffers by
// appending and re-copy the text three more times, once per quote level:
// seven quotes around a <pre> of 2 MB of newlines allocated 582 MiB and
// ran 1 s past a 100 ms deadline.
func quoteRenderer() converter.HandleRenderFunc {
	return func(ctx converter.Context, w converter.Writer, n *html.Node) converter.RenderStatus {
		if n.DataAtom != atom.Blockquote {
			return converter.RenderTryNext
		}
		var buf bytes.Buffer
		ctx.RenderChildNodes(ctx, &buf, n)
		content := bytes.TrimSpace(buf.Bytes())
		if len(content) == 0 || ctx.Err() != nil {
			return converter.RenderSuccess
		}
		content, ok := trimNewlines(ctx, content)
		if !ok {
			return converter.RenderSuccess
		}
		content = trimHardBreaks(content)
		content, ok = prefixLines(ctx, content, "> ")
		if !ok {
			return converter.RenderSuccess
		}
		w.WriteString("\n\n")
		w.Write(content)
		w.WriteString("\n\n")
		return converter.RenderSuccess
	}
}

// trimNewlines keeps at most two consecutive newlines; spaces before a
// kept newline stay, spaces between dropped ones go. ok is false when the
// deadline passed.
func trimNewlines(ctx context.Context, in []byte) ([]byte, bool) {
	out := make([]byte, 0, len(in))
	newlines, spaces := 0, 0
	for i, b := range in {
		if i%quoteCheckEvery == 0 && ctx.Err() != nil {
			return nil, false
		}
		switch b {
		case '\n':
			newlines++
			if newlines <= 2 {
				out = append(out, in[i-spaces:i+1]...)
			}
			spaces = 0
		case ' ':
			spaces++
		default:
			newlines = 0
			out = append(out, in[i-spaces:i+1]...)
			spaces = 0
		}
	}
	return append(out, in[len(in)-spaces:]...), true
}

// trimHardBreaks drops the hard line breaks ("  \n") before a blank line,
// as the commonmark plugin does.
func trimHardBreaks(in []byte) []byte {
	for _, r := range [][2]string{{"  \n\n", "\n\n"}, {"  \n  \n", "\n\n"}, {"  \n \n", "\n\n"}} {
		if bytes.Contains(in, []byte(r[0])) {
			in = bytes.ReplaceAll(in, []byte(r[0]), []byte(r[1]))
		}
	}
	return in
}

// prefixLines puts prefix before every line of in. ok is false when the
// deadline passed.
func prefixLines(ctx context.Context, in []byte, prefix string) ([]byte, bool) {
	out := make([]byte, 0, len(in)+(bytes.Count(in, []byte{'\n'})+1)*len(prefix))
	out = append(out, prefix...)
	start := 0
	for start < len(in) {
		if ctx.Err() != nil {
			return nil, false
		}
		end := min(start+quoteCheckEvery, len(in))
		for i := start; i < end; i++ {
			out = append(out, in[i])
			if in[i] == '\n' {
				out = append(out, prefix...)
			}
		}
		start = end
	}
	return out, true
}
