// Package urlkey gives the one comparison form of web URLs that every part
// of Lisa compares them in: the research tools when they decide whether
// the model may fetch a URL (a URL some earlier result showed it), the
// Sources list, and the renderer when it decides whether a link in an
// answer is verified (its URL appeared in the invocation). Two spellings
// of the same page compare equal; pages that may differ never do.
//
// It is pure: no parsing policy (which schemes, hosts or lengths are
// allowed is the caller's), no I/O.
package urlkey
