package admin

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// Request is one command.
type Request struct {
	Cmd  string   `json:"cmd"`
	Args []string `json:"args,omitempty"`
}

// Response answers one Request.
type Response struct {
	OK    bool            `json:"ok"`
	Error string          `json:"error,omitempty"`
	Data  json.RawMessage `json:"data,omitempty"`
}

// Handler answers commands.
type Handler interface {
	Handle(ctx context.Context, cmd string, args []string) (any, error)
}

// HandlerFunc adapts a function to Handler.
type HandlerFunc func(ctx context.Context, cmd string, args []string) (any, error)

// Handle implements Handler.
func (f HandlerFunc) Handle(ctx context.Context, cmd string, args []string) (any, error) {
	return f(ctx, cmd, args)
}

// Default limits of the server (see Limits).
const (
	// DefaultMaxConns is how many connections are served at once; the
	// admin socket has a handful of clients (an operator's shell, a
	// health check), so more means a client that leaks connections.
	DefaultMaxConns = 16
	// DefaultReadTimeout is how long the server waits for a request
	// line, from the connection or the previous answer on. An idle
	// interactive lisa shell is cut off after it; its Client reconnects.
	DefaultReadTimeout = time.Minute
	// DefaultWriteTimeout bounds writing one answer.
	DefaultWriteTimeout = 10 * time.Second
	// DefaultMaxRequestBytes bounds one request line.
	DefaultMaxRequestBytes = 64 << 10
)

const (
	// handleTimeout bounds the Handler's answer to one request.
	handleTimeout = 10 * time.Second
	// refuseWriteTimeout bounds writing the refusal to a connection over
	// the limit; it is written from the accept loop, into the empty send
	// buffer of a fresh connection.
	refuseWriteTimeout = 100 * time.Millisecond
	// maxAcceptBackoff bounds the pause after a failed accept (such as
	// running out of file descriptors) before trying again.
	maxAcceptBackoff = time.Second
	// maxResponseBytes bounds one answer read by Client.
	maxResponseBytes = 16 << 20
	// configKey names the socket's setting in error messages.
	configKey = "runtime.admin_socket"
)

// Limits bound what the server's clients can hold. A zero field takes
// its default.
type Limits struct {
	// MaxConns is the number of connections served at once
	// (DefaultMaxConns). One more gets an error line and is closed.
	MaxConns int
	// ReadTimeout is how long a request line may take to arrive, from
	// the connection or the previous answer on (DefaultReadTimeout); the
	// connection is closed after it.
	ReadTimeout time.Duration
	// WriteTimeout bounds writing one answer (DefaultWriteTimeout).
	WriteTimeout time.Duration
	// MaxRequestBytes bounds one request line (DefaultMaxRequestBytes);
	// a longer one gets an error line and the connection is closed.
	MaxRequestBytes int
}

func (l Limits) withDefaults() Limits {
	if l.MaxConns <= 0 {
		l.MaxConns = DefaultMaxConns
	}
	if l.ReadTimeout <= 0 {
		l.ReadTimeout = DefaultReadTimeout
	}
	if l.WriteTimeout <= 0 {
		l.WriteTimeout = DefaultWriteTimeout
	}
	if l.MaxRequestBytes <= 0 {
		l.MaxRequestBytes = DefaultMaxRequestBytes
	}
	return l
}

// Server is a running admin socket.
type Server struct {
	path  string
	sock  os.FileInfo // the socket as created, so Close removes only its own
	ln    *net.UnixListener
	hMu   sync.Mutex // guards h (see Wrap)
	h     Handler
	log   *slog.Logger
	lim   Limits
	slots chan struct{} // one token per connection being served
	wg    sync.WaitGroup
	ctx   context.Context
	stop  context.CancelFunc

	// Owned by the accept goroutine.
	refused  int
	lastWarn time.Time
}

// Listen opens the socket at path with the default Limits; see
// ListenLimits.
func Listen(path string, h Handler, log *slog.Logger) (*Server, error) {
	return ListenLimits(path, h, log, Limits{})
}

// ListenLimits opens the socket at path, mode 0600. It refuses a
// directory that is a symbolic link, is not owned by the current user or
// is writable by group or others (sticky or not: another user could take
// the name before Lisa does), a path taken by anything but a socket
// (symbolic links are never followed), and a socket another process is
// still serving. A stale socket, left by a process that died, is
// replaced.
//
// The socket is never reachable at path with a wider mode: it is bound in
// a fresh directory of mode 0700 next to path, made 0600 there and then
// renamed over path, which is atomic. A socket created at path directly
// would have the umask's mode until a chmod, and setting the umask around
// the bind would change it for the whole process, racing with every other
// goroutine that creates files.
func ListenLimits(path string, h Handler, log *slog.Logger, lim Limits) (*Server, error) {
	if err := CheckDir(filepath.Dir(path)); err != nil {
		return nil, err
	}
	if err := checkPath(path); err != nil {
		return nil, err
	}
	ln, sock, err := bindPrivately(path)
	if err != nil {
		return nil, err
	}
	lim = lim.withDefaults()
	ctx, stop := context.WithCancel(context.Background())
	s := &Server{path: path, sock: sock, ln: ln, h: h, log: log, lim: lim,
		slots: make(chan struct{}, lim.MaxConns), ctx: ctx, stop: stop}
	s.wg.Add(1)
	go s.accept()
	return s, nil
}

// CheckDir refuses a socket directory that anyone but the current user
// can change, as [ListenLimits] does; `lisa doctor` asks it before Lisa
// starts.
func CheckDir(dir string) error {
	refuse := func(why string, args ...any) error {
		return fmt.Errorf("admin: socket directory %s %s; refusing to create the admin socket there: set %s to a path in a directory only this user (uid %d) can write to",
			dir, fmt.Sprintf(why, args...), configKey, os.Geteuid())
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return fmt.Errorf("admin: socket directory of %s: %w", configKey, err)
	}
	switch {
	case fi.Mode()&os.ModeSymlink != 0:
		return refuse("is a symbolic link (give the directory it points to)")
	case !fi.IsDir():
		return refuse("is not a directory")
	}
	uid, ok := fileOwner(fi)
	switch {
	case !ok:
		return refuse("has an owner this system cannot tell")
	case uid != os.Geteuid():
		return refuse("is owned by uid %d", uid)
	case fi.Mode().Perm()&0o022 != 0:
		return refuse("is writable by group or others (mode %v)", fi.Mode())
	}
	return nil
}

// checkPath refuses to replace anything at path but a stale socket.
func checkPath(path string) error {
	fi, err := os.Lstat(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("admin: %w", err)
	}
	if fi.Mode()&os.ModeSymlink != 0 {
		return fmt.Errorf("admin: %s is a symbolic link; refusing to follow or replace it (%s)", path, configKey)
	}
	if fi.Mode()&os.ModeSocket == 0 {
		return fmt.Errorf("admin: %s exists and is not a socket; refusing to replace it (%s)", path, configKey)
	}
	if Serving(path) {
		return fmt.Errorf("admin: %s is in use: is another Lisa running with this data directory?", path)
	}
	return nil // a stale socket of a process that died: the rename replaces it
}

// Serving reports whether a process accepts connections on the socket at
// path (within a second).
func Serving(path string) bool {
	c, err := net.DialTimeout("unix", path, time.Second)
	if err != nil {
		return false
	}
	c.Close()
	return true
}

// testHookBound, when set, runs once the socket is bound at its private
// path and made 0600, before it is renamed into place.
var testHookBound func(private string)

// bindPrivately binds a socket in a fresh directory of mode 0700 next to
// path, restricts it to 0600 and renames it to path. Until the rename,
// nobody but this user can reach the socket, whatever its mode; after it,
// the mode is 0600.
func bindPrivately(path string) (*net.UnixListener, os.FileInfo, error) {
	dir := filepath.Dir(path)
	tmp, err := privateDir(dir)
	if err != nil {
		return nil, nil, fmt.Errorf("admin: socket directory %s: %w", dir, err)
	}
	defer os.RemoveAll(tmp)
	// A short name, so the private path is no longer than the default
	// path and fits a Unix socket address whenever that does.
	private := filepath.Join(tmp, "s")
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: private, Net: "unix"})
	if err != nil {
		return nil, nil, fmt.Errorf("admin: listen on %s (bound first as %s): %w", path, private, err)
	}
	// The listener must not remove its private path on Close: the
	// socket is at path by then. Close removes path itself.
	ln.SetUnlinkOnClose(false)
	fail := func(err error) (*net.UnixListener, os.FileInfo, error) {
		ln.Close()
		return nil, nil, err
	}
	if err := os.Chmod(private, 0o600); err != nil {
		return fail(fmt.Errorf("admin: restrict %s: %w", private, err))
	}
	if testHookBound != nil {
		testHookBound(private)
	}
	if err := os.Rename(private, path); err != nil {
		return fail(fmt.Errorf("admin: move the socket to %s: %w", path, err))
	}
	sock, err := os.Lstat(path)
	if err != nil {
		return fail(fmt.Errorf("admin: %w", err))
	}
	return ln, sock, nil
}

// privateDir creates a directory of mode 0700 with a short random name
// (".a" and five letters or digits) in dir.
func privateDir(dir string) (string, error) {
	for range 10 {
		p := filepath.Join(dir, ".a"+strings.ToLower(rand.Text()[:5]))
		err := os.Mkdir(p, 0o700)
		if err == nil {
			return p, nil
		}
		if !errors.Is(err, os.ErrExist) {
			return "", err
		}
	}
	return "", errors.New("cannot create a private directory for the socket")
}

// Wrap replaces the server's handler with mw applied to it, so that the
// owner of a running server can add to its answers (a middleware). Requests
// already being answered finish with the handler they started with.
func (s *Server) Wrap(mw func(Handler) Handler) {
	s.hMu.Lock()
	defer s.hMu.Unlock()
	s.h = mw(s.h)
}

// handler is the current handler.
func (s *Server) handler() Handler {
	s.hMu.Lock()
	defer s.hMu.Unlock()
	return s.h
}

// Close stops accepting, ends open connections and removes the socket,
// unless another server has replaced it since.
func (s *Server) Close() error {
	s.stop()
	err := s.ln.Close()
	s.wg.Wait()
	if fi, lerr := os.Lstat(s.path); lerr == nil && os.SameFile(fi, s.sock) {
		_ = os.Remove(s.path)
	}
	return err
}

func (s *Server) accept() {
	defer s.wg.Done()
	var backoff time.Duration
	for {
		conn, err := s.ln.Accept()
		if err != nil {
			if s.ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return
			}
			// Out of file descriptors, say: try again later rather than
			// give up on the admin socket for good.
			backoff = min(max(2*backoff, 5*time.Millisecond), maxAcceptBackoff)
			s.log.Warn("admin socket: accept failed; retrying", "error", err, "retry_in", backoff)
			select {
			case <-s.ctx.Done():
				return
			case <-time.After(backoff):
			}
			continue
		}
		backoff = 0
		select {
		case s.slots <- struct{}{}:
			s.wg.Add(1)
			go s.serve(conn)
		default:
			s.refuse(conn)
		}
	}
}

// refuse answers a connection over the limit with an error and closes it.
func (s *Server) refuse(conn net.Conn) {
	defer conn.Close()
	_ = conn.SetWriteDeadline(time.Now().Add(refuseWriteTimeout))
	_ = json.NewEncoder(conn).Encode(Response{Error: fmt.Sprintf(
		"admin: too many connections (%d open); try again later", s.lim.MaxConns)})
	s.refused++
	if now := time.Now(); now.Sub(s.lastWarn) >= time.Minute {
		s.log.Warn("admin socket: connection refused, too many open", "max_connections", s.lim.MaxConns, "refused_total", s.refused)
		s.lastWarn = now
	}
}

// serve answers one connection's requests until it closes, is idle past
// the read timeout, sends an overlong line, or the server closes. Nothing
// outlives it: the close on server shutdown is a context.AfterFunc,
// released on return.
func (s *Server) serve(conn net.Conn) {
	defer s.wg.Done()
	defer func() { <-s.slots }()
	defer conn.Close()
	release := context.AfterFunc(s.ctx, func() { conn.Close() })
	defer release()
	sc := bufio.NewScanner(conn)
	sc.Buffer(make([]byte, 0, min(4096, s.lim.MaxRequestBytes)), s.lim.MaxRequestBytes)
	for {
		if err := conn.SetReadDeadline(time.Now().Add(s.lim.ReadTimeout)); err != nil {
			return
		}
		if !sc.Scan() {
			switch err := sc.Err(); {
			case errors.Is(err, bufio.ErrTooLong):
				_ = s.reply(conn, Response{Error: fmt.Sprintf("request too long: no newline within %d bytes", s.lim.MaxRequestBytes)})
			case errors.Is(err, os.ErrDeadlineExceeded):
				s.log.Debug("admin socket: connection idle; closed", "read_timeout", s.lim.ReadTimeout)
			}
			return
		}
		if sc.Err() != nil {
			// A partial line cut short by the deadline: no request.
			return
		}
		if err := s.reply(conn, s.answer(sc.Bytes())); err != nil {
			return
		}
	}
}

// answer runs one request line.
func (s *Server) answer(line []byte) Response {
	var req Request
	if err := json.Unmarshal(line, &req); err != nil || req.Cmd == "" {
		return Response{Error: "malformed request: want {\"cmd\": ..., \"args\": [...]}"}
	}
	ctx, cancel := context.WithTimeout(s.ctx, handleTimeout)
	defer cancel()
	data, err := s.handler().Handle(ctx, req.Cmd, req.Args)
	if err != nil {
		return Response{Error: err.Error()}
	}
	raw, err := json.Marshal(data)
	if err != nil {
		return Response{Error: "internal: " + err.Error()}
	}
	return Response{OK: true, Data: raw}
}

// reply writes one answer line within the write timeout.
func (s *Server) reply(conn net.Conn, resp Response) error {
	if err := conn.SetWriteDeadline(time.Now().Add(s.lim.WriteTimeout)); err != nil {
		return err
	}
	return json.NewEncoder(conn).Encode(resp)
}

// Client talks to an admin socket.
type Client struct {
	path    string
	timeout time.Duration
	// callTimeout bounds one call, from sending the request to the end
	// of its answer (DefaultCallTimeout unless SetCallTimeout).
	callTimeout time.Duration
	conn        net.Conn
	r           *bufio.Reader
}

// DefaultCallTimeout bounds one call of a Client.
const DefaultCallTimeout = 15 * time.Second

// SetCallTimeout changes how long one call may take: a command that
// does long work (a backup) needs more than DefaultCallTimeout.
func (c *Client) SetCallTimeout(d time.Duration) { c.callTimeout = d }

// Dial connects to the socket at path.
func Dial(path string, timeout time.Duration) (*Client, error) {
	c := &Client{path: path, timeout: timeout, callTimeout: DefaultCallTimeout}
	if err := c.dial(); err != nil {
		return nil, err
	}
	return c, nil
}

func (c *Client) dial() error {
	conn, err := net.DialTimeout("unix", c.path, c.timeout)
	if err != nil {
		return fmt.Errorf("admin: cannot reach Lisa at %s: %w", c.path, err)
	}
	c.conn, c.r = conn, bufio.NewReaderSize(conn, 4096)
	return nil
}

// Close closes the connection.
func (c *Client) Close() error { return c.conn.Close() }

// Call sends one command and returns its data. When the server has
// closed the connection in the meantime (it does after its read timeout),
// Call connects again before sending; a command is never sent twice.
func (c *Client) Call(cmd string, args ...string) (json.RawMessage, error) {
	if err := c.ready(); err != nil {
		return nil, err
	}
	if err := c.conn.SetDeadline(time.Now().Add(c.callTimeout)); err != nil {
		return nil, err
	}
	if err := json.NewEncoder(c.conn).Encode(Request{Cmd: cmd, Args: args}); err != nil {
		// The server may have refused the connection (too many open)
		// and closed it before reading the request: give its reason.
		if resp, rerr := c.readResponse(); rerr == nil && !resp.OK {
			return nil, errors.New(resp.Error)
		}
		return nil, fmt.Errorf("admin: send to %s: %w", c.path, plain(err))
	}
	return c.receive()
}

// ready makes sure the connection is open and the server has sent
// nothing unasked before a request goes out.
func (c *Client) ready() error {
	if c.r.Buffered() == 0 {
		switch pendingData(c.conn) {
		case connIdle:
			return nil
		case connClosed:
			c.conn.Close()
			return c.dial()
		}
	}
	// The server spoke first: its refusal of one connection too many.
	if err := c.conn.SetReadDeadline(time.Now().Add(c.timeout)); err != nil {
		return err
	}
	_, err := c.receive()
	if err == nil {
		err = errors.New("admin: unexpected answer before any request")
	}
	return err
}

// receive reads one answer.
func (c *Client) receive() (json.RawMessage, error) {
	resp, err := c.readResponse()
	if err != nil {
		return nil, err
	}
	if !resp.OK {
		return nil, errors.New(resp.Error)
	}
	return resp.Data, nil
}

// readResponse reads one answer line.
func (c *Client) readResponse() (Response, error) {
	var line []byte
	for {
		frag, err := c.r.ReadSlice('\n')
		line = append(line, frag...)
		if err == nil {
			break
		}
		if !errors.Is(err, bufio.ErrBufferFull) {
			if len(line) == 0 && errors.Is(err, io.EOF) {
				return Response{}, errors.New("admin: connection closed")
			}
			return Response{}, fmt.Errorf("admin: receive from %s: %w", c.path, plain(err))
		}
		if len(line) > maxResponseBytes {
			return Response{}, fmt.Errorf("admin: answer longer than %d bytes", maxResponseBytes)
		}
	}
	var resp Response
	if err := json.Unmarshal(line, &resp); err != nil {
		return Response{}, fmt.Errorf("admin: malformed response: %w", err)
	}
	return resp, nil
}

// plain drops the addresses from a network error: the server's address is
// the private path its socket was bound at before it was moved into place.
func plain(err error) error {
	var op *net.OpError
	if errors.As(err, &op) {
		return op.Err
	}
	return err
}
