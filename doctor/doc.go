// Package doctor is `lisa doctor`: it loads a configuration as
// `lisa check-config` does and then asks the outside world whether Lisa
// can work with it — the homeserver (reachable, spec versions, whoami),
// each allowed room (joined, not encrypted, power levels), the LLM server
// (llm.model listed by GET /models; the context window the server runs
// it with, where it says, against llm.context_window_tokens; one tiny
// tool round trip; one structured-output request), SearXNG (a JSON
// answer), the
// HTML-to-Markdown converter (a small page), the data directory
// (writable, local filesystem, Badger's lock free) and the admin socket's
// directory (mode and owner).
//
// Each check belongs to a named [Section] (config, homeserver, rooms, llm,
// search, converter, datadir, admin), and `lisa doctor --only` selects
// sections. A section is a list of [Check] values: adding a check is
// adding an entry. Sections run side by side and every check within a
// time limit, so a server that never answers costs seconds, not minutes.
// Each check reports [Result] lines (ok, warning, failed, or skipped when
// a check it needs failed) naming the configuration key or server setting
// to change; [Report.Code] maps them to the exit code (0 all ok, 1
// warnings, 2 cannot work).
//
// Like the daemon, the package composes the adapters (matrix, llm,
// search, pandoc, admin) and persistence; it acts in no room and never
// opens the store. No secret appears in a result: the checks only name
// env: references, and [Run] removes any secret value that might slip in.
package doctor
