package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"maunium.net/go/mautrix/id"

	"github.com/lisabot/lisa/testkit/crashfs"
)

// TestStoreSyncFailureStopsLisa: Lisa's data directory is on a crashfs
// mount; after a first question is answered, every fsync starts failing
// with EIO (a dying disk). Lisa must log the failure at ERROR, report it
// in `lisa health` (status failed, exit 2), send nothing more, and exit
// non-zero. Then she starts again on the image of what stable storage
// held at that moment (nothing the failed syncs covered): the question
// asked during the failure is answered once, the first one not again.
func TestStoreSyncFailureStopsLisa(t *testing.T) {
	onEachHomeserver(t, func(t *testing.T, hs string) {
		crashfs.Require(t)
		e := newE2E(t, hs, 1)
		room := e.allowed[0]
		fsys, err := crashfs.Mount(t.TempDir(), t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { // after Lisa is killed (cleanups run last first)
			if err := fsys.Unmount(); err != nil {
				t.Error(err)
			}
		})
		e.dataDir = filepath.Join(fsys.Dir, "data")
		p := e.start()
		e.awaitLog(p, "sync baseline recorded")
		first := e.mention(room, "first question, on a healthy disk")
		e.awaitReply(room, first)

		fsys.FailSync(true)
		during := e.mention(room, "second question, while the disk fails")
		e.awaitLog(p, "stopping: the store could not sync to disk")

		var out, errOut bytes.Buffer
		code := run(context.Background(), []string{"health", "--config", filepath.Join(e.dir, "lisa.toml")}, nil, &out, &errOut, os.LookupEnv)
		var health struct {
			Status  string   `json:"status"`
			Reasons []string `json:"reasons"`
		}
		if err := json.Unmarshal(out.Bytes(), &health); err != nil {
			t.Fatalf("lisa health printed %q (%v); stderr %q", out.String(), err, errOut.String())
		}
		if code != 2 || health.Status != "failed" || len(health.Reasons) == 0 || !strings.Contains(health.Reasons[0], "could not sync to disk") {
			t.Errorf("lisa health during the failure: exit %d, %+v; want exit 2, status failed with the reason", code, health)
		}

		ws := p.wait(t)
		if ws.Signaled() || ws.ExitStatus() == 0 {
			t.Errorf("Lisa exited with %v after the store failed, want a non-zero exit code", ws)
		}
		logs := p.text()
		if !strings.Contains(logs, `"level":"ERROR"`) || !strings.Contains(logs, `"code":"store_sync_failed"`) {
			t.Errorf("no ERROR line with code store_sync_failed; logs:\n%s", logs)
		}
		if strings.Contains(logs, e.bot.AccessToken) {
			t.Error("the access token appears in Lisa's logs")
		}
		// Nothing was sent on the strength of the failed syncs.
		e.expectReplies(room, map[id.EventID]int{first: 1})

		// A restart on what the disk holds: replay, reconcile, answer once.
		img := filepath.Join(t.TempDir(), "img")
		if err := fsys.Image(fsys.Len(), img, 0, nil); err != nil {
			t.Fatal(err)
		}
		e.dataDir = filepath.Join(img, "data")
		e.start()
		e.awaitReply(room, during)
		sentinel := e.settle(room)
		e.expectReplies(room, map[id.EventID]int{first: 1, during: 1, sentinel: 1})
	})
}
