package synapse

import (
	"context"
	"errors"
	"fmt"
	"github.com/lisabot/lisa/devkit/hsproc"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

const (
	// defaultStartTimeout bounds the wait for /_matrix/client/versions.
	defaultStartTimeout = 60 * time.Second
	// readyPollInterval is the pause between readiness probes.
	readyPollInterval = 25 * time.Millisecond
	// stopGrace is how long Stop and Restart wait after SIGTERM before
	// killing the process group.
	stopGrace = 10 * time.Second
	// outputTail is how much of Synapse's output is kept for errors.
	outputTail = 64 << 10
	// portAttempts is how often a start tries another port when the one
	// it wanted was taken.
	portAttempts = 3
	// redacted replaces secrets in text shown to people.
	redacted = "[REDACTED]"
)

// ErrStopped is returned by [Server.Restart] after [Server.Stop].
var ErrStopped = errors.New("synapse: server stopped")

// errStartTimeout is the cause of the readiness context expiring.
var errStartTimeout = errors.New("start timeout")

// Options configure [Launch]. The zero value is valid.
type Options struct {
	// Tarball is the Synapse source tarball. Empty means [FindTarball].
	Tarball string

	// Python is the interpreter. Empty means [DefaultPython].
	Python string

	// DataDir holds the configuration, signing key, SQLite database and
	// media. Empty means a new temporary directory that [Server.Stop]
	// removes; a given directory is created if needed and never removed, so
	// a later Launch on it sees the same users, rooms and events.
	DataDir string

	// DefaultRateLimits keeps Synapse's own rate limits (rc_message: 0.2
	// messages/s with a burst of 10 per user; login, registration and join
	// limits alike), for tests about rate limiting. By default they are
	// raised beyond anything a test reaches.
	DefaultRateLimits bool

	// StartTimeout bounds how long Launch and Restart wait for the server
	// to answer GET /_matrix/client/versions. Zero means 60 s.
	StartTimeout time.Duration

	// Logger receives lifecycle records (unpack, start, ready, stop). Nil
	// discards them.
	Logger *slog.Logger

	// Output receives Synapse's stdout and stderr (its log). Nil discards
	// it. Write errors are ignored. Either way, the last 64 KiB are kept and
	// included, secrets masked, in start-failure errors.
	Output io.Writer
}

// Server is a running Synapse homeserver bound to 127.0.0.1. Its methods
// are safe for concurrent use.
type Server struct {
	log          *slog.Logger
	python       string
	src          string // unpacked source, on PYTHONPATH
	dataDir      string
	ownsDataDir  bool
	configPath   string
	secret       string // registration shared secret; never logged
	macaroon     string // macaroon_secret_key; never logged
	raiseLimits  bool
	startTimeout time.Duration
	output       *outputWriter
	client       *http.Client
	port         atomic.Int64 // the port of the listener; see URL

	tokensMu sync.Mutex
	tokens   []string // access tokens handed out by Login, masked in output

	mu      sync.Mutex
	proc    *process // nil while not running
	stopped bool
}

// process is one run of Synapse.
type process struct {
	cmd  *exec.Cmd
	done chan struct{} // closed once the process has been reaped
	err  error         // result of Wait; read only after done is closed
}

// wait reaps the process. It is the only caller of cmd.Wait.
func (p *process) wait() {
	p.err = p.cmd.Wait()
	close(p.done)
}

// exited reports whether the process has been reaped.
func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Launch unpacks the tarball into the cache if needed, writes a
// configuration, writes a signing key on first use of the data
// directory, starts Synapse on a free loopback port in its own process group
// and returns once it answers HTTP requests. It installs nothing: without
// the tarball or the Python packages it returns a *[MissingError]. The
// caller must call [Server.Stop]. ctx bounds only the start-up; the server
// outlives it.
func Launch(ctx context.Context, opts Options) (*Server, error) {
	log := orDiscard(opts.Logger)
	python := opts.Python
	if python == "" {
		python = DefaultPython
	}
	tarball, err := checkPrerequisites(ctx, python, opts.Tarball)
	if err != nil {
		return nil, err
	}
	src, err := EnsureSource(ctx, log, tarball)
	if err != nil {
		return nil, err
	}
	dataDir, owns, err := prepareDataDir(opts.DataDir)
	if err != nil {
		return nil, err
	}
	s := &Server{
		log:          log,
		python:       python,
		src:          src,
		dataDir:      dataDir,
		ownsDataDir:  owns,
		configPath:   filepath.Join(dataDir, configFile),
		raiseLimits:  !opts.DefaultRateLimits,
		startTimeout: opts.StartTimeout,
		output:       &outputWriter{out: opts.Output},
		client: &http.Client{
			Timeout:   30 * time.Second,
			Transport: &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 4},
		},
	}
	if s.startTimeout <= 0 {
		s.startTimeout = defaultStartTimeout
	}
	if err := s.launch(ctx); err != nil {
		if owns {
			_ = os.RemoveAll(dataDir)
		}
		return nil, err
	}
	return s, nil
}

// launch prepares the secrets, configuration and key and starts the first
// process.
func (s *Server) launch(ctx context.Context) error {
	var err error
	if s.secret, err = randomSecret(); err != nil {
		return err
	}
	if s.macaroon, err = loadOrCreateSecret(filepath.Join(s.dataDir, macaroonFile)); err != nil {
		return err
	}
	port, err := freePort()
	if err != nil {
		return err
	}
	s.port.Store(int64(port))
	if err := s.writeConfig(); err != nil {
		return err
	}
	// Written here rather than by Synapse's --generate-keys, which costs a
	// Python start-up of about 1.5 s.
	if err := writeSigningKey(filepath.Join(s.dataDir, keyFile)); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.startLocked(ctx); err != nil {
		s.stopped = true
		return err
	}
	return nil
}

// writeConfig renders the configuration for the current port.
func (s *Server) writeConfig() error {
	return writeConfig(s.configPath, configParams{
		Dir:             s.dataDir,
		ServerName:      serverName,
		Port:            int(s.port.Load()),
		Secret:          s.secret,
		Macaroon:        s.macaroon,
		RaiseRateLimits: s.raiseLimits,
	})
}

// command returns the Python command that runs Synapse with extra
// arguments, in the data directory, with the unpacked source on
// PYTHONPATH.
func (s *Server) command(ctx context.Context, extra ...string) *exec.Cmd {
	args := append([]string{"-m", "synapse.app.homeserver", "--config-path", s.configPath}, extra...)
	cmd := exec.CommandContext(ctx, s.python, args...)
	cmd.Dir = s.dataDir
	env := make([]string, 0, len(os.Environ())+2)
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "PYTHONPATH=") || strings.HasPrefix(kv, "PYTHONHOME=") {
			continue
		}
		env = append(env, kv)
	}
	cmd.Env = append(env, "PYTHONPATH="+s.src, "PYTHONNOUSERSITE=1")
	return cmd
}

// prepareDataDir returns the absolute data directory and whether Launch
// created it as a temporary directory.
func prepareDataDir(dir string) (string, bool, error) {
	if dir == "" {
		d, err := os.MkdirTemp("", "lisa-synapse-")
		if err != nil {
			return "", false, fmt.Errorf("synapse: data directory: %w", err)
		}
		return d, true, nil
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", false, fmt.Errorf("synapse: data directory: %w", err)
	}
	if err := os.MkdirAll(abs, 0o700); err != nil {
		return "", false, fmt.Errorf("synapse: data directory: %w", err)
	}
	return abs, false, nil
}

// freePort asks the kernel for a free TCP port on 127.0.0.1.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("synapse: pick a port: %w", err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	if err := l.Close(); err != nil {
		return 0, fmt.Errorf("synapse: pick a port: %w", err)
	}
	return port, nil
}

// startLocked starts Synapse on the current port and waits until it is
// ready. When the port is taken (by another process, before Synapse could
// bind it), it moves to a free one, so [Server.URL] changes; that is the
// only case. s.mu must be held.
func (s *Server) startLocked(ctx context.Context) error {
	for attempt := 1; ; attempt++ {
		err := s.startOnceLocked(ctx)
		if err == nil || attempt == portAttempts || !strings.Contains(strings.ToLower(err.Error()), "address already in use") {
			return err
		}
		old := s.addr()
		port, perr := freePort()
		if perr != nil {
			return perr
		}
		s.port.Store(int64(port))
		if err := s.writeConfig(); err != nil {
			return err
		}
		s.log.Warn("synapse port taken, moving to another; the server's URL changes", "old", old, "new", s.addr())
	}
}

// startOnceLocked starts one Synapse process and waits until it is ready.
// On failure the process is killed and reaped. s.mu must be held.
func (s *Server) startOnceLocked(ctx context.Context) error {
	s.output.tail.Reset()
	// Ready means this process logged that it bound our port (line 172 of
	// synapse/app/homeserver.py) and the port answers: an answer alone
	// might come from another server that took the port first.
	s.output.expect(fmt.Sprintf("Synapse now listening on TCP port %d\n", s.port.Load()))
	// Not CommandContext: the server outlives ctx.
	cmd := s.command(context.Background())
	cmd.Stdout = s.output
	cmd.Stderr = s.output
	cmd.SysProcAttr = &syscall.SysProcAttr{
		// Own process group, so Stop can kill everything it started.
		Setpgid: true,
		// Do not outlive the launching process (e.g. a crashed test
		// binary).
		Pdeathsig: syscall.SIGKILL,
	}
	cmd.WaitDelay = 2 * time.Second

	began := time.Now()
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("synapse: start %s: %w", s.python, err)
	}
	p := &process{cmd: cmd, done: make(chan struct{})}
	go p.wait()
	s.log.Debug("synapse started", "pid", cmd.Process.Pid, "addr", s.addr())
	if err := s.waitReady(ctx, p); err != nil {
		s.kill(p)
		return err
	}
	s.proc = p
	s.log.Info("synapse ready", "version", Version, "pid", cmd.Process.Pid, "url", s.URL(),
		"data_dir", s.dataDir, "ready_ms", time.Since(began).Milliseconds())
	return nil
}

// waitReady polls GET /_matrix/client/versions until it answers 200, the
// process exits, the start timeout passes or ctx ends.
func (s *Server) waitReady(ctx context.Context, p *process) error {
	ctx, cancel := context.WithTimeoutCause(ctx, s.startTimeout, errStartTimeout)
	defer cancel()
	tick := time.NewTicker(readyPollInterval)
	defer tick.Stop()
	for {
		if s.output.bound() && s.ping(ctx) {
			return nil
		}
		select {
		case <-p.done:
			return fmt.Errorf("synapse: exited before becoming ready on %s (%v); output:\n%s",
				s.addr(), p.err, s.outputTail())
		case <-ctx.Done():
			if errors.Is(context.Cause(ctx), errStartTimeout) {
				return fmt.Errorf("synapse: not ready on %s within %s (pid %d); output:\n%s",
					s.addr(), s.startTimeout, p.cmd.Process.Pid, s.outputTail())
			}
			return fmt.Errorf("synapse: waiting for readiness on %s: %w", s.addr(), ctx.Err())
		case <-tick.C:
		}
	}
}

// ping reports whether the server's client API answers.
func (s *Server) ping(ctx context.Context) bool { return hsproc.Ping(ctx, s.client, s.URL()) }

// kill SIGKILLs the process and its process group and waits until it is
// reaped.
func (s *Server) kill(p *process) {
	if !p.exited() {
		// The group is only signalled while the leader is unreaped, so its
		// ID cannot have been reused.
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		_ = p.cmd.Process.Kill()
	}
	<-p.done
}

// stopProcessLocked stops the running process, if any: SIGTERM, then after
// stopGrace (or when ctx ends) SIGKILL to the whole process group. It
// returns once the process has been reaped. s.mu must be held.
func (s *Server) stopProcessLocked(ctx context.Context) {
	p := s.proc
	if p == nil {
		return
	}
	s.proc = nil
	defer s.client.CloseIdleConnections()
	pid := p.cmd.Process.Pid
	if p.exited() {
		s.log.Warn("synapse had already exited", "pid", pid, "exit", exitText(p.err),
			"output_tail", s.shortTail())
		return
	}
	began := time.Now()
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	grace := time.NewTimer(stopGrace)
	defer grace.Stop()
	select {
	case <-p.done:
		s.log.Info("synapse stopped", "pid", pid, "exit", exitText(p.err),
			"stop_ms", time.Since(began).Milliseconds())
	case <-grace.C:
		s.log.Warn("synapse ignored SIGTERM, killing its process group", "pid", pid, "grace", stopGrace)
		s.kill(p)
	case <-ctx.Done():
		s.log.Warn("stop deadline reached, killing synapse's process group", "pid", pid, "error", ctx.Err())
		s.kill(p)
	}
}

// exitText is hsproc.ExitText.
func exitText(err error) string { return hsproc.ExitText(err) }

// addr returns 127.0.0.1:port.
func (s *Server) addr() string {
	return net.JoinHostPort("127.0.0.1", strconv.FormatInt(s.port.Load(), 10))
}

// URL returns the homeserver's base URL, http://127.0.0.1:PORT. It stays
// the same across [Server.Restart] unless another process took the port
// while Synapse was down (then Restart logs a warning and moves).
func (s *Server) URL() string { return "http://" + s.addr() }

// ServerName returns the Matrix server name, "localhost"; user IDs look like
// @localpart:localhost.
func (s *Server) ServerName() string { return serverName }

// DataDir returns the absolute data directory (configuration, key,
// database).
func (s *Server) DataDir() string { return s.dataDir }

// PID returns the process ID of the running Synapse process, or 0 when it
// is not running. It changes on [Server.Restart].
func (s *Server) PID() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc == nil {
		return 0
	}
	return s.proc.cmd.Process.Pid
}

// Restart stops Synapse (SIGTERM, as [Server.Stop]) and starts it again on
// the same port (see [Server.URL]) with the same database, secrets and
// access tokens. Users, rooms, events and send transaction IDs survive
// (Synapse keeps them in its event_txn_id table for 24 h). It also works
// after [Server.Kill] or after the process died on its own.
func (s *Server) Restart(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		return ErrStopped
	}
	began := time.Now()
	s.stopProcessLocked(ctx)
	if err := s.startLocked(ctx); err != nil {
		return err
	}
	s.log.Info("synapse restarted", "pid", s.proc.cmd.Process.Pid,
		"restart_ms", time.Since(began).Milliseconds())
	return nil
}

// Kill SIGKILLs Synapse's process group, as a crash would, and returns once
// the process has been reaped. The server stays usable: [Server.Restart]
// starts it again on the same database. Kill does nothing when Synapse is
// not running; it returns [ErrStopped] after [Server.Stop].
func (s *Server) Kill() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		return ErrStopped
	}
	if p := s.proc; p != nil {
		s.proc = nil
		s.kill(p)
		s.client.CloseIdleConnections()
		s.log.Info("synapse killed", "pid", p.cmd.Process.Pid)
	}
	return nil
}

// Stop terminates Synapse: SIGTERM, then after about 10 s (or when ctx
// ends) SIGKILL to its whole process group. It returns after the process has
// been reaped and, if Launch created the data directory, after removing it.
// Stop is idempotent; only the first call does anything.
func (s *Server) Stop(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		return nil
	}
	s.stopped = true
	s.stopProcessLocked(ctx)
	if s.ownsDataDir {
		if err := os.RemoveAll(s.dataDir); err != nil {
			return fmt.Errorf("synapse: remove data directory: %w", err)
		}
	}
	return nil
}

// OutputTail returns the kept end of Synapse's log (up to 64 KiB) with the
// registration secret, the macaroon key and every access token [Server.Login]
// handed out masked, for a test to show when it fails.
func (s *Server) OutputTail() string { return s.outputTail() }

// outputTail is OutputTail.
func (s *Server) outputTail() string {
	return s.redact(s.output.tail.String())
}

// shortTail returns the last few KiB of outputTail, for log records.
func (s *Server) shortTail() string {
	const keep = 4 << 10
	t := s.outputTail()
	if len(t) > keep {
		t = "…" + t[len(t)-keep:]
	}
	return t
}

// rememberToken adds an access token to the ones masked in output.
func (s *Server) rememberToken(token string) {
	if token == "" {
		return
	}
	s.tokensMu.Lock()
	defer s.tokensMu.Unlock()
	s.tokens = append(s.tokens, token)
}

// redact masks the secrets and known access tokens in text.
func (s *Server) redact(text string) string {
	for _, secret := range []string{s.secret, s.macaroon} {
		if secret != "" {
			text = strings.ReplaceAll(text, secret, redacted)
		}
	}
	s.tokensMu.Lock()
	defer s.tokensMu.Unlock()
	for _, tok := range s.tokens {
		text = strings.ReplaceAll(text, tok, redacted)
	}
	return text
}

// outputWriter receives Synapse's stdout and stderr: it keeps the tail,
// notices the line saying Synapse bound its port, and forwards to the
// caller's writer, ignoring that writer's errors so a broken sink can never
// stall or kill Synapse.
type outputWriter struct {
	out  io.Writer
	tail hsproc.TailBuffer

	mu        sync.Mutex
	want      string // the line that says our listener is bound
	carry     []byte // the end of the last write, for a line split across writes
	listening bool
}

// Write implements io.Writer.
func (w *outputWriter) Write(p []byte) (int, error) {
	_, _ = w.tail.Write(p)
	w.scan(p)
	if w.out != nil {
		_, _ = w.out.Write(p)
	}
	return len(p), nil
}

// scan looks for the listening line in p and what came just before it.
func (w *outputWriter) scan(p []byte) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.listening || w.want == "" {
		return
	}
	buf := append(w.carry, p...)
	if strings.Contains(string(buf), w.want) {
		w.listening = true
		w.carry = nil
		return
	}
	keep := min(len(buf), len(w.want))
	w.carry = append([]byte(nil), buf[len(buf)-keep:]...)
}

// expect forgets earlier output's listening line and waits for want.
func (w *outputWriter) expect(want string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.want, w.carry, w.listening = want, nil, false
}

// bound reports whether the expected listening line has been written.
func (w *outputWriter) bound() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.listening
}
