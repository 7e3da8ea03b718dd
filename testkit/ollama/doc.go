// Package ollama runs a real, third-party OpenAI-compatible LLM server
// for tests: Ollama [Version], built from its Go module, on 127.0.0.1,
// serving a tiny llama model with random weights that this package writes
// itself. The answers are nonsense, but the server, its wire format, its
// chat templates, its tool handling, its structured-output grammar, its
// silent truncation of an over-long prompt ("truncating input prompt" in
// its log) and its errors are real.
//
// # Binary
//
// [EnsureBinary] builds the binary once into Lisa's cache
// ($LISA_CACHE_DIR/ollama-v0.17.4/ollama, beside the Dendrite build)
// from a separate, embedded build module (ollama.gomod and ollama.gosum
// here), so Ollama's dependencies never enter Lisa's module; the build
// needs cgo, the Debian packages in [DebianPackages] and miniaudio.h from
// the Go module github.com/gen2brain/malgo (see EnsureBinary for why).
// LISA_OLLAMA_BIN ([BinaryEnv]) names a prebuilt binary instead. The
// command testkit/ollama/cmd/ensure-ollama runs the build; .ci/run does so
// before the tests.
//
// To move to another Ollama release: copy ollama.gomod and ollama.gosum
// into an empty directory as go.mod and go.sum, run
// `go get -tool github.com/ollama/ollama@vX.Y.Z`, copy them back, and
// update [Version].
//
// # Tests
//
// Tests that need the server call [Start] (or [Need] first): it skips the
// test with one line when the binary is not built, unless
// LISA_REQUIRE_OLLAMA=1 ([RequireEnv]), which builds it if missing and
// fails the test if that fails. Start launches `ollama serve` with its own
// home and model store in the test's temporary directory, creates the
// [Models] (with and without tool support, with num_ctx 8192, 512 and
// unset) and stops the server and its runners when the test ends.
// [WriteTinyModel] and [Model.Modelfile] are the model's two halves: the
// Hugging Face files Ollama's converter imports, and the Modelfile with
// its num_ctx and template.
package ollama
