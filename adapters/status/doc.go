// Package status serves Lisa's status page: one server-rendered page
// (html/template, no script, no external assets, refreshing itself with a
// meta refresh) and the same data as /status.json. It wraps net/http.
//
// The page is off by default and loopback only; served beyond the
// machine it requires a bearer token (HTTP Basic with the token as
// password works for browsers). Every answer carries a strict
// Content-Security-Policy that allows no script at all, so text from the
// homeserver (room names, user IDs), which html/template escapes, could
// not run even if it slipped through.
package status
