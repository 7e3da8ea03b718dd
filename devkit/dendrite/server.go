package dendrite

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
	"syscall"
	"time"
)

const (
	// defaultStartTimeout bounds the wait for /_matrix/client/versions.
	defaultStartTimeout = 30 * time.Second
	// readyPollInterval is the pause between readiness probes.
	readyPollInterval = 20 * time.Millisecond
	// stopGrace is how long Stop and Restart wait after SIGTERM before
	// killing the process group.
	stopGrace = 10 * time.Second
	// outputTail is how much of Dendrite's output is kept for errors.
	outputTail = 64 << 10
	// launchAttempts is how often Launch tries a new port when the one it
	// picked was taken before Dendrite could bind it.
	launchAttempts = 3
	// redacted replaces secrets in text shown to people.
	redacted = "[REDACTED]"
)

// ErrStopped is returned by [Server.Restart] after [Server.Stop].
var ErrStopped = errors.New("dendrite: server stopped")

// errStartTimeout is the cause of the readiness context expiring.
var errStartTimeout = errors.New("start timeout")

// Options configure [Launch]. The zero value is valid.
type Options struct {
	// Binary is the dendrite executable. Empty means [EnsureBinary].
	Binary string

	// DataDir holds the signing key, configuration, SQLite databases,
	// JetStream state and media. Empty means a new temporary directory that
	// [Server.Stop] removes; a given directory is created if needed and is
	// never removed, so a later Launch on it sees the same users and rooms.
	DataDir string

	// RateLimiting enables Dendrite's client-API rate limiting (5 requests
	// per 500 ms per device, or per IP when unauthenticated; admin accounts
	// are exempt). Off by default.
	RateLimiting bool

	// StartTimeout bounds how long Launch and Restart wait for the server
	// to answer GET /_matrix/client/versions. Zero means 30 s.
	StartTimeout time.Duration

	// Logger receives lifecycle records (start, ready, stop, build). Nil
	// discards them.
	Logger *slog.Logger

	// Progress, when not nil, is told each slow start-up step as it begins
	// ("building Dendrite v0.13.8", "starting Dendrite", ...), so a caller
	// can show what a first run is waiting for. It is called on Launch's
	// goroutine and must return quickly.
	Progress func(step string)

	// Output receives Dendrite's stdout and stderr. Nil discards it. Write
	// errors are ignored. Either way, the last 64 KiB are kept and included
	// in start-failure errors.
	Output io.Writer
}

// Server is a running Dendrite homeserver bound to 127.0.0.1. Its methods
// are safe for concurrent use.
type Server struct {
	log          *slog.Logger
	bin          string
	dataDir      string
	ownsDataDir  bool
	configPath   string
	secret       string // registration shared secret; never logged
	addr         string // 127.0.0.1:port, fixed for the server's life
	startTimeout time.Duration
	output       *outputWriter
	client       *http.Client

	mu      sync.Mutex
	proc    *process // nil while not running
	stopped bool
}

// process is one run of the dendrite executable.
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

// Launch starts a Dendrite homeserver as described in the package
// documentation and returns once it answers HTTP requests. The caller must
// call [Server.Stop]. ctx bounds only the start-up (and a build, if
// [EnsureBinary] has to build); the server outlives it.
func Launch(ctx context.Context, opts Options) (*Server, error) {
	log := orDiscard(opts.Logger)
	bin := opts.Binary
	var err error
	if bin == "" {
		if bin, err = ensureBinaryFor(ctx, log, opts.Progress); err != nil {
			return nil, err
		}
	} else if bin, err = resolveBinary(bin); err != nil {
		return nil, fmt.Errorf("dendrite: %w", err)
	}

	dataDir, owns, err := prepareDataDir(opts.DataDir)
	if err != nil {
		return nil, err
	}
	s := &Server{
		log:          log,
		bin:          bin,
		dataDir:      dataDir,
		ownsDataDir:  owns,
		configPath:   filepath.Join(dataDir, configFile),
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
	if opts.Progress != nil {
		opts.Progress("starting Dendrite")
	}
	if err := s.launch(ctx, opts.RateLimiting); err != nil {
		if owns {
			_ = os.RemoveAll(dataDir)
		}
		return nil, err
	}
	return s, nil
}

// launch writes the key and configuration and starts the first process,
// choosing a new port if the first one was taken in the meantime.
func (s *Server) launch(ctx context.Context, rateLimiting bool) error {
	secret, err := randomSecret()
	if err != nil {
		return err
	}
	s.secret = secret
	if err := writeSigningKey(filepath.Join(s.dataDir, keyFile)); err != nil {
		return err
	}
	if err := writeConfig(s.configPath, configParams{
		Dir:          s.dataDir,
		ServerName:   serverName,
		Secret:       secret,
		RateLimiting: rateLimiting,
	}); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for attempt := 1; ; attempt++ {
		port, err := freePort()
		if err != nil {
			return err
		}
		s.addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		err = s.startLocked(ctx)
		if err == nil {
			return nil
		}
		if attempt == launchAttempts || !strings.Contains(err.Error(), "address already in use") {
			s.stopped = true
			return err
		}
		s.log.Warn("dendrite port taken, retrying with another", "addr", s.addr)
	}
}

// prepareDataDir returns the absolute data directory and whether Launch
// created it as a temporary directory.
func prepareDataDir(dir string) (string, bool, error) {
	if dir == "" {
		d, err := os.MkdirTemp("", "lisa-dendrite-")
		if err != nil {
			return "", false, fmt.Errorf("dendrite: data directory: %w", err)
		}
		return d, true, nil
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", false, fmt.Errorf("dendrite: data directory: %w", err)
	}
	if err := os.MkdirAll(abs, 0o700); err != nil {
		return "", false, fmt.Errorf("dendrite: data directory: %w", err)
	}
	return abs, false, nil
}

// freePort asks the kernel for a free TCP port on 127.0.0.1.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("dendrite: pick a port: %w", err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	if err := l.Close(); err != nil {
		return 0, fmt.Errorf("dendrite: pick a port: %w", err)
	}
	return port, nil
}

// startLocked starts a dendrite process on s.addr and waits until it is
// ready. On failure the process is killed and reaped. s.mu must be held.
func (s *Server) startLocked(ctx context.Context) error {
	s.output.tail.Reset()
	cmd := exec.Command(s.bin, "-config", s.configPath, "-http-bind-address", s.addr)
	cmd.Dir = s.dataDir
	// The same comparable writer for both streams: exec then serializes
	// the writes.
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
		return fmt.Errorf("dendrite: start %s: %w", s.bin, err)
	}
	p := &process{cmd: cmd, done: make(chan struct{})}
	go p.wait()
	s.log.Debug("dendrite started", "pid", cmd.Process.Pid, "addr", s.addr)
	if err := s.waitReady(ctx, p); err != nil {
		s.kill(p)
		return err
	}
	s.proc = p
	s.log.Info("dendrite ready", "pid", cmd.Process.Pid, "url", s.URL(), "data_dir", s.dataDir,
		"ready_ms", time.Since(began).Milliseconds())
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
		if s.ping(ctx) {
			return nil
		}
		select {
		case <-p.done:
			return fmt.Errorf("dendrite: exited before becoming ready on %s (%v); output:\n%s",
				s.addr, p.err, s.outputTail())
		case <-ctx.Done():
			if errors.Is(context.Cause(ctx), errStartTimeout) {
				return fmt.Errorf("dendrite: not ready on %s within %s (pid %d); output:\n%s",
					s.addr, s.startTimeout, p.cmd.Process.Pid, s.outputTail())
			}
			return fmt.Errorf("dendrite: waiting for readiness on %s: %w", s.addr, ctx.Err())
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
		s.log.Warn("dendrite had already exited", "pid", pid, "exit", exitText(p.err),
			"output_tail", s.shortTail())
		return
	}
	began := time.Now()
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	grace := time.NewTimer(stopGrace)
	defer grace.Stop()
	select {
	case <-p.done:
		if p.err != nil {
			s.log.Warn("dendrite exited with an error on SIGTERM", "pid", pid, "exit", exitText(p.err),
				"stop_ms", time.Since(began).Milliseconds(), "output_tail", s.shortTail())
			return
		}
		s.log.Info("dendrite stopped", "pid", pid, "exit", exitText(p.err),
			"stop_ms", time.Since(began).Milliseconds())
	case <-grace.C:
		s.log.Warn("dendrite ignored SIGTERM, killing its process group", "pid", pid,
			"grace", stopGrace)
		s.kill(p)
	case <-ctx.Done():
		s.log.Warn("stop deadline reached, killing dendrite's process group", "pid", pid,
			"error", ctx.Err())
		s.kill(p)
	}
}

// exitText is hsproc.ExitText.
func exitText(err error) string { return hsproc.ExitText(err) }

// URL returns the homeserver's base URL, http://127.0.0.1:PORT. It stays
// the same across [Server.Restart].
func (s *Server) URL() string { return "http://" + s.addr }

// ServerName returns the Matrix server name, "localhost"; user IDs look like
// @localpart:localhost.
func (s *Server) ServerName() string { return serverName }

// DataDir returns the absolute data directory (key, configuration,
// databases).
func (s *Server) DataDir() string { return s.dataDir }

// PID returns the process ID of the running dendrite process, or 0 when it
// is not running. It changes on [Server.Restart].
func (s *Server) PID() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc == nil {
		return 0
	}
	return s.proc.cmd.Process.Pid
}

// Restart stops Dendrite (SIGTERM, as [Server.Stop]) and starts it again on
// the same port with the same data and shared secret. Users, access tokens,
// rooms and events survive; in-memory state does not — notably the
// transaction-ID cache, so a txnId reused after Restart creates a new event.
// It also works after the process died on its own.
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
	s.log.Info("dendrite restarted", "pid", s.proc.cmd.Process.Pid,
		"restart_ms", time.Since(began).Milliseconds())
	return nil
}

// Kill SIGKILLs Dendrite's process group, as a crash would, and returns
// once the process has been reaped. The server stays usable:
// [Server.Restart] starts it again on the same port and data. Kill does
// nothing when Dendrite is not running; it returns [ErrStopped] after
// [Server.Stop].
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
		s.log.Info("dendrite killed", "pid", p.cmd.Process.Pid)
	}
	return nil
}

// Stop terminates Dendrite: SIGTERM, then after about 10 s (or when ctx
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
			return fmt.Errorf("dendrite: remove data directory: %w", err)
		}
	}
	return nil
}

// OutputTail returns the kept end of Dendrite's output (up to 64 KiB of
// the current or last run) with the shared secret masked, for a test to show
// when it fails.
func (s *Server) OutputTail() string { return s.outputTail() }

// outputTail returns the kept end of Dendrite's output with the shared
// secret masked.
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

// redact masks the shared secret in text.
func (s *Server) redact(text string) string {
	if s.secret == "" {
		return text
	}
	return strings.ReplaceAll(text, s.secret, redacted)
}

// outputWriter receives Dendrite's stdout and stderr: it keeps the tail and
// forwards to the caller's writer, ignoring that writer's errors so a broken
// sink can never stall or kill Dendrite.
type outputWriter struct {
	out  io.Writer
	tail hsproc.TailBuffer
}

// Write implements io.Writer.
func (w *outputWriter) Write(p []byte) (int, error) {
	_, _ = w.tail.Write(p)
	if w.out != nil {
		_, _ = w.out.Write(p)
	}
	return len(p), nil
}
