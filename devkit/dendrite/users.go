package dendrite

import (
	"context"

	"github.com/lisabot/lisa/devkit/hsclient"
)

// Account is a logged-in Matrix device ([hsclient.Account]): formatting or
// logging it never shows its access token.
type Account = hsclient.Account

// APIError is an unsuccessful response from the server's HTTP API
// ([hsclient.APIError]).
type APIError = hsclient.APIError

// RegisterUser creates the ordinary (non-admin) account @localpart:localhost
// through shared-secret registration and logs it in with deviceID (empty
// lets the server choose one). Passwords should be at least 8 characters.
func (s *Server) RegisterUser(ctx context.Context, localpart, password, deviceID string) (Account, error) {
	return s.api().RegisterAndLogin(ctx, localpart, password, deviceID, false)
}

// Login logs @localpart:localhost in with a password and returns a new
// access token for deviceID (empty lets the server choose).
func (s *Server) Login(ctx context.Context, localpart, password, deviceID string) (Account, error) {
	return s.api().Login(ctx, localpart, password, deviceID)
}

// RegisterAdmin is [Server.RegisterUser] for a server admin account. Admin
// accounts are exempt from rate limiting.
func (s *Server) RegisterAdmin(ctx context.Context, localpart, password, deviceID string) (Account, error) {
	return s.api().RegisterAndLogin(ctx, localpart, password, deviceID, true)
}

// api is the client for registration and login. Logging in again with the
// same device ID revokes that device's previous access token.
func (s *Server) api() *hsclient.Client {
	return &hsclient.Client{Name: "dendrite", URL: s.URL, Secret: s.secret, HTTP: s.client, Log: s.log, Redact: s.redact}
}
