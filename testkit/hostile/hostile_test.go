package hostile_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"unicode/utf8"

	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"github.com/lisabot/lisa/adapters/matrix"
	"github.com/lisabot/lisa/adapters/render"
	"github.com/lisabot/lisa/adapters/roomctx"
	"github.com/lisabot/lisa/messages/roompb"
	"github.com/lisabot/lisa/testkit/hostile"
)

const (
	room = id.RoomID("!room:example.org")
	bot  = "@lisa:example.org"
)

// mkEvent wraps content in an event as the homeserver delivers it.
func mkEvent(t testing.TB, eventID string, content []byte) *event.Event {
	t.Helper()
	raw := fmt.Sprintf(`{"type":"m.room.message","room_id":%q,"event_id":%q,"sender":"@mallory:example.org","origin_server_ts":1785000000000,"content":%s}`,
		room, eventID, content)
	var evt event.Event
	if err := json.Unmarshal([]byte(raw), &evt); err != nil {
		t.Fatalf("event does not decode: %v", err)
	}
	return &evt
}

// fetcher serves GET /context with the hostile event just before the
// invocation, so context building meets it as history too.
type fetcher struct {
	before, inv *event.Event
}

func (f *fetcher) Context(context.Context, id.RoomID, id.EventID, *mautrix.FilterPart, int) (*mautrix.RespContext, error) {
	return &mautrix.RespContext{Event: f.inv, EventsBefore: []*event.Event{f.before}}, nil
}

func (f *fetcher) GetEvent(context.Context, id.RoomID, id.EventID) (*event.Event, error) {
	return nil, mautrix.HTTPError{Response: &http.Response{StatusCode: http.StatusNotFound}, RespError: &mautrix.RespError{ErrCode: "M_NOT_FOUND", StatusCode: http.StatusNotFound}}
}

func (f *fetcher) JoinedMembers(context.Context, id.RoomID) (*mautrix.RespJoinedMembers, error) {
	return &mautrix.RespJoinedMembers{}, nil
}

// TestHostileEventsAreBoundedPerEvent sends every case of the corpus
// through what one event costs Lisa: classification (sync), context
// building (as the invocation and as history before another one) and
// rendering (as if the model quoted it back), and holds each event to
// the per-event bounds.
func TestHostileEventsAreBoundedPerEvent(t *testing.T) {
	classifier := matrix.NewClassifier(bot, []string{string(room)}, []string{"Lisa"})
	notLisa := func(context.Context, string, string) (bool, error) { return false, nil }
	limits := roomctx.Limits{MaxEvents: 40, MaxCharacters: 24_000, MaxEventCharacters: 4_000, MaxReplyDepth: 2}
	rend := render.New()
	for i, c := range hostile.Corpus("Lisa") {
		t.Run(c.Name, func(t *testing.T) {
			content := c.JSON()
			if len(content) > hostile.MaxEventBytes-1_000 {
				t.Fatalf("case is %d bytes: too large for one event", len(content))
			}
			eventID := fmt.Sprintf("$hostile%d", i)
			var (
				verdict matrix.Verdict
				block   string
				reply   []byte
			)
			cost := hostile.Measure(func() {
				evt := mkEvent(t, eventID, content)
				var cand *roompb.Candidate
				cand, verdict = classifier.Classify(context.Background(), room, evt, notLisa)
				inv := mkEvent(t, "$ordinary", []byte(`{"msgtype":"m.text","body":"Lisa, summarise please"}`))
				if cand == nil {
					cand = &roompb.Candidate{RoomId: string(room), EventId: "$ordinary", Sender: "@mallory:example.org", Trigger: "alias", Body: "Lisa, summarise please"}
				} else {
					inv = evt
				}
				b := roomctx.New(&fetcher{before: mkEvent(t, eventID+"b", content), inv: inv}, bot, limits)
				var err error
				if block, err = b.Build(context.Background(), cand); err != nil {
					t.Errorf("context: %v", err)
				}
				body, _ := c.Content["body"].(string)
				if reply, err = rend.Reply(body, eventID); err != nil {
					t.Errorf("render: %v", err)
				}
			})
			t.Logf("verdict=%s cpu=%v alloc=%.1f MiB context=%d bytes reply=%d bytes", verdict, cost.CPU, float64(cost.Alloc)/(1<<20), len(block), len(reply))
			if cost.CPU > hostile.CPUBound() {
				t.Errorf("one event cost %v of CPU, bound %v", cost.CPU, hostile.CPUBound())
			}
			if cost.Alloc > hostile.MaxAlloc {
				t.Errorf("one event allocated %.1f MiB, bound %d MiB", float64(cost.Alloc)/(1<<20), hostile.MaxAlloc>>20)
			}
			if c.Addressed != verdict.Accepted() {
				t.Errorf("verdict %s, want accepted=%v", verdict, c.Addressed)
			}
			if !utf8.ValidString(block) || len(block) > 4*limits.MaxCharacters+8_192 {
				t.Errorf("context block is %d bytes (valid UTF-8: %v)", len(block), utf8.ValidString(block))
			}
			if strings.ContainsRune(string(reply), '\u202E') {
				t.Error("the reply carries a bidi override")
			}
		})
	}
}
