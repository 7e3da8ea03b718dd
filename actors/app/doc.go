// Package app builds Lisa's actor system and its root supervisor. The app
// actor owns the top-level children (rooms now; sync, tools and admin as
// they arrive) and supervises them one for one, so one child failing never
// touches its siblings.
package app
