package demo

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"github.com/lisabot/lisa/adapters/matrix"
)

// playConversation plays the demo's conversation: Alice mentions a plan,
// Bob asks Lisa about it (answered from the room), asks her to look
// something up (answered from a fetched page, with sources) and replies
// to that answer without mentioning her. It waits for each of her
// replies and has probe summarize each invocation.
func playConversation(ctx context.Context, st *stack, session *matrix.Client, probe *invocationProbe) error {
	say := func(cli *mautrix.Client, body string, extra func(*event.MessageEventContent)) (string, error) {
		content := &event.MessageEventContent{MsgType: event.MsgText, Body: body}
		if extra != nil {
			extra(content)
		}
		resp, err := cli.SendMessageEvent(ctx, st.room, event.EventMessage, content)
		if err != nil {
			return "", matrix.Classify(err)
		}
		return string(resp.EventID), nil
	}
	ask := func(body string, extra func(*event.MessageEventContent)) (string, error) {
		before := probe.snapshot()
		ev, err := say(st.human, body, extra)
		if err != nil {
			return "", err
		}
		reply, err := awaitReply(ctx, session, string(st.room), ev)
		if err == nil {
			probe.record(ctx, reply, before)
		}
		return reply, err
	}
	mention := func(m *event.MessageEventContent) {
		m.Mentions = &event.Mentions{UserIDs: []id.UserID{id.UserID(st.lisaAcc.UserID)}}
	}
	if _, err := say(st.human, "Morning! Are we still on for self-hosting our chat?", nil); err != nil {
		return err
	}
	if _, err := say(st.aliceCli, "Yes! I'll set up our own homeserver this weekend, on the old NUC in the office.", nil); err != nil {
		return err
	}
	if _, err := ask("Lisa, who offered to set up our homeserver, and on which machine?", mention); err != nil {
		return err
	}
	research, err := ask("Lisa, can you look up what Dendrite is and whether it's ready for a small team?", mention)
	if err != nil {
		return err
	}
	_, err = ask("Thanks! Do we need PostgreSQL for a small team like ours, or is SQLite enough?", func(m *event.MessageEventContent) {
		m.RelatesTo = &event.RelatesTo{InReplyTo: &event.InReplyTo{EventID: id.EventID(research)}}
	})
	return err
}

// awaitReply waits (bounded) until Lisa's reply to event is on the
// homeserver.
func awaitReply(ctx context.Context, s *matrix.Client, room, eventID string) (string, error) {
	deadline := time.Now().Add(2 * time.Minute)
	for {
		id, found, err := s.FindReply(ctx, room, eventID, "")
		if err == nil && found {
			return id, nil
		}
		if time.Now().After(deadline) {
			return "", fmt.Errorf("no reply from Lisa within 2 minutes")
		}
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// printTranscript prints the room's messages as the homeserver stores
// them, oldest first, each of Lisa's replies followed by the summary of
// its invocation.
func printTranscript(ctx context.Context, w io.Writer, cli *mautrix.Client, room id.RoomID, summaries map[string]string) error {
	resp, err := cli.Messages(ctx, room, "", "", mautrix.DirectionBackward, &mautrix.FilterPart{Types: []event.Type{event.EventMessage}}, 100)
	if err != nil {
		return matrix.Classify(err)
	}
	fmt.Fprintln(w, "\n--- transcript (as stored by the homeserver) ---")
	for i := len(resp.Chunk) - 1; i >= 0; i-- {
		evt := resp.Chunk[i]
		body, _ := evt.Content.Raw["body"].(string)
		body = event.TrimReplyFallbackText(body)
		fmt.Fprintf(w, "%s: %s\n", evt.Sender, strings.ReplaceAll(body, "\n", "\n    "))
		if sum, ok := summaries[string(evt.ID)]; ok {
			fmt.Fprintf(w, "    [lisa's logs] %s\n", sum)
		}
	}
	fmt.Fprintln(w, "--- end ---")
	return nil
}
