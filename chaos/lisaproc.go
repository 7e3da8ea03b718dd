package chaos

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Log messages of `lisa run` that a campaign reads. They are part of the
// daemon's contract with this package.
const (
	logReady     = "lisa running"
	logFault     = "chaos fault injected"
	logTransit   = "invocation transition"
	logKill      = "failpoint reached: killing this process"
	logLeakCheck = "goroutine leak check after stop"
	logBaseline  = "sync baseline recorded; earlier messages will not be answered"
)

// lisaProc is one run of `lisa run` as a subprocess.
type lisaProc struct {
	cmd     *exec.Cmd
	started time.Time
	ready   chan struct{}
	done    chan struct{}
	// baseline is closed when this process recorded the first sync
	// baseline (only the very first process of a campaign does).
	baseline chan struct{}
	killed   bool // by the campaign
	termed   bool // sent SIGTERM by the campaign
	launch   int  // the campaign's launch number

	mu       sync.Mutex
	faults   map[string]int // actor fault kind -> count
	failKill string         // failpoint it killed itself at
	leaked   int            // -1 until the leak check ran
	leakText string
	lastErr  string
	readyAt  time.Time
	holds    int // ReplyHeld transitions logged
	exit     *exitEvidence
}

// logLaunch is the line the campaign writes into lisa.log before each
// process's own lines.
const logLaunch = "chaos: lisa launched"

// startLisa runs cmd as the campaign's launch number launch, appending
// its stderr (and stdout) to logPath and parsing it.
func startLisa(cmd *exec.Cmd, logPath string, launch int) (*lisaProc, error) {
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		return nil, err
	}
	pr, pw := io.Pipe()
	// Lisa logs to stderr; stdout is kept too, in case anything
	// writes there.
	cmd.Stderr, cmd.Stdout = pw, pw
	p := &lisaProc{cmd: cmd, ready: make(chan struct{}), done: make(chan struct{}), baseline: make(chan struct{}),
		faults: map[string]int{}, leaked: -1, launch: launch, exit: newExitEvidence()}
	if err := cmd.Start(); err != nil {
		_ = f.Close()
		return nil, err
	}
	p.started = time.Now()
	mark, _ := json.Marshal(map[string]any{"time": p.started.UTC().Format(time.RFC3339Nano), "level": "INFO", "msg": logLaunch,
		"launch": launch, "pid": cmd.Process.Pid})
	_, _ = f.Write(append(mark, '\n'))
	parsed := make(chan struct{})
	go func() {
		defer close(parsed)
		defer f.Close()
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 1<<20), 16<<20)
		readyOnce := sync.Once{}
		for sc.Scan() {
			line := sc.Bytes()
			_, _ = f.Write(append(line, '\n'))
			var rec logRecord
			if json.Unmarshal(line, &rec) != nil {
				p.mu.Lock()
				p.exit.raw(string(line))
				p.mu.Unlock()
				continue
			}
			p.mu.Lock()
			p.exit.record(rec)
			switch rec.Msg {
			case logReady:
				p.readyAt = time.Now()
				readyOnce.Do(func() { close(p.ready) })
			case logBaseline:
				close(p.baseline)
			case logFault:
				p.faults[rec.Kind]++
			case logTransit:
				if rec.Transit == "ReplyHeld" {
					p.holds++
				}
			case logKill:
				p.failKill = rec.Point
			case logLeakCheck:
				if rec.Leaked != nil {
					p.leaked, p.leakText = *rec.Leaked, rec.Routines
				}
			}
			if rec.Level == "ERROR" && rec.Err != "" {
				p.lastErr = rec.Msg + ": " + rec.Err
			}
			p.mu.Unlock()
		}
		_, _ = io.Copy(io.Discard, pr)
	}()
	go func() {
		_ = cmd.Wait()
		_ = pw.Close()
		<-parsed
		close(p.done)
	}()
	return p, nil
}

// kill SIGKILLs the process and waits for it.
func (p *lisaProc) kill() {
	p.mu.Lock()
	p.killed = true
	p.mu.Unlock()
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
}

// stop sends SIGTERM and waits up to grace, then kills.
func (p *lisaProc) stop(grace time.Duration) error {
	p.mu.Lock()
	p.termed = true
	p.mu.Unlock()
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(grace):
		p.kill()
		return errors.New("lisa did not stop within its grace period; killed")
	}
	if code := p.cmd.ProcessState.ExitCode(); code != 0 {
		return fmt.Errorf("lisa exited with %d after SIGTERM (%s)", code, p.lastError())
	}
	return nil
}

// cause says why an exited process ended.
func (p *lisaProc) cause() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	st := p.cmd.ProcessState
	switch {
	case p.killed:
		return "sigkill"
	case p.failKill != "":
		return "failpoint:" + p.failKill
	case st == nil:
		return "unknown"
	}
	prefix := ""
	if p.termed {
		prefix = "sigterm:"
	}
	if ws, ok := st.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return prefix + "signal:" + ws.Signal().String()
	}
	if p.termed && st.ExitCode() == 0 {
		return "stopped"
	}
	return prefix + fmt.Sprintf("exit:%d", st.ExitCode())
}

// ownExit names why the process exited by itself: not killed by the
// campaign or at a failpoint, and not (cleanly) stopped by its SIGTERM.
// ok is false for any other end.
func (p *lisaProc) ownExit() (c ExitCause, ok bool) {
	status := p.cause()
	if status == "sigkill" || status == "stopped" || status == "unknown" || strings.HasPrefix(status, "failpoint:") {
		return ExitCause{}, false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.exit.cause(status), true
}

func (p *lisaProc) lastError() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.lastErr
}

func (p *lisaProc) faultCounts() map[string]int {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := map[string]int{}
	for k, v := range p.faults {
		out[k] = v
	}
	return out
}

func (p *lisaProc) heldCount() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.holds
}

func (p *lisaProc) leakReport() (int, string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.leaked, p.leakText
}
