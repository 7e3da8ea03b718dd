package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"github.com/lisabot/lisa/testkit/hostile"
	"github.com/lisabot/lisa/testkit/need"
)

// maxHostileRSS is the most resident memory Lisa may ever reach while a
// room member feeds her the hostile corpus (issue #15).
const maxHostileRSS = 200 << 20

// peakRSS reads the peak resident set size (VmHWM) of process pid.
func peakRSS(t *testing.T, pid int) int64 {
	t.Helper()
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Fatal("no VmHWM in /proc status")
	return 0
}

// TestHostileEventsBlackBox: a member sends every hostile case of the
// corpus into an allowed room of a real homeserver, then an ordinary
// mention. Lisa answers each addressed case exactly once, ignores the
// rest, answers the ordinary mention promptly (sync kept moving), and her
// peak memory stays bounded.
func TestHostileEventsBlackBox(t *testing.T) {
	onEachHomeserver(t, func(t *testing.T, hs string) {
		e := newE2E(t, hs, 1)
		// Every addressed case should really be answered: no flood limits here.
		e.extraConfig = "sender_rate_limit = 0\nroom_queue_limit = 1000\n"
		room := e.allowed[0]
		// The production binary, built without the race detector, so its
		// memory is what an operator's Lisa would use.
		p := e.startBinary(buildLisa(t))
		e.awaitLog(p, "sync baseline recorded")

		want := map[id.EventID]int{}
		var ignored []id.EventID
		for _, c := range hostile.Corpus("Lisa") {
			resp, err := e.human.SendMessageEvent(e.ctx, room, event.EventMessage, c.Content)
			if err != nil {
				// The homeserver may refuse a case itself; that is its
				// right, and nothing reaches Lisa.
				t.Logf("homeserver refused %s: %v", c.Name, err)
				continue
			}
			if c.Addressed {
				want[resp.EventID] = 1
			} else {
				ignored = append(ignored, resp.EventID)
			}
		}
		asked := time.Now()
		ordinary := e.mention(room, "an ordinary question after all that")
		e.awaitReply(room, ordinary)
		t.Logf("ordinary mention answered %v after it was sent, behind %d hostile invocations", time.Since(asked).Round(time.Millisecond), len(want))
		want[ordinary] = 1
		e.expectReplies(room, want)
		for _, ev := range ignored {
			if n := e.replies(room)[ev]; n != 0 {
				t.Errorf("unaddressed hostile event %s got %d replies", ev, n)
			}
		}
		rss := peakRSS(t, p.cmd.Process.Pid)
		t.Logf("Lisa's peak RSS: %.1f MiB", float64(rss)/(1<<20))
		if rss > maxHostileRSS {
			t.Errorf("Lisa's peak RSS is %.1f MiB, bound %d MiB", float64(rss)/(1<<20), maxHostileRSS>>20)
		}
		if strings.Contains(p.text(), e.bot.AccessToken) {
			t.Error("the access token appears in Lisa's logs")
		}
	})
}

// TestFloodGetsOneOverloadReply: a member who mentions Lisa faster than
// runtime.sender_rate_limit allows gets answers up to the limit, one
// in-character overload reply, and then silence (logged), while another
// member is still answered.
func TestFloodGetsOneOverloadReply(t *testing.T) {
	onEachHomeserver(t, func(t *testing.T, hs string) {
		e := newE2E(t, hs, 1)
		e.extraConfig = "sender_rate_limit = 3\nsender_rate_window_seconds = 600\n"
		room := e.allowed[0]
		other, err := e.hs.RegisterUser(e.ctx, "mallory", "mallory-password-1", "MALLORY")
		if err != nil {
			t.Fatal(err)
		}
		otherCli, _ := mautrix.NewClient(e.hs.URL(), id.UserID(other.UserID), other.AccessToken)
		if _, err := e.human.InviteUser(e.ctx, room, &mautrix.ReqInviteUser{UserID: id.UserID(other.UserID)}); err != nil {
			t.Fatal(err)
		}
		if _, err := otherCli.JoinRoomByID(e.ctx, room); err != nil {
			t.Fatal(err)
		}
		p := e.start()
		e.awaitLog(p, "sync baseline recorded")

		var flood []id.EventID
		for i := range 8 {
			flood = append(flood, e.mention(room, fmt.Sprintf("flood question %d", i)))
		}
		// Edits in the burst (#31): of refused questions, and of chatter so
		// that it mentions Lisa. An edit is never an invocation, so none is
		// refused again and none gets a notice of its own.
		chatter := e.say(room, plainText("just chatting during the flood"))
		e.say(room, edit(flood[5], "flood question 5, edited", true, e.bot.UserID))
		e.say(room, edit(flood[7], "flood question 7, edited", true, e.bot.UserID))
		e.say(room, edit(chatter, "Lisa, chatter edited during the flood", true, e.bot.UserID))
		resp, err := otherCli.SendMessageEvent(e.ctx, room, event.EventMessage, &event.MessageEventContent{MsgType: event.MsgText, Body: "Lisa, a question from someone else",
			Mentions: &event.Mentions{UserIDs: []id.UserID{id.UserID(e.bot.UserID)}}})
		if err != nil {
			t.Fatal(err)
		}
		e.awaitReply(room, resp.EventID)
		// The notice for flood[3] is sent before the queued answers after the
		// head: by the time the other member is answered, all are in.
		want := map[id.EventID]int{flood[0]: 1, flood[1]: 1, flood[2]: 1, flood[3]: 1, resp.EventID: 1}
		e.expectReplies(room, want)
		if !strings.Contains(e.replyBody(room, flood[3]), "Too much at once.") {
			t.Errorf("the refused mention got %q, want the overload error", e.replyBody(room, flood[3]))
		}
		if n := strings.Count(p.text(), "invocation refused"); n != 5 {
			t.Errorf("%d refusals logged, want 5 (flood questions 3 to 7)", n)
		}
		notices := 0
		for _, body := range e.lisaBodies(room) {
			if strings.Contains(body, "Too much at once.") {
				notices++
			}
		}
		if n := notices; n != 1 {
			t.Errorf("%d overload notices in the room, want 1 for the whole burst", n)
		}
	})
}

// buildLisa builds the daemon binary (never with the race detector) into a
// temporary directory.
func buildLisa(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "lisa")
	out, err := exec.Command("go", "build", "-o", bin, "github.com/lisabot/lisa/cmd/lisa").CombinedOutput()
	if err != nil {
		t.Fatalf("building lisa: %v\n%s", err, out)
	}
	return bin
}

// startBinary runs `bin run` as Lisa, like start runs the test binary.
func (e *e2e) startBinary(bin string) *lisaProc {
	e.t.Helper()
	cmd := exec.Command(bin, "run", "--config", e.writeConfig())
	cmd.Env = append(os.Environ(), "LISA_MATRIX_ACCESS_TOKEN="+e.bot.AccessToken, need.ConverterEnv(e.t))
	return e.launch(cmd)
}

// collect reads Lisa's JSON log lines until the pipe closes.
func (p *lisaProc) collect(r io.Reader) {
	defer close(p.done)
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		p.mu.Lock()
		p.logs = append(p.logs, line)
		p.mu.Unlock()
		var rec struct{ Msg string }
		if json.Unmarshal([]byte(line), &rec) == nil {
			select {
			case p.events <- rec.Msg:
			default:
			}
		}
	}
}

// replyBody returns the body of Lisa's reply to ev in room.
func (e *e2e) replyBody(room id.RoomID, ev id.EventID) string {
	e.t.Helper()
	resp, err := e.human.Messages(e.ctx, room, "", "", mautrix.DirectionBackward, &mautrix.FilterPart{Types: []event.Type{event.EventMessage}}, 100)
	if err != nil {
		e.t.Fatal(err)
	}
	for _, evt := range resp.Chunk {
		if string(evt.Sender) == e.bot.UserID && strings.Contains(string(evt.Content.VeryRaw), string(ev)) {
			_ = evt.Content.ParseRaw(evt.Type)
			return evt.Content.AsMessage().Body
		}
	}
	return ""
}
