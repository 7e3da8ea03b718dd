package hsclient

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha1"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"time"
)

const (
	// maxResponse bounds the response bodies read from the server.
	maxResponse = 1 << 20
	// rateLimitAttempts is how often a rate-limited request (M_LIMIT_EXCEEDED)
	// is tried before the error is returned.
	rateLimitAttempts = 5
	// maxRetryAfter caps the server-requested wait before a retry.
	maxRetryAfter = 5 * time.Second
)

// Account is a logged-in Matrix device. Formatting it with fmt or logging it
// with slog shows the user and device but never the access token.
type Account struct {
	// UserID is the full Matrix user ID, e.g. "@lisa:localhost".
	UserID string
	// DeviceID is the device the access token belongs to.
	DeviceID string
	// AccessToken authenticates requests as this device. Secret.
	AccessToken string
}

// String describes the account without its access token.
func (a Account) String() string {
	return fmt.Sprintf("%s (device %s)", a.UserID, a.DeviceID)
}

// GoString is like String for the %#v verb.
func (a Account) GoString() string {
	return fmt.Sprintf("Account{UserID:%q, DeviceID:%q, AccessToken:%q}", a.UserID, a.DeviceID, redacted)
}

// LogValue implements slog.LogValuer without the access token.
func (a Account) LogValue() slog.Value {
	return slog.GroupValue(slog.String("user_id", a.UserID), slog.String("device_id", a.DeviceID))
}

// APIError is an unsuccessful response from a homeserver's HTTP API.
type APIError struct {
	// Server names the homeserver ("dendrite", "synapse").
	Server string
	// Method and Path identify the request (no query, no body).
	Method, Path string
	// Status is the HTTP status code.
	Status int
	// ErrCode is the Matrix error code, e.g. "M_FORBIDDEN"; empty if the
	// body was not a Matrix error.
	ErrCode string
	// Message is the Matrix error message.
	Message string
	// RetryAfter is the server's retry_after_ms hint, if any.
	RetryAfter time.Duration
}

// Error implements error.
func (e *APIError) Error() string {
	return fmt.Sprintf("%s: %s %s: HTTP %d %s: %s", e.Server, e.Method, e.Path, e.Status, e.ErrCode, e.Message)
}

// Client makes a test homeserver's registration and login requests.
type Client struct {
	// Name prefixes errors and log lines ("dendrite", "synapse").
	Name string
	// URL returns the server's base URL (it may change on a restart).
	URL func() string
	// Secret is the registration shared secret. Never logged.
	Secret string
	// HTTP sends the requests.
	HTTP *http.Client
	// Log receives a debug line per login.
	Log *slog.Logger
	// Redact masks secrets in the server's error messages.
	Redact func(string) string
	// OnToken, if set, is told every access token a login returns (a
	// server masks them in its output).
	OnToken func(token string)
}

// RegisterAndLogin registers @localpart:<server> (an admin when admin is
// set) through shared-secret registration and logs it in with deviceID
// (empty lets the server choose one).
func (s *Client) RegisterAndLogin(ctx context.Context, localpart, password, deviceID string, admin bool) (Account, error) {
	if err := s.register(ctx, localpart, password, admin); err != nil {
		return Account{}, fmt.Errorf("register %q: %w", localpart, err)
	}
	return s.Login(ctx, localpart, password, deviceID)
}

// register performs shared-secret registration (GET then POST
// /_synapse/admin/v1/register, MAC = HMAC-SHA1 over nonce, user, password
// and "admin"/"notadmin" joined by NUL). The access token it returns belongs
// to a throwaway device and is discarded.
func (s *Client) register(ctx context.Context, localpart, password string, admin bool) error {
	const path = "/_synapse/admin/v1/register"
	var nonce struct {
		Nonce string `json:"nonce"`
	}
	if err := s.call(ctx, http.MethodGet, path, nil, &nonce); err != nil {
		return err
	}
	kind := "notadmin"
	if admin {
		kind = "admin"
	}
	mac := hmac.New(sha1.New, []byte(s.Secret))
	mac.Write([]byte(strings.Join([]string{nonce.Nonce, localpart, password, kind}, "\x00")))
	req := struct {
		Nonce    string `json:"nonce"`
		Username string `json:"username"`
		Password string `json:"password"`
		Admin    bool   `json:"admin"`
		MAC      string `json:"mac"`
	}{nonce.Nonce, localpart, password, admin, hex.EncodeToString(mac.Sum(nil))}
	var resp struct {
		UserID string `json:"user_id"`
	}
	return s.call(ctx, http.MethodPost, path, req, &resp)
}

// Login logs @localpart in with a password and returns a new access token
// for deviceID (empty lets the server choose). On Dendrite, logging in
// again with the same device ID revokes that device's previous token.
func (s *Client) Login(ctx context.Context, localpart, password, deviceID string) (Account, error) {
	type identifier struct {
		Type string `json:"type"`
		User string `json:"user"`
	}
	req := struct {
		Type       string     `json:"type"`
		Identifier identifier `json:"identifier"`
		Password   string     `json:"password"`
		DeviceID   string     `json:"device_id,omitempty"`
	}{"m.login.password", identifier{"m.id.user", localpart}, password, deviceID}
	var resp struct {
		UserID      string `json:"user_id"`
		AccessToken string `json:"access_token"`
		DeviceID    string `json:"device_id"`
	}
	if err := s.call(ctx, http.MethodPost, "/_matrix/client/v3/login", req, &resp); err != nil {
		return Account{}, fmt.Errorf("log in %q: %w", localpart, err)
	}
	if resp.AccessToken == "" || resp.UserID == "" {
		return Account{}, fmt.Errorf("log in %q: %s: response without user_id or access_token", localpart, s.Name)
	}
	if s.OnToken != nil {
		s.OnToken(resp.AccessToken)
	}
	acct := Account{UserID: resp.UserID, DeviceID: resp.DeviceID, AccessToken: resp.AccessToken}
	s.Log.Debug(s.Name+" account logged in", "account", acct)
	return acct, nil
}

// call sends a JSON request and decodes a JSON response into out, retrying
// after M_LIMIT_EXCEEDED as the server asks (rate limiting covers login).
func (s *Client) call(ctx context.Context, method, path string, in, out any) error {
	for attempt := 1; ; attempt++ {
		err := s.callOnce(ctx, method, path, in, out)
		var apiErr *APIError
		if !errors.As(err, &apiErr) || apiErr.ErrCode != "M_LIMIT_EXCEEDED" || attempt == rateLimitAttempts {
			return err
		}
		wait := min(max(apiErr.RetryAfter, 50*time.Millisecond), maxRetryAfter)
		timer := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			timer.Stop()
			return err
		case <-timer.C:
		}
	}
}

// callOnce performs one request. Errors never contain the request body.
func (s *Client) callOnce(ctx context.Context, method, path string, in, out any) error {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return fmt.Errorf("%s: %s %s: encode request: %w", s.Name, method, path, err)
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, s.URL()+path, body)
	if err != nil {
		return fmt.Errorf("%s: %s %s: %w", s.Name, method, path, err)
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := s.HTTP.Do(req)
	if err != nil {
		return fmt.Errorf("%s: %s %s: %w", s.Name, method, path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxResponse))
	if err != nil {
		return fmt.Errorf("%s: %s %s: read response: %w", s.Name, method, path, err)
	}
	if resp.StatusCode != http.StatusOK {
		return s.apiError(method, path, resp.StatusCode, data)
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("%s: %s %s: decode response: %w", s.Name, method, path, err)
	}
	return nil
}

// apiError builds an APIError from a non-200 response body.
func (s *Client) apiError(method, path string, status int, data []byte) error {
	var m struct {
		ErrCode      string  `json:"errcode"`
		Error        string  `json:"error"`
		RetryAfterMS float64 `json:"retry_after_ms"`
	}
	e := &APIError{Server: s.Name, Method: method, Path: path, Status: status}
	if json.Unmarshal(data, &m) == nil && m.ErrCode != "" {
		e.ErrCode, e.Message = m.ErrCode, s.redact(m.Error)
		e.RetryAfter = time.Duration(m.RetryAfterMS * float64(time.Millisecond))
		return e
	}
	text := strings.TrimSpace(string(data))
	if len(text) > 200 {
		text = text[:200] + "…"
	}
	e.Message = s.redact(text)
	return e
}

const redacted = "[REDACTED]"

func (s *Client) redact(text string) string {
	if s.Redact == nil {
		return text
	}
	return s.Redact(text)
}
