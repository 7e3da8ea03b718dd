package daemon

import (
	"net/http"
	"time"

	"github.com/lisabot/lisa/config"
)

// MatrixClientTimeout bounds one homeserver request, /sync long-polls
// included (at most 120 s plus 30 s of slack).
const MatrixClientTimeout = 180 * time.Second

// PooledTransport returns a connection pool that keeps idlePerHost idle
// keep-alive connections per host. Go's default keeps 2: Lisa has a /sync
// long-poll, /context beside /joined_members, typing notices and the
// sends of several rooms in flight at once, so with 2 most requests under
// load would open a new connection (with a TLS handshake to a remote
// homeserver) and close it again.
//
// The pool never goes through a proxy: a clone of http.DefaultTransport
// would keep its http.ProxyFromEnvironment, so Proxy is cleared. Lisa
// never uses proxy environment variables (HTTP_PROXY, HTTPS_PROXY,
// NO_PROXY); a proxy must be configured explicitly, and no configuration
// key for one exists yet.
func PooledTransport(idlePerHost int) *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.Proxy = nil
	t.MaxIdleConnsPerHost = idlePerHost
	t.MaxIdleConns = 2 * idlePerHost
	return t
}

// MatrixTransport is the pool for the homeserver: per room with an active
// invocation up to four requests at once, plus /sync and a little room.
func MatrixTransport(rt config.RuntimeConfig) *http.Transport {
	return PooledTransport(4*rt.MaxConcurrentRooms + 4)
}

// MatrixHTTPClient is the HTTP client of Lisa's Matrix session. Like
// every PooledTransport it ignores proxy environment variables.
func MatrixHTTPClient(rt config.RuntimeConfig) *http.Client {
	return &http.Client{Timeout: MatrixClientTimeout, Transport: MatrixTransport(rt)}
}
