package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"time"
)

// fakesEnv, when set in the environment, makes the bench binary (or its
// test binary, see TestMain) run the latency fakes for a parent bench
// instead of benching: the hidden role of a fakes child process. Its
// value is a JSON fakesSpec.
const fakesEnv = "LISA_BENCH_FAKES"

// fakesSpec is what a fakes child process serves.
type fakesSpec struct {
	Rooms  int    `json:"rooms"`
	Prefix string `json:"prefix"`
}

// fakesHello is the one line a fakes child prints on stdout once it
// serves: where its servers are, and its rooms.
type fakesHello struct {
	Homeserver string   `json:"homeserver"`
	LLM        string   `json:"llm"`
	Control    string   `json:"control"`
	Rooms      []string `json:"rooms"`
}

// runFakesChild is the fakes child process: it serves the fakes of spec
// and their control API until stdin reaches its end (the bench closed
// it, or died), then stops them. It returns the exit code.
func runFakesChild(spec string, stdin io.Reader, stdout, stderr io.Writer) int {
	var s fakesSpec
	if err := json.Unmarshal([]byte(spec), &s); err != nil || s.Rooms < 1 {
		fmt.Fprintf(stderr, "lisa-bench fakes: bad %s=%q\n", fakesEnv, spec)
		return exitUsage
	}
	f, err := startLocalFakes(s.Rooms, s.Prefix)
	if err != nil {
		fmt.Fprintln(stderr, "lisa-bench fakes:", err)
		return exitFailure
	}
	defer f.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(stderr, "lisa-bench fakes:", err)
		return exitFailure
	}
	srv := &http.Server{Handler: f.control(), ReadHeaderTimeout: 5 * time.Second}
	served := make(chan struct{})
	go func() { defer close(served); _ = srv.Serve(ln) }()
	defer func() { _ = srv.Close(); <-served }()
	hello, _ := json.Marshal(fakesHello{Homeserver: f.stack.hs.URL(), LLM: f.llmURL(),
		Control: "http://" + ln.Addr().String(), Rooms: f.roomIDs()})
	if _, err := fmt.Fprintf(stdout, "%s\n", hello); err != nil {
		return exitFailure
	}
	_, _ = io.Copy(io.Discard, stdin)
	return exitOK
}

// fakesProcess is a fakes child process started by the bench, and the
// bench's side of its control API.
type fakesProcess struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stderr *bytes.Buffer // read only after the process ended
	done   chan error
	hello  fakesHello
	client *http.Client
}

// startFakesProcess re-executes this binary as a fakes child process with
// n rooms named by prefix and waits for its hello. The caller must Close
// it.
func startFakesProcess(ctx context.Context, n int, prefix string) (*fakesProcess, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	spec, _ := json.Marshal(fakesSpec{Rooms: n, Prefix: prefix})
	cmd := exec.CommandContext(ctx, exe)
	cmd.Env = append(os.Environ(), fakesEnv+"="+string(spec))
	cmd.WaitDelay = 5 * time.Second
	p := &fakesProcess{cmd: cmd, stderr: &bytes.Buffer{}, done: make(chan error, 1),
		client: &http.Client{Timeout: 2 * time.Minute, Transport: &http.Transport{}}}
	cmd.Stderr = p.stderr
	if p.stdin, err = cmd.StdinPipe(); err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start the fakes process: %w", err)
	}
	go func() { p.done <- cmd.Wait() }()
	if err := p.readHello(stdout); err != nil {
		p.Close()
		return nil, fmt.Errorf("fakes process: %w (stderr: %q)", err, strings.TrimSpace(p.stderr.String()))
	}
	return p, nil
}

// readHello reads the child's hello line, for at most 30 seconds.
func (p *fakesProcess) readHello(stdout io.Reader) error {
	line := make(chan string, 1)
	go func() {
		s, _ := bufio.NewReader(stdout).ReadString('\n')
		line <- s
	}()
	select {
	case s := <-line:
		if err := json.Unmarshal([]byte(s), &p.hello); err != nil {
			return fmt.Errorf("no hello: %w", err)
		}
		return nil
	case <-time.After(30 * time.Second):
		return errors.New("no hello within 30 s")
	}
}

// Close ends the child's stdin, which stops it, and waits for it to
// exit; a child still running after 10 seconds is killed.
func (p *fakesProcess) Close() {
	p.client.CloseIdleConnections()
	_ = p.stdin.Close()
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

func (p *fakesProcess) target() benchTarget {
	return benchTarget{p.hello.Homeserver, benchBot, benchDevice, benchToken}
}
func (p *fakesProcess) llmURL() string    { return p.hello.LLM }
func (p *fakesProcess) roomIDs() []string { return p.hello.Rooms }

func (p *fakesProcess) invoke(ctx context.Context, room string, i int) (invokeResult, error) {
	var res invokeResult
	q := url.Values{"room": {room}, "i": {fmt.Sprint(i)}}
	err := p.get(ctx, "/invoke?"+q.Encode(), &res)
	return res, err
}

func (p *fakesProcess) counts(ctx context.Context) (map[string]int, error) {
	var c map[string]int
	err := p.get(ctx, "/counts", &c)
	return c, err
}

func (p *fakesProcess) cpu(ctx context.Context) (time.Duration, bool, error) {
	var ns int64
	err := p.get(ctx, "/cpu", &ns)
	return time.Duration(ns), err == nil, err
}

// get asks the child's control API for path and decodes its JSON answer
// into v.
func (p *fakesProcess) get(ctx context.Context, path string, v any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.hello.Control+path, nil)
	if err != nil {
		return err
	}
	resp, err := p.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return fmt.Errorf("fakes process: %s", strings.TrimSpace(string(b)))
	}
	return json.NewDecoder(resp.Body).Decode(v)
}
