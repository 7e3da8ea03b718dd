// Package llmcorpus is a compatibility corpus of real LLM servers'
// chat-completions replies, for the scripted model (devkit/llmscript) to
// replay: the wire shapes of Ollama's OpenAI layer, llama.cpp's
// llama-server with and without --jinja, vLLM, LM Studio, OpenAI and
// Mistral, one file per family, and the failure shapes any server or
// proxy may send (an error object in a 200 reply, no choices, a reply cut
// off in the middle of the JSON, content null without tool calls, broken
// tool arguments, an unknown tool, several calls in one turn, an event
// stream nobody asked for, a huge or never-ending body).
//
// Every [Shape] names its source in Shape.Source (and in a comment): the
// server's documentation, the source file that writes it, or the public
// issue where it was reported. What Lisa does with each shape is stated by
// the tests that replay them (adapters/llm for the wire, daemon for the
// answer), not here.
package llmcorpus
