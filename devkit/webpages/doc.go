// Package webpages is a small local web server with a couple of
// real-looking HTML articles, part of the local development stack
// `lisa demo` runs: the demo's search results point at these pages, so
// Lisa's fetch_web_page and html_to_markdown tools do real HTTP and real
// pandoc conversion without any internet access. It never imports testing.
//
// A [Server] listens on 127.0.0.1 on a random port and serves the
// embedded articles listed by [Server.Pages]; every request is recorded
// (see [Server.Requested]) so a caller can check which pages were really
// fetched.
//
// Use [Start], [Server.Pages] and [Server.Close].
package webpages
