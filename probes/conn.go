package probes

import (
	"context"
	"net"
	"net/http"
	"time"

	commoncfg "github.com/prometheus/common/config"

	"github.com/vllm-exporter/vllm_exporter/internal/upstream"
)

// probeDialer has net/http's default transport's dial timeout and keep-alive.
var probeDialer = &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}

// newClient is the probes' own HTTP client on the shared connection to vLLM
// (TLS, credentials, proxy and redirect policy from u). HTTP/1.1 only: each
// probe streams on a connection of its own, so one probe's chunks never
// wait behind another's on a shared HTTP/2 connection. wrap, if set, wraps
// each dialled connection (tests). Chunks are stamped where the SSE reader
// receives them from the response body (SSEReader).
func newClient(wrap func(net.Conn) net.Conn, u *upstream.Upstream) (*http.Client, error) {
	opts := []commoncfg.HTTPClientOption{commoncfg.WithHTTP2Disabled()}
	if wrap != nil {
		opts = append(opts, commoncfg.WithDialContextFunc(func(ctx context.Context, network, addr string) (net.Conn, error) {
			c, err := probeDialer.DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			return wrap(c), nil
		}))
	}
	return u.Client("vllm_probe", opts...)
}
