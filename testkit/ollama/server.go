package ollama

import (
	"bytes"
	"context"
	"errors"
	"fmt"
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
	// startTimeout bounds the wait for GET /api/version.
	startTimeout = 60 * time.Second
	// stopGrace is how long Stop waits after SIGTERM before killing the
	// process group.
	stopGrace = 10 * time.Second
	// maxLog bounds the server output kept in memory.
	maxLog = 32 << 20
	// launchAttempts is how often Launch tries another port when the one
	// it picked was taken before Ollama could bind it.
	launchAttempts = 3
	// modelSeed seeds the tiny model's weights, so every run serves the
	// same model.
	modelSeed = 42
)

// Server is a running `ollama serve` on 127.0.0.1, with its own model
// store and home directory. Its methods are safe for concurrent use.
type Server struct {
	bin   string
	dir   string // home, models, the tiny model's files
	addr  string // 127.0.0.1:port
	cmd   *exec.Cmd
	exit  chan struct{} // closed when the process has exited
	log   *logBuffer
	model sync.Once
	mErr  error

	stopOnce sync.Once
	stopErr  error
}

// Launch starts `ollama serve` (bin) on a free loopback port with dir as
// its home and model store, and waits until it answers GET /api/version.
// The caller must call [Server.Stop]. The server's environment is built
// from scratch: none of the caller's OLLAMA_* or proxy variables leak in,
// cloud features are off and one request runs at a time.
func Launch(ctx context.Context, bin, dir string) (*Server, error) {
	var err error
	for range launchAttempts {
		var s *Server
		s, err = launchOnce(ctx, bin, dir)
		if err == nil {
			return s, nil
		}
		if !strings.Contains(err.Error(), "address already in use") {
			return nil, err
		}
	}
	return nil, err
}

func launchOnce(ctx context.Context, bin, dir string) (*Server, error) {
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	home := filepath.Join(dir, "home")
	models := filepath.Join(dir, "models")
	for _, d := range []string{home, models} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, fmt.Errorf("ollama: %w", err)
		}
	}
	s := &Server{bin: bin, dir: dir, addr: addr, exit: make(chan struct{}), log: &logBuffer{}}
	s.cmd = exec.Command(bin, "serve")
	s.cmd.Env = s.env(home, models)
	s.cmd.Stdout, s.cmd.Stderr = s.log, s.log
	// Its own process group: Stop ends the runner subprocesses too.
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := s.cmd.Start(); err != nil {
		return nil, fmt.Errorf("ollama: start %s serve: %w", bin, err)
	}
	go func() {
		_ = s.cmd.Wait()
		close(s.exit)
	}()
	if err := s.awaitReady(ctx); err != nil {
		_ = s.Stop(context.Background())
		return nil, fmt.Errorf("%w\n%s", err, s.log.tail(8<<10))
	}
	return s, nil
}

// env is the server's whole environment.
func (s *Server) env(home, models string) []string {
	env := []string{
		"HOME=" + home, // Ollama writes its key pair to ~/.ollama on first start
		"OLLAMA_HOST=" + s.addr,
		"OLLAMA_MODELS=" + models,
		"OLLAMA_NOPRUNE=1",
		"OLLAMA_NO_CLOUD=1",
		"OLLAMA_NUM_PARALLEL=1",
		"OLLAMA_MAX_LOADED_MODELS=1",
	}
	for _, k := range []string{"PATH", "TMPDIR", "LANG"} {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	return env
}

// freeAddr returns a loopback address whose port was free a moment ago.
func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("ollama: find a free port: %w", err)
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// awaitReady polls GET /api/version until it answers 200, the process
// exits, or the start timeout or ctx ends.
func (s *Server) awaitReady(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	client := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{Proxy: nil}}
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+s.addr+"/api/version", nil)
		if resp, err := client.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-s.exit:
			return fmt.Errorf("ollama: serve exited before it answered on %s", s.addr)
		case <-ctx.Done():
			return fmt.Errorf("ollama: serve did not answer GET /api/version on %s within %s: %w", s.addr, startTimeout, ctx.Err())
		case <-tick.C:
		}
	}
}

// URL returns the OpenAI-compatible base URL, ending in /v1.
func (s *Server) URL() string { return "http://" + s.addr + "/v1" }

// Root returns the server's root URL (for Ollama's own API, /api/…).
func (s *Server) Root() string { return "http://" + s.addr }

// Log returns what the server has written to stdout and stderr so far
// (its last 32 MiB).
func (s *Server) Log() string { return s.log.String() }

// Create imports the tiny random-weights model as name (listed as
// name:latest), as m says: `ollama create name -f Modelfile`. The model's
// files are written once per server.
func (s *Server) Create(ctx context.Context, name string, m Model) error {
	modelDir := filepath.Join(s.dir, "tiny")
	s.model.Do(func() { s.mErr = WriteTinyModel(modelDir, modelSeed) })
	if s.mErr != nil {
		return s.mErr
	}
	mf := filepath.Join(s.dir, "Modelfile."+name)
	if err := os.WriteFile(mf, []byte(m.Modelfile(modelDir)), 0o644); err != nil {
		return fmt.Errorf("ollama: %w", err)
	}
	cmd := exec.CommandContext(ctx, s.bin, "create", name, "-f", mf)
	cmd.Env = s.env(filepath.Join(s.dir, "home"), filepath.Join(s.dir, "models"))
	cmd.WaitDelay = 5 * time.Second
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("ollama: create %s: %w\n%s", name, err, out.String())
	}
	return nil
}

// Stop ends the server and its runners: SIGTERM to the process group,
// SIGKILL after a grace period or when ctx ends. It is idempotent.
func (s *Server) Stop(ctx context.Context) error {
	s.stopOnce.Do(func() {
		pgid := s.cmd.Process.Pid
		_ = syscall.Kill(-pgid, syscall.SIGTERM)
		t := time.NewTimer(stopGrace)
		defer t.Stop()
		select {
		case <-s.exit:
		case <-t.C:
			s.stopErr = errors.New("ollama: serve did not stop within " + stopGrace.String() + " of SIGTERM; killed")
		case <-ctx.Done():
			s.stopErr = fmt.Errorf("ollama: stop: %w", ctx.Err())
		}
		// Runners left behind by a serve that died are in the group too.
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		<-s.exit
	})
	return s.stopErr
}

// Port returns the server's TCP port.
func (s *Server) Port() int {
	_, p, _ := net.SplitHostPort(s.addr)
	n, _ := strconv.Atoi(p)
	return n
}

// logBuffer keeps the last maxLog bytes of the server's output.
type logBuffer struct {
	mu  sync.Mutex
	buf []byte
}

// Write implements io.Writer.
func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf = append(b.buf, p...)
	if over := len(b.buf) - maxLog; over > 0 {
		b.buf = b.buf[over:]
	}
	return len(p), nil
}

// String returns the kept output.
func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return string(b.buf)
}

// tail returns the last n bytes of the kept output.
func (b *logBuffer) tail(n int) string {
	s := b.String()
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}
