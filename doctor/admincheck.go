package doctor

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/lisabot/lisa/adapters/admin"
)

// adminSection: the admin socket's directory is one only Lisa's user can
// change (she refuses to create the socket elsewhere).
func adminSection() Section {
	return Section{Name: "admin", Checks: []Check{{Name: "socket", Run: checkAdminSocket}}}
}

func checkAdminSocket(_ context.Context, e *Env) []Result {
	rt := e.Res.Config.Runtime
	sock := rt.AdminSocket
	dir := filepath.Dir(sock)
	fi, err := os.Lstat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist) && dir == rt.DataDir:
		return []Result{{Status: OK, Message: fmt.Sprintf("the admin socket %s will be in the data directory, which Lisa creates with mode 0700", sock)}}
	case err != nil:
		return []Result{{Status: Failed, Message: fmt.Sprintf("the admin socket's directory %s cannot be inspected: %v", dir, unwrapPath(err)), Fix: "runtime.admin_socket"}}
	}
	if err := admin.CheckDir(dir); err != nil {
		return []Result{{Status: Failed, Message: err.Error(), Fix: "run lisa doctor as Lisa's user; chown the directory to her and chmod go-w, or change runtime.admin_socket"}}
	}
	msg := fmt.Sprintf("the admin socket's directory %s has mode %04o and is this user's (uid %d)", dir, fi.Mode().Perm(), os.Geteuid())
	if admin.Serving(sock) {
		msg += "; a Lisa is serving " + sock
	}
	return []Result{{Status: OK, Message: msg}}
}
