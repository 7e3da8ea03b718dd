package web

import (
	"bytes"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/net/html"
)

// MaxTitleRunes bounds Page.Title.
const MaxTitleRunes = 300

// maxTitleScan bounds how much raw title text is collected before
// cleaning.
const maxTitleScan = 4 * MaxTitleRunes * utf8.UTFMax

// extractTitle returns the cleaned text of the first <title> element:
// entities decoded, invalid UTF-8 replaced, control characters dropped,
// whitespace collapsed and the result cut to MaxTitleRunes.
func extractTitle(body []byte) string {
	z := html.NewTokenizer(bytes.NewReader(body))
	for {
		switch z.Next() {
		case html.ErrorToken:
			return ""
		case html.StartTagToken:
			name, _ := z.TagName()
			if string(name) != "title" {
				continue
			}
			var raw strings.Builder
			for z.Next() == html.TextToken && raw.Len() < maxTitleScan {
				raw.Write(z.Text())
			}
			return cleanTitle(raw.String())
		}
	}
}

func cleanTitle(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	var b strings.Builder
	runes, space := 0, false
	for _, r := range s {
		if unicode.IsSpace(r) {
			space = b.Len() > 0
			continue
		}
		if unicode.IsControl(r) || unicode.Is(unicode.Cf, r) {
			continue
		}
		if space {
			if runes++; runes > MaxTitleRunes {
				break
			}
			b.WriteByte(' ')
			space = false
		}
		if runes++; runes > MaxTitleRunes {
			break
		}
		b.WriteRune(r)
	}
	return strings.TrimSpace(b.String())
}
