package matrix

import (
	"context"
	"testing"

	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"
)

// threadMsg is a message in the thread of root; inReplyTo, when set, is
// its m.in_reply_to, a fallback when fallingBack.
func threadMsg(body, root, inReplyTo string, fallingBack bool, mention bool) map[string]any {
	m := text(body)
	rel := map[string]any{"rel_type": "m.thread", "event_id": root}
	if inReplyTo != "" {
		rel["m.in_reply_to"] = map[string]any{"event_id": inReplyTo}
		rel["is_falling_back"] = fallingBack
	}
	m["m.relates_to"] = rel
	if mention {
		m["m.mentions"] = map[string]any{"user_ids": []string{testBot}}
	}
	return m
}

// TestClassifyThreads: a thread message is answered in its thread (the
// candidate names the root); a real reply to Lisa inside a thread invokes
// her, the fallback reply that thread clients add does not.
func TestClassifyThreads(t *testing.T) {
	c := NewClassifier(testBot, []string{string(testRoom)}, []string{"Lisa"})
	isLisa := func(_ context.Context, _, ev string) (bool, error) { return ev == "$lisa", nil }
	cases := []struct {
		name     string
		content  map[string]any
		want     Verdict
		wantRoot string
		wantTo   string
	}{
		{"mention in thread", threadMsg("what now?", "$root", "$root", true, true), TriggerMention, "$root", ""},
		{"alias in thread", threadMsg("Lisa, what now?", "$root", "", false, false), TriggerAlias, "$root", ""},
		{"real reply to lisa in thread", threadMsg("and then?", "$root", "$lisa", false, false), TriggerReply, "$root", "$lisa"},
		{"fallback to lisa is no reply", threadMsg("and then?", "$root", "$lisa", true, false), RejectNotAddress, "", ""},
		{"thread on lisa's message, fallback only", threadMsg("nice", "$lisa", "$lisa", true, false), RejectNotAddress, "", ""},
		{"invalid root is ignored", threadMsg("Lisa?", "not-an-id", "", false, false), TriggerAlias, "", ""},
		{"main timeline mention", map[string]any{"msgtype": "m.text", "body": "hi", "m.mentions": map[string]any{"user_ids": []string{testBot}}}, TriggerMention, "", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cand, got := c.Classify(context.Background(), testRoom, mkEvent(t, "@u:hs", "m.room.message", tc.content, nil), isLisa)
			if got != tc.want {
				t.Fatalf("verdict = %s, want %s", got, tc.want)
			}
			if cand == nil {
				return
			}
			if cand.GetThreadRootEventId() != tc.wantRoot || cand.GetReplyToEventId() != tc.wantTo {
				t.Fatalf("thread root %q reply to %q, want %q %q", cand.GetThreadRootEventId(), cand.GetReplyToEventId(), tc.wantRoot, tc.wantTo)
			}
		})
	}
}

// TestClassifyRedaction: redactions in allowed rooms go to the room with
// their target; Lisa's own, other rooms' and malformed ones do not.
func TestClassifyRedaction(t *testing.T) {
	c := NewClassifier(testBot, []string{string(testRoom)}, nil)
	cases := []struct {
		name   string
		sender string
		room   string
		mut    func(*event.Event)
		want   Verdict
		target string
	}{
		{"content redacts (v11)", "@u:hs", string(testRoom), nil, TriggerRedaction, "$x"},
		{"top-level redacts", "@u:hs", string(testRoom), func(e *event.Event) { e.Redacts = "$top" }, TriggerRedaction, "$top"},
		{"own redaction", testBot, string(testRoom), nil, RejectOwn, ""},
		{"other room", "@u:hs", "!other:hs", nil, RejectRoom, ""},
		{"invalid target", "@u:hs", string(testRoom), func(e *event.Event) { e.Redacts = "x y" }, RejectMalformed, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			evt := mkEvent(t, tc.sender, "m.room.redaction", map[string]any{"redacts": "$x"}, tc.mut)
			cand, got := c.Redaction(testRoomID(tc.room), evt)
			if got != tc.want {
				t.Fatalf("verdict = %s, want %s", got, tc.want)
			}
			if (cand != nil) != got.Accepted() || (cand != nil && (cand.GetRedactsEventId() != tc.target || cand.GetEventId() != "$e")) {
				t.Fatalf("candidate = %v", cand)
			}
		})
	}
}

// TestClassifyEditShape: the edit's own part of an edit is checked
// before anything is looked up.
func TestClassifyEditShape(t *testing.T) {
	c := NewClassifier(testBot, []string{string(testRoom)}, []string{"Lisa"})
	edit := func(orig string, nc map[string]any) map[string]any {
		return map[string]any{"msgtype": "m.text", "body": "* x", "m.new_content": nc,
			"m.relates_to": map[string]any{"rel_type": "m.replace", "event_id": orig}}
	}
	cases := []struct {
		name    string
		sender  string
		content map[string]any
		want    Verdict
	}{
		{"text edit", "@u:hs", edit("$orig", text("Lisa?")), ""},
		{"own edit", testBot, edit("$orig", text("Lisa?")), RejectOwn},
		{"invalid original", "@u:hs", edit("orig", text("Lisa?")), RejectMalformed},
		{"no new content", "@u:hs", map[string]any{"msgtype": "m.text", "body": "* x", "m.relates_to": map[string]any{"rel_type": "m.replace", "event_id": "$orig"}}, RejectMalformed},
		{"new content not text", "@u:hs", edit("$orig", map[string]any{"msgtype": "m.image", "body": "Lisa.png"}), RejectType},
		{"empty new text", "@u:hs", edit("$orig", text("  ")), RejectMalformed},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			evt := mkEvent(t, tc.sender, "m.room.message", tc.content, nil)
			if !IsEdit(evt) {
				t.Fatal("IsEdit = false")
			}
			orig, nc, got := c.Edit(testRoom, evt)
			if got != tc.want || (got == "") != (nc != nil) || (got == "" && orig != "$orig") {
				t.Fatalf("Edit = %q, %v, %q; want verdict %q", orig, nc, got, tc.want)
			}
		})
	}
	if IsEdit(mkEvent(t, "@u:hs", "m.room.message", text("Lisa?"), nil)) {
		t.Fatal("a plain message is no edit")
	}
}

func testRoomID(s string) id.RoomID { return id.RoomID(s) }
