//go:build !unix

package pandoc

import "os/exec"

// isolate keeps exec's default cancellation, which kills only the child.
func isolate(*exec.Cmd) {}
