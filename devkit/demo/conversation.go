package demo

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"github.com/lisabot/lisa/adapters/matrix"
)

// played is what the conversation sent: the messages that address
// nobody and the three questions for Lisa (empty when the conversation
// stopped before asking it).
type played struct {
	chatter                          []id.EventID
	roomQuestion, research, followUp id.EventID
}

// replyWait bounds the wait for each of Lisa's answers.
const replyWait = 2 * time.Minute

// playConversation plays the demo's conversation: Alice mentions a plan,
// Bob asks Lisa about it (answered from the room), asks her to look
// something up (answered from a fetched page, with sources) and replies
// to that answer without mentioning her. It waits for each of her
// replies and has probe summarize each invocation. A question left
// unanswered for [replyWait] ends the conversation early without an
// error: the self-check reports it.
func playConversation(ctx context.Context, st *stack, session *matrix.Client, probe *invocationProbe, out io.Writer) (played, error) {
	var p played
	say := func(cli *mautrix.Client, body string, extra func(*event.MessageEventContent)) (id.EventID, error) {
		content := &event.MessageEventContent{MsgType: event.MsgText, Body: body}
		if extra != nil {
			extra(content)
		}
		resp, err := cli.SendMessageEvent(ctx, st.room, event.EventMessage, content)
		if err != nil {
			return "", matrix.Classify(err)
		}
		return resp.EventID, nil
	}
	// ask sends a question into *q and waits for its answer; answered is
	// false when none came in time.
	ask := func(q *id.EventID, body string, extra func(*event.MessageEventContent)) (reply id.EventID, answered bool, err error) {
		before := probe.snapshot()
		if *q, err = say(st.human, body, extra); err != nil {
			return "", false, err
		}
		found, err := awaitReply(ctx, session, string(st.room), string(*q), replyWait)
		if err != nil || found == "" {
			if err == nil {
				fmt.Fprintf(out, "[demo] no answer from Lisa within %s to %q\n", replyWait, body)
			}
			return "", false, err
		}
		probe.record(ctx, found, before)
		return id.EventID(found), true, nil
	}
	mention := func(m *event.MessageEventContent) {
		m.Mentions = &event.Mentions{UserIDs: []id.UserID{id.UserID(st.lisaAcc.UserID)}}
	}
	for _, c := range []struct {
		cli  *mautrix.Client
		body string
	}{
		{st.human, "Morning! Are we still on for self-hosting our chat?"},
		{st.aliceCli, "Yes! I'll set up our own homeserver this weekend, on the old NUC in the office."},
	} {
		ev, err := say(c.cli, c.body, nil)
		if err != nil {
			return p, err
		}
		p.chatter = append(p.chatter, ev)
	}
	if _, ok, err := ask(&p.roomQuestion, "Lisa, who offered to set up our homeserver, and on which machine?", mention); !ok {
		return p, err
	}
	research, ok, err := ask(&p.research, "Lisa, can you look up what Dendrite is and whether it's ready for a small team?", mention)
	if !ok {
		return p, err
	}
	_, _, err = ask(&p.followUp, "Thanks! Do we need PostgreSQL for a small team like ours, or is SQLite enough?", func(m *event.MessageEventContent) {
		m.RelatesTo = &event.RelatesTo{InReplyTo: &event.InReplyTo{EventID: research}}
	})
	return p, err
}

// awaitReply waits up to wait until Lisa's reply to event is on the
// homeserver and returns its ID, or "" if none came.
func awaitReply(ctx context.Context, s *matrix.Client, room, eventID string, wait time.Duration) (string, error) {
	deadline := time.Now().Add(wait)
	for {
		id, found, err := s.FindReply(ctx, room, eventID, "")
		if err == nil && found {
			return id, nil
		}
		if time.Now().After(deadline) {
			return "", nil
		}
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// storedMessages reads the room's messages back from the homeserver,
// oldest first.
func storedMessages(ctx context.Context, cli *mautrix.Client, room id.RoomID) ([]*event.Event, error) {
	resp, err := cli.Messages(ctx, room, "", "", mautrix.DirectionBackward, &mautrix.FilterPart{Types: []event.Type{event.EventMessage}}, 100)
	if err != nil {
		return nil, matrix.Classify(err)
	}
	events := slices.Clone(resp.Chunk)
	slices.Reverse(events)
	return events, nil
}

// printTranscript prints the room's messages (oldest first, as the
// homeserver stores them), each of Lisa's replies followed by the summary
// of its invocation.
func printTranscript(w io.Writer, events []*event.Event, summaries map[string]string) {
	fmt.Fprintln(w, "\n--- transcript (as stored by the homeserver) ---")
	for _, evt := range events {
		fmt.Fprintf(w, "%s: %s\n", evt.Sender, strings.ReplaceAll(plainBody(evt), "\n", "\n    "))
		if sum, ok := summaries[string(evt.ID)]; ok {
			fmt.Fprintf(w, "    [lisa's logs] %s\n", sum)
		}
	}
	fmt.Fprintln(w, "--- end ---")
}

// plainBody is a message's plain-text body without a reply fallback.
func plainBody(evt *event.Event) string {
	body, _ := evt.Content.Raw["body"].(string)
	return event.TrimReplyFallbackText(body)
}
