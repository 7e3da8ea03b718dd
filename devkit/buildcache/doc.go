// Package buildcache holds what the launchers of the real servers Lisa is
// tried against (Dendrite in devkit, Ollama in testkit) share when they
// build a server from its Go module into ~/.cache/lisa: the exclusive
// build lock that lets parallel test processes wait for one build, the
// embedded build module written out, and the check that a binary given
// by the user is an executable file.
package buildcache
