// Package archtest holds the architecture tests: the import rules of
// docs/architecture.md (actors and messages stay free of adapters, Badger,
// mautrix, go-openai and net/http) and the rule that every package has a
// doc.go with a package comment. It has no non-test code.
package archtest
