// Package persistencetest is the conformance suite every persistence.Store
// must pass. Run calls it with a factory; the Badger and Memory stores run
// the same cases, so a test double can never drift from production.
package persistencetest
