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
// It has no non-test code.
package archtest
