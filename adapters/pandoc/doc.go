// Package pandoc is Lisa's html_to_markdown adapter: it turns fetched HTML
// into GitHub-flavoured Markdown by running the pandoc executable (design
// §13.3).
//
// The command line is fixed, pandoc --from=html --to=gfm --wrap=none
// --sandbox, and nothing from the HTML or the model reaches it: the markup
// goes in on standard input. Each run gets a fresh, empty working directory
// (removed afterwards), an environment of only PATH, HOME and LANG, and its
// own process group, which is killed as a whole on timeout or when stdout
// passes the output ceiling. On Linux the child also gets SIGKILL as its
// parent-death signal, so a daemon that is killed outright leaves no
// converter behind; the goroutine that starts the child stays locked to
// its OS thread until the child is reaped, because the kernel sends that
// signal when the forking thread, not the process, ends. Stderr is
// drained into a small bounded buffer and is never part of an error; at
// most its length reaches the debug log.
//
// Output is cleaned before it is returned: line endings become "\n",
// control characters other than newline and tab are removed, long runs of
// blank lines are shortened, and the text is valid UTF-8.
//
// Every failure is a *messages.ToolError (conversion_failed, timeout or
// output_too_large) with a short, stable message.
package pandoc
