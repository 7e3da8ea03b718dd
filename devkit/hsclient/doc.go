// Package hsclient holds what the test homeservers (devkit/dendrite,
// devkit/synapse) share of their HTTP API: shared-secret registration,
// password login, and the Account and APIError types. Both servers speak
// the same admin API (/_synapse/admin/v1/register) and client login, so
// one implementation serves both; the server's name only prefixes its
// errors and log lines.
package hsclient
