package admin

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
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

// maxLine bounds one request line.
const maxLine = 64 << 10

// Server is a running admin socket.
type Server struct {
	path string
	ln   net.Listener
	h    Handler
	log  *slog.Logger
	wg   sync.WaitGroup
	ctx  context.Context
	stop context.CancelFunc
}

// Listen opens the socket at path. It refuses a path whose directory is
// writable by others, a path taken by something that is not a socket, and
// a socket another process is still serving; a stale socket is replaced.
func Listen(path string, h Handler, log *slog.Logger) (*Server, error) {
	if err := checkPath(path); err != nil {
		return nil, err
	}
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("admin: listen on %s: %w", path, err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		ln.Close()
		return nil, fmt.Errorf("admin: restrict %s: %w", path, err)
	}
	ctx, stop := context.WithCancel(context.Background())
	s := &Server{path: path, ln: ln, h: h, log: log, ctx: ctx, stop: stop}
	s.wg.Add(1)
	go s.accept()
	return s, nil
}

func checkPath(path string) error {
	dir := filepath.Dir(path)
	st, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("admin: socket directory: %w", err)
	}
	if st.Mode().Perm()&0o022 != 0 && st.Mode()&os.ModeSticky == 0 {
		return fmt.Errorf("admin: socket directory %s is writable by others; refusing", dir)
	}
	fi, err := os.Lstat(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("admin: %w", err)
	}
	if fi.Mode()&os.ModeSocket == 0 {
		return fmt.Errorf("admin: %s exists and is not a socket; refusing to replace it", path)
	}
	if c, err := net.DialTimeout("unix", path, time.Second); err == nil {
		c.Close()
		return fmt.Errorf("admin: %s is in use: is another Lisa running with this data directory?", path)
	}
	return os.Remove(path) // stale socket of a process that died
}

// Close stops accepting, ends open connections and removes the socket.
func (s *Server) Close() error {
	s.stop()
	err := s.ln.Close()
	s.wg.Wait()
	_ = os.Remove(s.path)
	return err
}

func (s *Server) accept() {
	defer s.wg.Done()
	for {
		conn, err := s.ln.Accept()
		if err != nil {
			return
		}
		s.wg.Add(1)
		go s.serve(conn)
	}
}

func (s *Server) serve(conn net.Conn) {
	defer s.wg.Done()
	defer conn.Close()
	go func() { <-s.ctx.Done(); conn.Close() }()
	sc := bufio.NewScanner(conn)
	sc.Buffer(make([]byte, 4096), maxLine)
	enc := json.NewEncoder(conn)
	for sc.Scan() {
		var req Request
		resp := Response{}
		if err := json.Unmarshal(sc.Bytes(), &req); err != nil || req.Cmd == "" {
			resp.Error = "malformed request: want {\"cmd\": ..., \"args\": [...]}"
		} else {
			ctx, cancel := context.WithTimeout(s.ctx, 10*time.Second)
			data, err := s.h.Handle(ctx, req.Cmd, req.Args)
			cancel()
			if err != nil {
				resp.Error = err.Error()
			} else if raw, err := json.Marshal(data); err != nil {
				resp.Error = "internal: " + err.Error()
			} else {
				resp.OK, resp.Data = true, raw
			}
		}
		if err := enc.Encode(resp); err != nil {
			return
		}
	}
}

// Client talks to an admin socket.
type Client struct {
	conn net.Conn
	sc   *bufio.Scanner
}

// Dial connects to the socket at path.
func Dial(path string, timeout time.Duration) (*Client, error) {
	conn, err := net.DialTimeout("unix", path, timeout)
	if err != nil {
		return nil, fmt.Errorf("admin: cannot reach Lisa at %s: %w", path, err)
	}
	sc := bufio.NewScanner(conn)
	sc.Buffer(make([]byte, 4096), 16<<20)
	return &Client{conn: conn, sc: sc}, nil
}

// Close closes the connection.
func (c *Client) Close() error { return c.conn.Close() }

// Call sends one command and returns its data.
func (c *Client) Call(cmd string, args ...string) (json.RawMessage, error) {
	if err := c.conn.SetDeadline(time.Now().Add(15 * time.Second)); err != nil {
		return nil, err
	}
	if err := json.NewEncoder(c.conn).Encode(Request{Cmd: cmd, Args: args}); err != nil {
		return nil, fmt.Errorf("admin: send: %w", err)
	}
	if !c.sc.Scan() {
		if err := c.sc.Err(); err != nil {
			return nil, fmt.Errorf("admin: receive: %w", err)
		}
		return nil, errors.New("admin: connection closed")
	}
	var resp Response
	if err := json.Unmarshal(c.sc.Bytes(), &resp); err != nil {
		return nil, fmt.Errorf("admin: malformed response: %w", err)
	}
	if !resp.OK {
		return nil, errors.New(resp.Error)
	}
	return resp.Data, nil
}
