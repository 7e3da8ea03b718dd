package web

import (
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lisabot/lisa/messages"
)

func TestFetchHTMLWithTitle(t *testing.T) {
	const page = "<!doctype html><html><head><title>\n  Hello &amp;\t <b>World</b> </title></head><body>x</body></html>"
	srv := server(t, func(w http.ResponseWriter, r *http.Request) {
		if got := r.Header.Get("Accept-Encoding"); got != "identity" {
			t.Errorf("Accept-Encoding = %q", got)
		}
		if got := r.Header.Get("User-Agent"); got != "LisaTest/1" {
			t.Errorf("User-Agent = %q", got)
		}
		for _, h := range []string{"Cookie", "Authorization", "Proxy-Authorization"} {
			if r.Header.Get(h) != "" {
				t.Errorf("request carries %s", h)
			}
		}
		w.Header().Set("Content-Type", "text/html; charset=UTF-8")
		http.SetCookie(w, &http.Cookie{Name: "session", Value: "abc"})
		_, _ = io.WriteString(w, page)
	})
	f := newFetcher(t, testConfig())
	for range 2 { // a second fetch must not send the cookie back
		p, err := f.Fetch(context.Background(), srv.URL+"/doc?x=1#frag")
		if err != nil {
			t.Fatal(err)
		}
		if p.Title != "Hello & <b>World</b>" {
			t.Errorf("Title = %q", p.Title)
		}
		if p.ContentType != "text/html; charset=utf-8" {
			t.Errorf("ContentType = %q", p.ContentType)
		}
		if p.FinalURL != srv.URL+"/doc?x=1" {
			t.Errorf("FinalURL = %q", p.FinalURL)
		}
		if string(p.Body) != page {
			t.Errorf("Body = %q", p.Body)
		}
	}
}

func TestFetchXHTMLAndPlainText(t *testing.T) {
	srv := server(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/x":
			w.Header().Set("Content-Type", "application/xhtml+xml")
			_, _ = io.WriteString(w, `<html xmlns="http://www.w3.org/1999/xhtml"><head><title>X</title></head></html>`)
		default:
			w.Header().Set("Content-Type", "text/plain; charset=iso-8859-1")
			_, _ = io.WriteString(w, "<title>not a title</title> plain")
		}
	})
	f := newFetcher(t, testConfig())
	p, err := f.Fetch(context.Background(), srv.URL+"/x")
	if err != nil || p.Title != "X" || p.ContentType != "application/xhtml+xml" {
		t.Errorf("xhtml: %+v %v", p, err)
	}
	p, err = f.Fetch(context.Background(), srv.URL+"/t")
	if err != nil {
		t.Fatal(err)
	}
	if p.Title != "" || p.ContentType != "text/plain; charset=iso-8859-1" || !strings.HasSuffix(string(p.Body), " plain") {
		t.Errorf("plain: %+v", p)
	}
}

func TestFetchTitleBoundedAndCleaned(t *testing.T) {
	long := strings.Repeat("é", 5*MaxTitleRunes)
	srv := server(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		_, _ = fmt.Fprintf(w, "<title>a\x01b\u202ec\xffd %s</title>", long)
	})
	p, err := newFetcher(t, testConfig()).Fetch(context.Background(), srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	if n := len([]rune(p.Title)); n > MaxTitleRunes {
		t.Errorf("title has %d runes", n)
	}
	if !strings.HasPrefix(p.Title, "abc\uFFFDd é") {
		t.Errorf("title = %.40q", p.Title)
	}
}

func TestFetchMissingContentLength(t *testing.T) {
	url := rawServer(t, func(c net.Conn) {
		_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nConnection: close\r\n\r\nno length here")
	})
	p, err := newFetcher(t, testConfig()).Fetch(context.Background(), url)
	if err != nil || string(p.Body) != "no length here" {
		t.Errorf("got %q, %v", p.Body, err)
	}
}

func TestFetchFalseContentLength(t *testing.T) {
	t.Run("claims more than sent", func(t *testing.T) {
		url := rawServer(t, func(c net.Conn) {
			_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 1000\r\n\r\nonly ten b")
		})
		_, err := newFetcher(t, testConfig()).Fetch(context.Background(), url)
		if te := wantCode(t, err, messages.ToolHTTPError); !te.Retryable {
			t.Error("truncated body should be retryable")
		}
	})
	t.Run("claims less than sent", func(t *testing.T) {
		url := rawServer(t, func(c net.Conn) {
			_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 5\r\n\r\n"+strings.Repeat("x", 200<<10))
		})
		p, err := newFetcher(t, testConfig()).Fetch(context.Background(), url)
		if err != nil || string(p.Body) != "xxxxx" {
			t.Errorf("got %d bytes, %v", len(p.Body), err)
		}
	})
	t.Run("claims more than the limit", func(t *testing.T) {
		var read atomic.Int64
		url := rawServer(t, func(c net.Conn) {
			_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 100000000\r\n\r\n")
			chunk := bytes.Repeat([]byte("y"), 32<<10)
			for range 3000 {
				if _, err := c.Write(chunk); err != nil {
					return
				}
			}
		})
		cfg := testConfig()
		cfg.Dial = countingDial(t, &read)
		_, err := newFetcher(t, cfg).Fetch(context.Background(), url)
		wantCode(t, err, messages.ToolDownloadTooLarge)
		if n := read.Load(); n > 8<<10 {
			t.Errorf("read %d bytes before refusing a too-large Content-Length", n)
		}
	})
}

func TestFetchChunked(t *testing.T) {
	srv := server(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		n := 10
		if r.URL.Path == "/big" {
			n = 100
		}
		for i := range n {
			_, _ = fmt.Fprintf(w, "<p>%04d %s</p>", i, strings.Repeat("z", 1000))
			w.(http.Flusher).Flush()
		}
	})
	f := newFetcher(t, testConfig())
	p, err := f.Fetch(context.Background(), srv.URL+"/small")
	if err != nil || len(p.Body) != 10*1012 {
		t.Errorf("got %d bytes, %v", len(p.Body), err)
	}
	_, err = f.Fetch(context.Background(), srv.URL+"/big")
	wantCode(t, err, messages.ToolDownloadTooLarge)
}

func TestFetchBodyExactlyAtLimit(t *testing.T) {
	cfg := testConfig()
	srv := server(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		w.Header().Set("Content-Length", fmt.Sprint(cfg.MaxDownloadBytes))
		_, _ = w.Write(bytes.Repeat([]byte("a"), int(cfg.MaxDownloadBytes)))
	})
	p, err := newFetcher(t, cfg).Fetch(context.Background(), srv.URL)
	if err != nil || int64(len(p.Body)) != cfg.MaxDownloadBytes {
		t.Errorf("got %d bytes, %v", len(p.Body), err)
	}
}

func TestFetchEndlessBodyIsCut(t *testing.T) {
	var read atomic.Int64
	srv := blockingServer(t, func(w http.ResponseWriter, r *http.Request, release <-chan struct{}) {
		w.Header().Set("Content-Type", "text/plain")
		chunk := bytes.Repeat([]byte("e"), 16<<10)
		for {
			select {
			case <-release:
				return
			default:
			}
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
	})
	cfg := testConfig()
	cfg.Dial = countingDial(t, &read)
	_, err := newFetcher(t, cfg).Fetch(context.Background(), srv.URL)
	wantCode(t, err, messages.ToolDownloadTooLarge)
	if n, max := read.Load(), cfg.MaxDownloadBytes+32<<10; n > max {
		t.Errorf("read %d bytes from the network, want at most %d", n, max)
	}
}

func TestFetchSlowHeaders(t *testing.T) {
	srv := blockingServer(t, func(w http.ResponseWriter, r *http.Request, release <-chan struct{}) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	cfg := testConfig()
	cfg.ReadTimeout = 300 * time.Millisecond
	start := time.Now()
	_, err := newFetcher(t, cfg).Fetch(context.Background(), srv.URL)
	wantCode(t, err, messages.ToolTimeout)
	within(t, time.Since(start), 250*time.Millisecond, 300*time.Millisecond+1500*time.Millisecond)
}

func TestFetchSlowBody(t *testing.T) {
	srv := blockingServer(t, func(w http.ResponseWriter, r *http.Request, release <-chan struct{}) {
		w.Header().Set("Content-Type", "text/plain")
		_, _ = io.WriteString(w, "first bytes")
		w.(http.Flusher).Flush()
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	cfg := testConfig()
	cfg.ReadTimeout = 300 * time.Millisecond
	start := time.Now()
	_, err := newFetcher(t, cfg).Fetch(context.Background(), srv.URL)
	te := wantCode(t, err, messages.ToolTimeout)
	if !te.Retryable {
		t.Error("stall should be retryable")
	}
	within(t, time.Since(start), 250*time.Millisecond, 300*time.Millisecond+1500*time.Millisecond)
}

func TestFetchTotalTimeoutOnTrickle(t *testing.T) {
	srv := blockingServer(t, func(w http.ResponseWriter, r *http.Request, release <-chan struct{}) {
		w.Header().Set("Content-Type", "text/plain")
		for {
			if _, err := io.WriteString(w, "."); err != nil {
				return
			}
			w.(http.Flusher).Flush()
			select {
			case <-release:
				return
			case <-r.Context().Done():
				return
			case <-time.After(30 * time.Millisecond):
			}
		}
	})
	cfg := testConfig()
	cfg.ReadTimeout = 300 * time.Millisecond
	cfg.TotalTimeout = 600 * time.Millisecond
	start := time.Now()
	_, err := newFetcher(t, cfg).Fetch(context.Background(), srv.URL)
	wantCode(t, err, messages.ToolTimeout)
	within(t, time.Since(start), 550*time.Millisecond, 600*time.Millisecond+1500*time.Millisecond)
}

func TestFetchConnectTimeout(t *testing.T) {
	cfg := testConfig()
	cfg.ConnectTimeout = 200 * time.Millisecond
	cfg.Dial = func(ctx context.Context, _, _ string) (net.Conn, error) {
		<-ctx.Done() // a black-holed SYN
		return nil, ctx.Err()
	}
	start := time.Now()
	_, err := newFetcher(t, cfg).Fetch(context.Background(), "http://127.0.0.1:9/")
	wantCode(t, err, messages.ToolTimeout)
	within(t, time.Since(start), 150*time.Millisecond, 200*time.Millisecond+1500*time.Millisecond)
}

func TestFetchCallerCancel(t *testing.T) {
	srv := blockingServer(t, func(w http.ResponseWriter, r *http.Request, release <-chan struct{}) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, cancel)
	_, err := newFetcher(t, testConfig()).Fetch(ctx, srv.URL)
	if te := wantCode(t, err, messages.ToolTimeout); te.Retryable {
		t.Error("cancellation should not be retryable")
	}
}

func TestFetchRefusesContentEncoding(t *testing.T) {
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	_, _ = zw.Write(bytes.Repeat([]byte("<p>bomb</p>"), 10000))
	_ = zw.Close()
	srv := server(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		switch r.URL.Path {
		case "/gzip":
			w.Header().Set("Content-Encoding", "gzip")
			_, _ = w.Write(gz.Bytes())
		case "/br":
			w.Header().Set("Content-Encoding", "identity, br")
			_, _ = io.WriteString(w, "xx")
		default:
			w.Header().Set("Content-Encoding", "Identity")
			_, _ = io.WriteString(w, "<title>ok</title>")
		}
	})
	f := newFetcher(t, testConfig())
	for _, path := range []string{"/gzip", "/br"} {
		_, err := f.Fetch(context.Background(), srv.URL+path)
		wantCode(t, err, messages.ToolUnsupportedContentType)
	}
	if p, err := f.Fetch(context.Background(), srv.URL+"/identity"); err != nil || p.Title != "ok" {
		t.Errorf("identity: %+v %v", p, err)
	}
}

func TestFetchUnsupportedContentTypes(t *testing.T) {
	srv := server(t, func(w http.ResponseWriter, r *http.Request) {
		ct := r.URL.Query().Get("ct")
		if ct == "none" {
			w.Header()["Content-Type"] = nil
		} else {
			w.Header().Set("Content-Type", ct)
		}
		_, _ = w.Write([]byte("%PDF-1.7\x00\x01\x02"))
	})
	f := newFetcher(t, testConfig())
	for _, ct := range []string{"application/pdf", "image/png", "image/svg+xml", "application/octet-stream",
		"application/zip", "application/x-msdownload", "text/htmlx", "video/mp4", "none"} {
		_, err := f.Fetch(context.Background(), srv.URL+"/?ct="+ct)
		if err == nil {
			t.Errorf("%s accepted", ct)
			continue
		}
		wantCode(t, err, messages.ToolUnsupportedContentType)
	}
}

func TestFetchHTTPErrors(t *testing.T) {
	srv := server(t, func(w http.ResponseWriter, r *http.Request) {
		var code int
		_, _ = fmt.Sscan(strings.TrimPrefix(r.URL.Path, "/"), &code)
		w.Header().Set("Content-Type", "text/html")
		w.WriteHeader(code)
		_, _ = io.WriteString(w, "<title>error page</title>")
	})
	f := newFetcher(t, testConfig())
	for _, tc := range []struct {
		code      int
		retryable bool
	}{{403, false}, {404, false}, {500, true}, {503, true}, {429, true}, {304, false}} {
		_, err := f.Fetch(context.Background(), fmt.Sprintf("%s/%d", srv.URL, tc.code))
		te := wantCode(t, err, messages.ToolHTTPError)
		if te.Retryable != tc.retryable {
			t.Errorf("%d: retryable = %v", tc.code, te.Retryable)
		}
		if !strings.Contains(te.Message, fmt.Sprint(tc.code)) {
			t.Errorf("%d: message %q lacks the status", tc.code, te.Message)
		}
	}
}

func TestFetchTLSVerification(t *testing.T) {
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t.Error("request reached a server with an untrusted certificate")
	}))
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	srv.StartTLS()
	t.Cleanup(srv.Close)
	_, err := newFetcher(t, testConfig()).Fetch(context.Background(), srv.URL)
	if te := wantCode(t, err, messages.ToolHTTPError); te.Retryable {
		t.Error("certificate failure should not be retryable")
	}
}

func TestFetchRedirects(t *testing.T) {
	var hits atomic.Int64
	srv := server(t, func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		var n int
		switch p := r.URL.Path; {
		case p == "/rel":
			http.Redirect(w, r, "abs", http.StatusFound)
		case p == "/abs":
			http.Redirect(w, r, "http://"+r.Host+"/done?via=abs#frag", http.StatusMovedPermanently)
		case p == "/done":
			w.Header().Set("Content-Type", "text/plain")
			_, _ = io.WriteString(w, "arrived")
		case p == "/loop-a":
			http.Redirect(w, r, "/loop-b", http.StatusFound)
		case p == "/loop-b":
			http.Redirect(w, r, "/loop-a", http.StatusTemporaryRedirect)
		case strings.HasPrefix(p, "/chain/"):
			_, _ = fmt.Sscan(strings.TrimPrefix(p, "/chain/"), &n)
			if n == 0 {
				http.Redirect(w, r, "/done", http.StatusFound)
			} else {
				http.Redirect(w, r, fmt.Sprintf("/chain/%d", n-1), http.StatusFound)
			}
		case p == "/to":
			w.Header().Set("Location", r.URL.Query().Get("loc"))
			w.WriteHeader(http.StatusFound)
		}
	})
	f := newFetcher(t, testConfig()) // MaxRedirects 3

	p, err := f.Fetch(context.Background(), srv.URL+"/rel")
	if err != nil || string(p.Body) != "arrived" || p.FinalURL != srv.URL+"/done?via=abs" {
		t.Errorf("relative+absolute: %q %q %v", p.FinalURL, p.Body, err)
	}
	// /chain/2 → /chain/1 → /chain/0 → /done is three redirects: allowed.
	if _, err := f.Fetch(context.Background(), srv.URL+"/chain/2"); err != nil {
		t.Errorf("three redirects: %v", err)
	}
	hits.Store(0)
	_, err = f.Fetch(context.Background(), srv.URL+"/chain/3")
	wantCode(t, err, messages.ToolRedirectLimit)
	if h := hits.Load(); h != 4 {
		t.Errorf("chain made %d requests, want 4", h)
	}

	cfg := testConfig()
	cfg.MaxRedirects = 20
	hits.Store(0)
	_, err = newFetcher(t, cfg).Fetch(context.Background(), srv.URL+"/loop-a")
	wantCode(t, err, messages.ToolRedirectLimit)
	if h := hits.Load(); h != 2 {
		t.Errorf("loop made %d requests, want 2", h)
	}

	for _, loc := range []string{"file:///etc/passwd", "ftp://example.com/x", "data:text/html,<title>x</title>",
		"gopher://example.com/", "http://user:pw@" + strings.TrimPrefix(srv.URL, "http://") + "/done"} {
		hits.Store(0)
		_, err := f.Fetch(context.Background(), srv.URL+"/to?loc="+urlQueryEscape(loc))
		wantCode(t, err, messages.ToolInvalidURL)
		if h := hits.Load(); h != 1 {
			t.Errorf("%s: %d requests, want 1", loc, h)
		}
	}
}

func TestFetchNoRedirectsWhenNegative(t *testing.T) {
	srv := server(t, func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/elsewhere", http.StatusFound)
	})
	cfg := testConfig()
	cfg.MaxRedirects = -1
	_, err := newFetcher(t, cfg).Fetch(context.Background(), srv.URL)
	wantCode(t, err, messages.ToolRedirectLimit)
}

func TestFetchInvalidURL(t *testing.T) {
	f := newFetcher(t, testConfig())
	for _, u := range []string{"file:///etc/passwd", "ftp://x.org/", "data:,x", "http://u:p@x.org/"} {
		_, err := f.Fetch(context.Background(), u)
		wantCode(t, err, messages.ToolInvalidURL)
	}
}

func urlQueryEscape(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' {
			b.WriteByte(c)
		} else {
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	return b.String()
}
