// Package llmfake is the test kit's face of the scripted OpenAI-compatible
// chat-completions server in devkit/llmscript.
//
// The server itself, its step scripting and its wire format live in
// [github.com/lisabot/lisa/devkit/llmscript], which `lisa demo` links and
// which therefore never imports testing. This package re-exports all of it
// (type aliases and forwarding constructors, so llmfake and llmscript values
// are interchangeable) and adds what needs a testing.TB: [Start] returns a
// listening server that is closed when the test ends. Test code keeps
// importing llmfake; non-test code imports llmscript.
package llmfake
