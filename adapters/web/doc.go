// Package web is Lisa's bounded page downloader, the network half of the
// fetch_web_page tool (design §13.2, §14).
//
// A Fetcher owns a dedicated HTTP client: no proxy, no cookie jar, no
// credentials, TLS verification on, identity encoding only, and connect,
// header, idle-read and total deadlines. Bodies are streamed against a byte
// cap and only HTML, XHTML and plain text are accepted.
//
// Unless Config.AllowPrivateAddresses is set, every connection is checked
// against CheckAddr after name resolution and immediately before the TCP
// connect, and the checked IP literal is what gets dialled. Redirects,
// IP-literal hosts and DNS answers that change between lookups therefore
// all pass through the same guard.
//
// Every failure is a *messages.ToolError whose message is safe to show the
// model: it names no URL, address, header or body content. The package does
// not log.
package web
