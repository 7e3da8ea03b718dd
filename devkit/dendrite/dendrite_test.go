package dendrite

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"
)

// start launches a server for a test and stops it in t.Cleanup; it is
// what testkit/dendrite.Start does, repeated here because devkit must not
// import the test kit.
func start(t *testing.T, opts Options) *Server {
	t.Helper()
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelInfo}))
	}
	s, err := Launch(t.Context(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := s.Stop(ctx); err != nil {
			t.Error(err)
		}
	})
	return s
}

// client returns a mautrix client for acct, checked with whoami.
func client(t *testing.T, s *Server, acct Account) *mautrix.Client {
	t.Helper()
	cli, err := mautrix.NewClient(s.URL(), id.UserID(acct.UserID), acct.AccessToken)
	if err != nil {
		t.Fatalf("mautrix client for %v: %v", acct, err)
	}
	cli.DeviceID = id.DeviceID(acct.DeviceID)
	return cli
}

// timelineOnly is an inline /sync filter: message timeline events only.
const timelineOnly = `{"presence":{"not_types":["*"]},"account_data":{"not_types":["*"]},` +
	`"room":{"timeline":{"types":["m.room.message"],"limit":20},"state":{"not_types":["*"]},` +
	`"ephemeral":{"not_types":["*"]},"account_data":{"not_types":["*"]}}}`

// awaitEvent long-polls /sync from since until eventID arrives in roomID's
// timeline and returns its body. Each /sync blocks in the server until
// there is news, so this waits for the event rather than sleeping.
func awaitEvent(t *testing.T, cli *mautrix.Client, since string, roomID id.RoomID, eventID id.EventID) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	for {
		resp, err := cli.FullSyncRequest(ctx, mautrix.ReqSync{Since: since, Timeout: 5000, FilterID: timelineOnly})
		if err != nil {
			t.Fatalf("waiting for %s in /sync: %v", eventID, err)
		}
		since = resp.NextBatch
		if jr := resp.Rooms.Join[roomID]; jr != nil {
			for _, evt := range jr.Timeline.Events {
				if evt.ID == eventID {
					if err := evt.Content.ParseRaw(evt.Type); err != nil {
						t.Fatalf("parse %s: %v", eventID, err)
					}
					return evt.Content.AsMessage().Body
				}
			}
		}
	}
}

// TestLifecycle brings a server up, exercises users, rooms and
// transaction-ID idempotency, restarts it and stops it.
func TestLifecycle(t *testing.T) {
	t.Parallel()
	ctx := t.Context()

	began := time.Now()
	s := start(t, Options{})
	ready := time.Since(began)

	bot, err := s.RegisterUser(ctx, "lisa", "lisa-password-1", "LISADEV")
	if err != nil {
		t.Fatal(err)
	}
	human, err := s.RegisterUser(ctx, "alice", "alice-password-1", "ALICEDEV")
	if err != nil {
		t.Fatal(err)
	}
	usersReady := time.Since(began)
	t.Logf("bring-up: dendrite ready after %d ms, two users registered and logged in after %d ms",
		ready.Milliseconds(), usersReady.Milliseconds())

	if bot.UserID != "@lisa:localhost" || bot.DeviceID != "LISADEV" {
		t.Fatalf("bot account = %v, want @lisa:localhost (device LISADEV)", bot)
	}
	botCli, humanCli := client(t, s, bot), client(t, s, human)
	who, err := botCli.Whoami(ctx)
	if err != nil {
		t.Fatalf("whoami: %v", err)
	}
	if who.UserID != "@lisa:localhost" || who.DeviceID != "LISADEV" {
		t.Fatalf("whoami = %s/%s, want @lisa:localhost/LISADEV", who.UserID, who.DeviceID)
	}

	room, err := botCli.CreateRoom(ctx, &mautrix.ReqCreateRoom{Preset: "private_chat", Name: "lisa test"})
	if err != nil {
		t.Fatalf("create room: %v", err)
	}
	if _, err := botCli.InviteUser(ctx, room.RoomID, &mautrix.ReqInviteUser{UserID: id.UserID(human.UserID)}); err != nil {
		t.Fatalf("invite: %v", err)
	}
	if _, err := humanCli.JoinRoomByID(ctx, room.RoomID); err != nil {
		t.Fatalf("join: %v", err)
	}
	members, err := botCli.JoinedMembers(ctx, room.RoomID)
	if err != nil {
		t.Fatalf("joined members: %v", err)
	}
	if len(members.Joined) != 2 {
		t.Fatalf("joined members = %d, want 2", len(members.Joined))
	}

	const txnID = "lisa-fixed-txn-1"
	send := func(body string) id.EventID {
		t.Helper()
		resp, err := botCli.SendMessageEvent(ctx, room.RoomID, event.EventMessage,
			&event.MessageEventContent{MsgType: event.MsgText, Body: body},
			mautrix.ReqSendEvent{TransactionID: txnID})
		if err != nil {
			t.Fatalf("send with txn %s: %v", txnID, err)
		}
		return resp.EventID
	}
	first := send("hello once")
	if again := send("hello once"); again != first {
		t.Fatalf("same txn ID before restart: got %s then %s, want the same event", first, again)
	}

	oldPID, url := s.PID(), s.URL()
	began = time.Now()
	if err := s.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("restart: %d ms", time.Since(began).Milliseconds())
	if s.PID() == oldPID || s.PID() == 0 {
		t.Errorf("PID after restart = %d, before %d; want a new process", s.PID(), oldPID)
	}
	if s.URL() != url {
		t.Errorf("URL after restart = %s, want %s", s.URL(), url)
	}

	// Data survives the restart: the room, the event and the access tokens.
	evt, err := botCli.GetEvent(ctx, room.RoomID, first)
	if err != nil {
		t.Fatalf("get event after restart: %v", err)
	}
	if err := evt.Content.ParseRaw(evt.Type); err != nil {
		t.Fatalf("parse event: %v", err)
	}
	if body := evt.Content.AsMessage().Body; body != "hello once" {
		t.Errorf("event body after restart = %q, want %q", body, "hello once")
	}

	// Dendrite's amnesia: it keeps client transaction IDs only in memory
	// (internal/transactions, keyed by access token, txnId and URL path,
	// 30-60 min), so after a restart the same token and txnId create a NEW,
	// duplicate event instead of returning the original event ID. Lisa must
	// not rely on the server for send idempotency across homeserver
	// restarts, and later tests use Restart to provoke exactly this.
	since, err := humanCli.FullSyncRequest(ctx, mautrix.ReqSync{FilterID: timelineOnly})
	if err != nil {
		t.Fatalf("initial sync: %v", err)
	}
	second := send("hello once")
	if second == first {
		t.Fatalf("same txn ID after restart returned the original event %s; Dendrite's txn cache is expected to be lost", first)
	}
	// The duplicate is a real event the other member receives. (Reads lag
	// writes in Dendrite: GET /event right after a send can still answer
	// 404, so wait for it with /sync long-polling instead.)
	if body := awaitEvent(t, humanCli, since.NextBatch, room.RoomID, second); body != "hello once" {
		t.Errorf("duplicate event body = %q, want %q", body, "hello once")
	}

	pid, dir := s.PID(), s.DataDir()
	if err := s.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("kill(%d, 0) after Stop = %v, want ESRCH", pid, err)
	}
	if got := s.PID(); got != 0 {
		t.Errorf("PID after Stop = %d, want 0", got)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("temporary data dir after Stop: %v, want it removed", err)
	}
	if err := s.Stop(ctx); err != nil {
		t.Errorf("second Stop: %v", err)
	}
	if err := s.Restart(ctx); !errors.Is(err, ErrStopped) {
		t.Errorf("Restart after Stop = %v, want ErrStopped", err)
	}
}

// TestRateLimiting checks that the option turns Dendrite's rate limiting on
// and that admin accounts are exempt.
func TestRateLimiting(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := start(t, Options{RateLimiting: true})
	user, err := s.RegisterUser(ctx, "busy", "busy-password-1", "BUSYDEV")
	if err != nil {
		t.Fatal(err)
	}
	admin, err := s.RegisterAdmin(ctx, "boss", "boss-password-1", "BOSSDEV")
	if err != nil {
		t.Fatal(err)
	}
	// whoami is rate limited; 5 requests per 500 ms per device pass.
	burst := func(acct Account) (limited int) {
		cli := client(t, s, acct)
		var (
			wg sync.WaitGroup
			mu sync.Mutex
		)
		for range 12 {
			wg.Go(func() {
				_, err := cli.Whoami(ctx)
				mu.Lock()
				defer mu.Unlock()
				switch {
				case errors.Is(err, mautrix.MLimitExceeded):
					limited++
				case err != nil:
					t.Errorf("whoami as %v: %v", acct, err)
				}
			})
		}
		wg.Wait()
		return limited
	}
	if n := burst(user); n == 0 {
		t.Errorf("12 parallel whoami as an ordinary user: none rate limited")
	}
	if n := burst(admin); n != 0 {
		t.Errorf("12 parallel whoami as admin: %d rate limited, want 0", n)
	}
}

// TestPersistentDataDir checks that a caller-provided data directory is kept
// and that a second Launch on it sees the earlier account.
func TestPersistentDataDir(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	dir := filepath.Join(t.TempDir(), "hs")
	s := start(t, Options{DataDir: dir})
	if _, err := s.RegisterUser(ctx, "keeper", "keeper-password-1", "KEEPDEV"); err != nil {
		t.Fatal(err)
	}
	if err := s.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, keyFile)); err != nil {
		t.Fatalf("data dir not kept: %v", err)
	}
	s2 := start(t, Options{DataDir: dir})
	acct, err := s2.Login(ctx, "keeper", "keeper-password-1", "KEEPDEV2")
	if err != nil {
		t.Fatalf("login on relaunched server: %v", err)
	}
	if acct.UserID != "@keeper:localhost" || acct.DeviceID != "KEEPDEV2" {
		t.Errorf("account = %v, want @keeper:localhost (device KEEPDEV2)", acct)
	}
	_, err = s2.Login(ctx, "keeper", "wrong-password", "")
	var apiErr *APIError
	if !errors.As(err, &apiErr) || apiErr.Status != 403 || apiErr.ErrCode != "M_FORBIDDEN" {
		t.Errorf("login with a wrong password: %v, want HTTP 403 M_FORBIDDEN", err)
	}
	if strings.Contains(err.Error(), "wrong-password") {
		t.Errorf("error contains the password: %v", err)
	}
}

// TestBadBinary checks the errors for a missing binary and for one that dies
// during start-up, and that the shared secret is masked in the output tail.
func TestBadBinary(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	missing := filepath.Join(t.TempDir(), "no-such-dendrite")
	_, err := Launch(ctx, Options{Binary: missing})
	if err == nil || !strings.Contains(err.Error(), missing) || !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Launch with a missing binary: %v; want an error naming %s and wrapping ErrNotExist", err, missing)
	}

	// A fake dendrite that prints its configuration, complains and exits.
	script := filepath.Join(t.TempDir(), "dendrite")
	const body = "#!/bin/sh\ncat \"$2\"\necho 'fake dendrite: boom' >&2\nexit 3\n"
	if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	_, err = Launch(ctx, Options{Binary: script})
	if err == nil {
		t.Fatal("Launch with a dying binary succeeded")
	}
	msg := err.Error()
	for _, want := range []string{"exited before becoming ready", "exit status 3", "fake dendrite: boom",
		`registration_shared_secret: "` + redacted + `"`} {
		if !strings.Contains(msg, want) {
			t.Errorf("error does not contain %q:\n%s", want, msg)
		}
	}
}

// TestBinaryEnv checks that LISA_DENDRITE_BIN wins and is validated.
func TestBinaryEnv(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "nope")
	t.Setenv(BinaryEnv, missing)
	_, err := EnsureBinary(t.Context(), nil)
	if err == nil || !strings.Contains(err.Error(), BinaryEnv) || !strings.Contains(err.Error(), missing) {
		t.Errorf("EnsureBinary with %s=%s: %v; want an error naming both", BinaryEnv, missing, err)
	}
	notExec := filepath.Join(t.TempDir(), "plain")
	if err := os.WriteFile(notExec, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv(BinaryEnv, notExec)
	if _, err := EnsureBinary(t.Context(), nil); err == nil || !strings.Contains(err.Error(), "not executable") {
		t.Errorf("EnsureBinary with a non-executable file: %v", err)
	}
}

// TestBuilt checks what Built reports without building: the binary
// LISA_DENDRITE_BIN names (or why it is none), the cached binary, or ""
// when a build is needed; and that the build module names its Go.
func TestBuilt(t *testing.T) {
	cache := t.TempDir()
	t.Setenv(CacheDirEnv, cache)
	t.Setenv(BinaryEnv, "")
	if bin, err := Built(); bin != "" || err != nil {
		t.Errorf("Built with an empty cache = %q, %v; want \"\", nil", bin, err)
	}
	if dir, err := CacheDir(); dir != cache || err != nil {
		t.Errorf("CacheDir = %q, %v; want %q", dir, err, cache)
	}
	cached := filepath.Join(cache, "dendrite-"+Version, "dendrite")
	if err := os.MkdirAll(filepath.Dir(cached), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cached, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if bin, err := Built(); bin != cached || err != nil {
		t.Errorf("Built with a cached binary = %q, %v; want %q", bin, err, cached)
	}
	missing := filepath.Join(t.TempDir(), "nope")
	t.Setenv(BinaryEnv, missing)
	if bin, err := Built(); bin != "" || err == nil || !strings.Contains(err.Error(), BinaryEnv) {
		t.Errorf("Built with %s=%s = %q, %v; want an error naming the variable", BinaryEnv, missing, bin, err)
	}
	if v, err := GoDirective(); err != nil || !regexp.MustCompile(`^1\.\d+(\.\d+)?$`).MatchString(v) {
		t.Errorf("GoDirective = %q, %v", v, err)
	}
}

// TestAccountRedaction checks that formatting or logging an Account never
// shows its access token.
func TestAccountRedaction(t *testing.T) {
	t.Parallel()
	const token = "syt_very_secret_token"
	a := Account{UserID: "@lisa:localhost", DeviceID: "LISADEV", AccessToken: token}
	var logged strings.Builder
	slog.New(slog.NewJSONHandler(&logged, nil)).Info("x", "account", a)
	for _, s := range []string{fmt.Sprint(a), fmt.Sprintf("%v %+v %#v %s %q", a, a, a, a, a), logged.String()} {
		if strings.Contains(s, token) {
			t.Errorf("access token leaked: %s", s)
		}
		if !strings.Contains(s, "LISADEV") {
			t.Errorf("device missing: %s", s)
		}
	}
}

// TestEnsureBinaryBuild builds Dendrite into a fresh cache directory from
// the embedded build module, from two goroutines at once: the file lock must
// make one build and hand the same path to both. With a warm Go build cache
// this is mostly a link step.
func TestEnsureBinaryBuild(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds dendrite; skipped with -short")
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
	defer cancel()
	root := t.TempDir()
	log := slog.New(slog.NewTextHandler(t.Output(), nil))
	var (
		wg    sync.WaitGroup
		paths [2]string
		errs  [2]error
	)
	began := time.Now()
	for i := range paths {
		wg.Go(func() { paths[i], errs[i] = ensureBinaryIn(ctx, log, root) })
	}
	wg.Wait()
	t.Logf("build into an empty cache: %d ms", time.Since(began).Milliseconds())
	for i, err := range errs {
		if err != nil {
			t.Fatalf("caller %d: %v", i, err)
		}
	}
	want := filepath.Join(root, "dendrite-"+Version, "dendrite")
	if paths[0] != want || paths[1] != want {
		t.Fatalf("paths = %q, want both %q", paths, want)
	}
	s := start(t, Options{Binary: want})
	if _, err := s.RegisterUser(ctx, "built", "built-password-1", ""); err != nil {
		t.Fatal(err)
	}
}

// TestKill: Kill SIGKILLs the process as a crash would; Restart brings the
// server back on the same URL with its users; after Stop, Kill reports
// ErrStopped.
func TestKill(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := start(t, Options{})
	if _, err := s.RegisterUser(ctx, "crash", "crash-password-1", "CRASHDEV"); err != nil {
		t.Fatal(err)
	}
	url, pid := s.URL(), s.PID()
	if err := s.Kill(); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("kill(%d, 0) after Kill = %v, want ESRCH", pid, err)
	}
	if s.PID() != 0 {
		t.Errorf("PID after Kill = %d, want 0", s.PID())
	}
	if err := s.Kill(); err != nil {
		t.Errorf("Kill while not running = %v", err)
	}
	if err := s.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	if s.URL() != url {
		t.Errorf("URL after Restart %s, want %s", s.URL(), url)
	}
	if _, err := s.Login(ctx, "crash", "crash-password-1", "CRASHDEV2"); err != nil {
		t.Fatalf("login after Kill and Restart: %v", err)
	}
	if tail := s.OutputTail(); strings.Contains(tail, s.secret) {
		t.Error("OutputTail shows the shared secret")
	}
	if err := s.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if err := s.Kill(); !errors.Is(err, ErrStopped) {
		t.Errorf("Kill after Stop = %v, want ErrStopped", err)
	}
}
