package hostile

import "strings"

// WebPageBytes is the size of the web-scale hostile pages: the default of
// web.max_download_bytes, the largest page Lisa downloads unless told
// otherwise.
const WebPageBytes = 2_000_000

// Page is one hostile web page for the HTML-to-Markdown converters.
type Page struct {
	// Name says what the page attacks.
	Name string
	// HTML is the page.
	HTML []byte
}

// Pages returns hostile web pages: every case of [Corpus] as a page of
// its own (its formatted_body, else its body), and shapes that hurt an
// HTML-to-Markdown converter, at [WebPageBytes]: formatting bombs, deep
// quotes and lists around long text, many small nodes, a sparse wide
// table, Markdown-special floods and one long text.
func Pages() []Page {
	var ps []Page
	for _, c := range Corpus("Lisa") {
		s, _ := c.Content["formatted_body"].(string)
		if s == "" {
			s, _ = c.Content["body"].(string)
		}
		ps = append(ps, Page{Name: c.Name, HTML: []byte(s)})
	}
	n := WebPageBytes
	deep := strings.Repeat("<blockquote><ul><li>", 20)
	for _, p := range []struct{ name, html string }{
		{"web_formatting_bomb", formattingBomb(n)},
		{"web_nested_lists", repeatTo("", "<ul><li>", "x", n)},
		{"web_nested_tables", repeatTo("", "<table><tr><td>", "x", n)},
		{"web_unclosed_tags", repeatTo("", "<p><li><td><a>", "", n)},
		{"web_deep_long_text", repeatTo(deep, "a line of text\n<br>", "", n)},
		{"web_deep_pre", repeatTo(strings.Repeat("<blockquote>", 47)+"<pre>", "a line of code\n", "", n)},
		// Quotes around a <pre> of newlines: the library's quote passes
		// copied the text 4 times per level with growing buffers
		// (582 MiB) and could not be interrupted (1 s past a 100 ms
		// deadline).
		{"web_quoted_pre_newlines", repeatTo(strings.Repeat("<blockquote>", 7)+"<pre>", "\n", "", n)},
		{"web_many_paragraphs", repeatTo("", "<p>x", "", n)},
		{"web_many_links", repeatTo("", `<a href="https://e.org/">https://bank.example</a>`, "", n)},
		{"web_sparse_table", repeatTo("<table><tr>"+strings.Repeat("<td>w", 2000), "<tr><td>r", "</table>", n)},
		{"web_bracket_line", repeatTo("<p>", "[", "", n)},
		{"web_backtick_line", repeatTo("<p>", "`", "", n)},
		{"web_one_long_text", repeatTo("", "word ", "", n)},
	} {
		ps = append(ps, Page{Name: p.name, HTML: []byte(p.html)})
	}
	return ps
}
