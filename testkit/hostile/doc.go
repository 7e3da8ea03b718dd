// Package hostile generates the worst-case Matrix message contents a room
// member can send — formatting bombs, deep nesting, huge attributes, giant
// or malformed IDs, long bodies, odd Unicode — and measures what one
// event costs (CPU time and bytes allocated) as it passes through
// classification, context building and rendering.
//
// [Pages] turns the corpus into hostile web pages and adds shapes, at the
// size of the largest download, that hurt an HTML-to-Markdown converter;
// the package's tests run them, and the demo's pages, through both
// converters (pandoc and the built-in one) and hold each to its bounds
// ([ConvertCPUBound], [ConvertAllocBound] for the built-in one, which
// runs inside Lisa; the timeout for pandoc). FuzzConverters feeds both
// the same inputs.
//
// The corpus is deterministic: the same names produce the same bytes on
// every run, so a regression shows up as a changed number, not a flake.
// Every case fits in one Matrix event (at most 64 KiB of JSON).
package hostile
