// Package backoff computes retry delays: a base delay doubled per
// consecutive failure and capped, optionally spread by jitter drawn from an
// injected source, and a server-requested delay (HTTP Retry-After, Matrix
// retry_after_ms) honoured under a cap of its own.
//
// It is pure and deterministic: it reads no clock and no global random
// source, so tests can pin every delay. It imports nothing of Lisa's, so
// actors and adapters alike may use it.
package backoff
