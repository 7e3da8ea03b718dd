package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"github.com/lisabot/lisa/actors/app"
	"github.com/lisabot/lisa/actors/room"
	"github.com/lisabot/lisa/adapters/admin"
	"github.com/lisabot/lisa/devkit/homeserver"
	"github.com/lisabot/lisa/messages"
	"github.com/lisabot/lisa/persistence"
)

// reply is one of Lisa's messages as the homeserver has it.
type reply struct {
	to    id.EventID
	error bool
	// redacted: the reply was redacted (its relation is gone with its
	// content).
	redacted bool
}

// replies reads every message Lisa sent in room from the homeserver. The
// history is read twice, in pages of 100 and of 61, and the events of both
// reads are counted once each: Dendrite's backward pagination never
// returns the events that share their depth with a page's last event but
// were not on that page (see adapters/matrix scanPageSizes), and a read
// in pages of 100 once missed one of Lisa's replies here — a loss that
// was not one. Pages of two sizes rarely end at the same depth.
func (c *campaign) replies(ctx context.Context, room id.RoomID) ([]reply, error) {
	byID := map[id.EventID]reply{}
	for _, size := range []int{100, 61} {
		if err := c.readReplies(ctx, room, size, byID); err != nil {
			return nil, err
		}
	}
	out := make([]reply, 0, len(byID))
	for _, r := range byID {
		out = append(out, r)
	}
	return out, nil
}

// readReplies reads room's history backwards in pages of size and records
// Lisa's messages in byID.
func (c *campaign) readReplies(ctx context.Context, room id.RoomID, size int, byID map[id.EventID]reply) error {
	from := ""
	for range 1000 * 100 / size {
		resp, err := c.human.Messages(ctx, room, from, "", mautrix.DirectionBackward, &mautrix.FilterPart{Types: []event.Type{event.EventMessage}}, size)
		if err != nil {
			return err
		}
		for _, evt := range resp.Chunk {
			if string(evt.Sender) != c.bot.UserID {
				continue
			}
			var content struct {
				Body string `json:"body"`
				Rel  struct {
					IRT struct {
						EventID id.EventID `json:"event_id"`
					} `json:"m.in_reply_to"`
				} `json:"m.relates_to"`
			}
			if evt.Unsigned.RedactedBecause != nil {
				byID[evt.ID] = reply{redacted: true}
				continue
			}
			_ = json.Unmarshal(evt.Content.VeryRaw, &content)
			byID[evt.ID] = reply{to: content.Rel.IRT.EventID, error: strings.HasSuffix(content.Body, genericError)}
		}
		if resp.End == "" || len(resp.Chunk) == 0 {
			return nil
		}
		from = resp.End
	}
	return fmt.Errorf("room %s: history too long to count", room)
}

// replyCounts counts Lisa's replies per invoking event in every room the
// campaign used, including the one she must not answer in.
func (c *campaign) replyCounts(ctx context.Context) (map[id.EventID]int, []reply, error) {
	counts := map[id.EventID]int{}
	var all []reply
	for _, r := range append(slices.Clone(c.rooms), c.other) {
		rs, err := c.replies(ctx, r)
		if err != nil {
			return nil, nil, err
		}
		for _, rep := range rs {
			if !rep.redacted {
				counts[rep.to]++
			}
		}
		all = append(all, rs...)
	}
	return counts, all, nil
}

// settle is the quiet phase: no more faults; a fresh Lisa must answer
// everything still open, exactly once, and then stop cleanly. The
// invariants are checked here.
func (c *campaign) settle(ctx context.Context) error {
	c.progress("traffic over; quiet phase: every invocation must be answered exactly once")
	obsCtx, stopObs := context.WithCancel(ctx)
	defer stopObs()
	go c.observe(obsCtx)
	p, err := c.launchQuiet()
	if err != nil {
		return err
	}
	recoverStart := time.Now()
	c.mu.Lock()
	lateStoresBy := c.lastRestart.Add(lateStoreWindow(c.hs.Name()))
	c.mu.Unlock()

	// Every invocation answered at least once; a reply held because the
	// homeserver may have restarted during its send waits for the
	// late-store window first.
	deadline := time.Now().Add(5 * time.Minute)
	if d := lateStoresBy.Add(2 * time.Minute); d.After(deadline) {
		deadline = d
	}
	// Lisa cannot see a homeserver restart that happened while she was
	// down, so a reply held for a late store stays held for the window
	// after her start (room.ReconcileDone.TroubleAt): give it that too.
	// This is a bound, not a wait, and it holds on every server: a Lisa
	// that could not tell what the server is (its identity request met a
	// network fault) holds as on Dendrite, even on Synapse.
	if d := recoverStart.Add(lisaHold + 2*time.Minute); d.After(deadline) {
		deadline = d
	}
	if err := c.awaitAnswers(ctx, recoverStart, deadline); err != nil {
		return err
	}
	c.report.QuietCatchUp = time.Since(recoverStart).Round(100 * time.Millisecond)
	if err := c.awaitSentinels(ctx, deadline.Add(2*time.Minute)); err != nil {
		return err
	}
	if w := time.Until(lateStoresBy); w > 0 {
		c.report.LateStoreWait = w.Round(time.Second)
	}
	if err := c.awaitLateStores(ctx, lateStoresBy); err != nil {
		return err
	}
	if err := c.awaitRedactions(ctx, time.Now().Add(2*time.Minute)); err != nil {
		return err
	}
	if err := c.count(ctx); err != nil {
		return err
	}
	live, err := c.inspect()
	if err != nil {
		c.report.violate("admin socket: %v", err)
	}
	c.checkTyping()
	c.checkStop(p)

	// The journals on disk replay to the live state.
	if live != nil {
		c.checkReplay(live)
	}
	c.finishReport()
	return nil
}

// launchQuiet starts the quiet phase's Lisa and waits until she is ready.
func (c *campaign) launchQuiet() (*lisaProc, error) {
	p, err := c.launch(true)
	if err != nil {
		return nil, err
	}
	select {
	case <-p.ready:
	case <-p.done:
		return nil, fmt.Errorf("quiet lisa exited (%s): %s", p.cause(), p.lastError())
	case <-time.After(2 * time.Minute):
		return nil, fmt.Errorf("quiet lisa not ready after 2 minutes")
	}
	return p, nil
}

// awaitAnswers waits until every invocation has at least one reply, or
// until deadline, when it notes how many are still unanswered (the count
// then reports them as losses).
func (c *campaign) awaitAnswers(ctx context.Context, recoverStart, deadline time.Time) error {
	for {
		counts, _, err := c.replyCounts(ctx)
		if err != nil {
			return err
		}
		missing := 0
		c.mu.Lock()
		for ev := range c.invocations {
			if counts[ev] == 0 {
				missing++
			}
		}
		c.mu.Unlock()
		if missing == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			c.progress("%d invocations still unanswered after %s", missing, time.Since(recoverStart).Round(time.Second))
			return nil
		}
		time.Sleep(2 * time.Second)
	}
}

// awaitSentinels sends a sentinel per room and waits, until deadline,
// for all of them to be answered: rooms answer in order, so once it is
// answered any duplicate of an earlier invocation would have been sent.
func (c *campaign) awaitSentinels(ctx context.Context, deadline time.Time) error {
	sentinels := map[id.EventID]id.RoomID{}
	for _, r := range c.rooms {
		ev, err := c.send(ctx, r, &event.MessageEventContent{MsgType: event.MsgText, Body: "Lisa, sentinel: are you done?",
			Mentions: &event.Mentions{UserIDs: []id.UserID{id.UserID(c.bot.UserID)}}})
		if err != nil {
			return err
		}
		sentinels[ev] = r
		c.mu.Lock()
		c.invocations[ev] = r
		c.mu.Unlock()
	}
	for {
		counts, _, err := c.replyCounts(ctx)
		if err != nil {
			return err
		}
		left := 0
		for ev := range sentinels {
			if counts[ev] == 0 {
				left++
			}
		}
		if left == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d sentinels unanswered", left)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// lateStoreWindow is how long after the homeserver named name came back
// from a restart a send it received before may still be stored: the
// campaign counts only after it, so that a late store shows up as the
// duplicate it would be.
//
// Dendrite: dendriteLateStore (its JetStream queue redelivers an
// unacknowledged send after the restart).
//
// Synapse 1.67.0: zero. A send is stored within its request, or never:
// RoomSendEventRestServlet.on_PUT (synapse/rest/client/room.py) awaits
// on_POST, which awaits
// EventCreationHandler.create_and_send_nonmember_event
// (synapse/handlers/message.py); that looks the transaction ID up
// (get_event_id_from_transaction_id) and then awaits
// handle_new_client_event → _persist_event → persist_and_notify_client_event
// → EventsPersistenceStorageController.persist_event
// (synapse/storage/controllers/persist_events.py), whose queue
// (_EventPeristenceQueue) is in memory: the event and its transaction ID
// are written in one database transaction before the 200 goes out, and a
// send a restart cuts short is gone with the process, not redelivered
// later. A retry after the restart finds the stored event by its
// transaction ID (event_txn_id, 24 h) or stores it for the first time.
func lateStoreWindow(name string) time.Duration {
	if name == homeserver.Synapse {
		return 0
	}
	return dendriteLateStore
}

// awaitLateStores waits until lateStoresBy (see lateStoreWindow).
func (c *campaign) awaitLateStores(ctx context.Context, lateStoresBy time.Time) error {
	wait := time.Until(lateStoresBy)
	if wait <= 0 {
		return nil
	}
	c.progress("waiting %s for late stores of sends cut short by the last homeserver restart", wait.Round(time.Second))
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(wait):
		return nil
	}
}

// checkTyping checks that Lisa is shown typing nowhere: a killed Lisa
// cannot clear hers; the homeserver's timeout (Lisa's lease is 30 s) must
// have, and a live Lisa must have.
func (c *campaign) checkTyping() {
	typingDeadline := time.Now().Add(75 * time.Second)
	for len(c.lisaTyping()) > 0 && time.Now().Before(typingDeadline) {
		time.Sleep(500 * time.Millisecond)
	}
	if left := c.lisaTyping(); len(left) > 0 {
		c.report.TypingLeft = len(left)
		c.report.violate("lisa still shown typing in %d rooms", len(left))
	}
}

// checkStop stops the quiet Lisa p and checks that she stops cleanly,
// without leaked goroutines.
func (c *campaign) checkStop(p *lisaProc) {
	if err := p.stop(30 * time.Second); err != nil {
		c.report.violate("quiet stop: %v", err)
	}
	c.account(p)
	leaked, text := p.leakReport()
	c.report.LeakedGoroutines = leaked
	switch {
	case leaked < 0:
		c.report.violate("the goroutine leak check did not run")
	case leaked > 0:
		c.report.violate("%d goroutines leaked after stop: %s", leaked, text)
	}
}

// count compares Lisa's replies on the homeserver with the invocations.
func (c *campaign) count(ctx context.Context) error {
	counts, all, err := c.replyCounts(ctx)
	if err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	r := c.report
	r.Invocations = len(c.invocations)
	r.Chatter = len(c.chatter)
	r.Replies = len(all)
	redactedReplies := 0
	for _, rep := range all {
		if rep.error {
			r.ErrorReplies++
		}
		if rep.redacted {
			redactedReplies++
		}
	}
	c.countRedacted(counts, redactedReplies)
	name := func(ev id.EventID) string {
		return fmt.Sprintf("%s (%s) in %s", ev, messages.Hash(string(ev)), messages.Hash(string(c.invocations[ev])))
	}
	for ev := range c.invocations {
		switch n := counts[ev]; {
		case n == 0:
			r.Losses++
			r.LostEvents = append(r.LostEvents, name(ev))
		case n > 1:
			r.Duplicates += n - 1
			r.DuplicatedEvents = append(r.DuplicatedEvents, name(ev))
		}
	}
	slices.Sort(r.LostEvents)
	slices.Sort(r.DuplicatedEvents)
	for ev, n := range counts {
		_, asked := c.invocations[ev]
		_, redacted := c.rel.redacted[ev]
		if !asked && !redacted {
			r.Unexpected += n
		}
	}
	if r.Losses > 0 {
		r.violate("%d invocations never answered", r.Losses)
	}
	if r.Duplicates > 0 {
		r.violate("%d duplicate replies", r.Duplicates)
	}
	if r.Unexpected > 0 {
		r.violate("%d replies to messages that were not invocations", r.Unexpected)
	}
	return nil
}

// inspect asks the live quiet Lisa, through its admin socket, for each
// room's state digest and its actors, and checks that no actor leaked.
func (c *campaign) inspect() (map[string]string, error) {
	cl, err := admin.Dial(filepath.Join(c.dataDir, "admin.sock"), 5*time.Second)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	raw, err := cl.Call("digests")
	if err != nil {
		return nil, err
	}
	var digests map[string]string
	if err := json.Unmarshal(raw, &digests); err != nil {
		return nil, err
	}
	raw, err = cl.Call("actors")
	if err != nil {
		return nil, err
	}
	var actors []struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal(raw, &actors); err != nil {
		return nil, err
	}
	want := map[string]bool{"app": true, "app/rooms": true, "app/sync": true, "app/tools": true}
	for _, r := range c.rooms {
		want[app.RoomActorID(string(r))] = true
	}
	seen := map[string]bool{}
	for _, a := range actors {
		seen[a.ID] = true
		if want[a.ID] || strings.HasPrefix(a.ID, "app/tools/w") {
			continue
		}
		c.report.LeakedActors = append(c.report.LeakedActors, a.ID)
	}
	for w := range want {
		if !seen[w] {
			c.report.violate("actor %s missing after the quiet phase", w)
		}
	}
	if n := len(c.report.LeakedActors); n > 0 {
		c.report.violate("%d actors left over after every invocation finished", n)
	}
	c.report.ActorsChecked = len(actors)
	return digests, nil
}

// checkReplay replays each room's journal from the stopped Lisa's store.
func (c *campaign) checkReplay(live map[string]string) {
	store, err := persistence.OpenBadger(c.dataDir, persistence.BadgerOptions{Logger: c.log})
	if err != nil {
		c.report.violate("reopening the store: %v", err)
		return
	}
	defer store.Close()
	prov, err := persistence.NewProvider(store, 50, slog.New(slog.DiscardHandler))
	if err != nil {
		c.report.violate("provider: %v", err)
		return
	}
	for roomID, want := range live {
		st, err := room.Replay(prov, app.RoomActorID(roomID))
		if err != nil {
			c.report.violate("replaying %s: %v", roomID, err)
			continue
		}
		if got := room.Digest(&st); got != want {
			c.report.violate("room %s: journal replay differs from the live state:\nlive     %q\nreplayed %q", roomID, want, got)
			continue
		}
		c.report.RoomsReplayed++
	}
}

// finishReport folds the campaign's counters into the report.
func (c *campaign) finishReport() {
	c.mu.Lock()
	defer c.mu.Unlock()
	r := c.report
	r.ActorFaults = c.actorFaults
	r.LisaStarts = c.launches
	r.Exits = c.exits
	for _, at := range c.firstReply {
		if at.Before(c.faultsEnd) {
			r.RepliesUnderFaults++
		}
	}
	// Recovery: from each process-level fault to the next reply seen.
	for _, f := range c.faultTimes {
		i, _ := slices.BinarySearchFunc(c.firstReply, f, func(a, b time.Time) int { return a.Compare(b) })
		if i < len(c.firstReply) {
			r.MaxRecovery = max(r.MaxRecovery, c.firstReply[i].Sub(f).Round(10*time.Millisecond))
		}
	}
	for _, n := range c.actorFaults {
		r.TotalActorFaults += n
	}
	for _, n := range r.NetFaults {
		r.TotalNetFaults += n
	}
	for _, n := range r.Kills {
		r.TotalKills += n
	}
}
