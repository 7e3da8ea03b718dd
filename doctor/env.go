package doctor

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"time"

	"github.com/lisabot/lisa/adapters/llm"
	"github.com/lisabot/lisa/adapters/matrix"
	"github.com/lisabot/lisa/config"
	"github.com/lisabot/lisa/daemon"
	"github.com/lisabot/lisa/sameorigin"
)

// Env is what the checks share: the resolved configuration and the
// answers several sections need (the homeserver's, asked once).
type Env struct {
	// Res is the loaded, valid configuration with its secrets.
	Res config.Resolved
	// ConfigPath is the configuration file as given.
	ConfigPath string
	// RequestTimeout bounds one request to a server.
	RequestTimeout time.Duration

	ctx       context.Context
	transport *http.Transport
	matrix    *matrix.Client
	matrixErr error

	versions   memo[[]string]
	whoami     memo[identity]
	joined     memo[[]string]
	models     memo[[]string]
	serverInfo memo[llm.ServerInfo]
}

// identity is whom the access token belongs to.
type identity struct{ user, device string }

// memo is a value computed once, by whichever check asks first.
type memo[T any] struct {
	once sync.Once
	v    T
	err  error
}

func (m *memo[T]) get(f func() (T, error)) (T, error) {
	m.once.Do(func() { m.v, m.err = f() })
	return m.v, m.err
}

func newEnv(ctx context.Context, res config.Resolved, path string, timeout time.Duration) *Env {
	e := &Env{Res: res, ConfigPath: path, RequestTimeout: timeout, ctx: ctx, transport: daemon.PooledTransport(4)}
	m := res.Config.Matrix
	e.matrix, e.matrixErr = matrix.Open(m.HomeserverURL, m.UserID, m.DeviceID, res.MatrixAccessToken.Reveal(),
		&http.Client{Timeout: timeout, Transport: e.transport})
	return e
}

// close releases the connections of the run.
func (e *Env) close() { e.transport.CloseIdleConnections() }

// HTTPClient returns a client for one check's requests: bounded by
// RequestTimeout, never through a proxy and never following a redirect
// to another origin (like every client of Lisa's).
func (e *Env) HTTPClient() *http.Client {
	return sameorigin.Guard(&http.Client{Timeout: e.RequestTimeout, Transport: e.transport})
}

// request runs f with a context bounded by RequestTimeout within the run
// (not within the asking check: another check may share the answer).
func request[T any](e *Env, f func(ctx context.Context) (T, error)) (T, error) {
	ctx, cancel := context.WithTimeout(e.ctx, e.RequestTimeout)
	defer cancel()
	return f(ctx)
}

// errHomeserverDown is the reason given by checks that need the
// homeserver when it did not answer.
var errHomeserverDown = errors.New("the homeserver is not reachable (see the homeserver section)")

// Versions returns the homeserver's spec versions, asked once.
func (e *Env) Versions() ([]string, error) {
	return e.versions.get(func() ([]string, error) {
		if e.matrixErr != nil {
			return nil, e.matrixErr
		}
		return request(e, e.matrix.SpecVersions)
	})
}

// Whoami returns whom the access token belongs to, asked once; it is not
// asked when the homeserver did not answer GET /versions.
func (e *Env) Whoami() (user, device string, err error) {
	id, err := e.whoami.get(func() (identity, error) {
		if _, err := e.Versions(); err != nil {
			return identity{}, errHomeserverDown
		}
		return request(e, func(ctx context.Context) (identity, error) {
			u, d, err := e.matrix.Whoami(ctx)
			return identity{u, d}, err
		})
	})
	return id.user, id.device, err
}

// JoinedRooms returns the rooms the token's user has joined, asked once.
func (e *Env) JoinedRooms() ([]string, error) {
	return e.joined.get(func() ([]string, error) {
		return request(e, e.matrix.JoinedRooms)
	})
}

// Matrix returns the homeserver session (not checked: see Whoami).
func (e *Env) Matrix() *matrix.Client { return e.matrix }
