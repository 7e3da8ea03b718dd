// Package archtest holds the architecture tests, the import rules of
// docs/architecture.md checked against `go list`:
//
//   - actors and messages stay free of adapters, the composition root,
//     Badger, mautrix, go-openai and net/http;
//   - an adapter imports no actor and no other adapter (package daemon,
//     the composition root, wires them together);
//   - only commands, the chaos harness and tests import the test kit;
//   - the daemon binary (cmd/lisa) links no testing, goleak, chaos or
//     test-kit package;
//   - the development stack (devkit) imports neither testing nor testkit;
//   - every package has a doc.go with a package comment.
//
// It also keeps the docs in step with the code: every test that
// docs/behaviour.md names as proof exists (in the file it names, with
// the golden scenarios it names), and docs/configuration.md,
// docs/operations.md and docs/architecture.md say what those tests prove
// about the timeout reply, the edit rule, where the prompt facts go and a
// spent tool budget (the prompt facts also checked against the code).
//
// It has no non-test code.
package archtest
