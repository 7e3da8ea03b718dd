// Package need lets a test say which outside tool it needs, so that
// README's test command passes on a machine with Go alone while CI, which
// installs every tool, runs everything.
//
// Where a tool is missing, a test that needs it skips with one line that
// names the Debian package to install, unless the environment variable
// LISA_REQUIRE_<TOOL>=1 is set (as .ci/run sets it): then the test fails
// with that line instead.
//
// [Pandoc] is for tests that need pandoc itself; [Converter] is for tests
// that need some HTML-to-Markdown converter, and gives the built-in one
// where pandoc is missing.
package need
