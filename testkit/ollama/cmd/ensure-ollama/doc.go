// Command ensure-ollama builds the real LLM server the tests use (Ollama,
// from its Go module, CPU only) into Lisa's cache if it is not there yet,
// and prints its path. CI runs it before the tests and then sets
// LISA_REQUIRE_OLLAMA=1, so the real-server tests run instead of skipping.
package main
