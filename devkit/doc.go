// Package devkit is the root of Lisa's local development stack: the parts
// of a complete, throwaway Matrix-plus-LLM setup that `lisa demo` runs on a
// developer's machine and that the test kit (testkit/...) builds on.
//
//   - [github.com/lisabot/lisa/devkit/dendrite] builds, launches, restarts
//     and stops a real Dendrite homeserver on 127.0.0.1 and registers users
//     on it.
//   - [github.com/lisabot/lisa/devkit/llmscript] is a scripted, in-process
//     OpenAI-compatible chat-completions server.
//   - [github.com/lisabot/lisa/devkit/searx] is a SearXNG JSON API over a
//     fixed index, and [github.com/lisabot/lisa/devkit/webpages] serves the
//     demo's web pages; both record what they were asked.
//
// Unlike testkit, devkit is product code: the production binary links it
// (through `lisa demo`), so no non-test file under devkit/ ever imports
// "testing" (not even transitively) or anything under testkit/. Helpers that
// take a *testing.T or testing.TB live in testkit as thin wrappers over
// devkit; archtest enforces the rule.
package devkit
