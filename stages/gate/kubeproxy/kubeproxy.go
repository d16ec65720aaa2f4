// Package kubeproxy is the HTTP side of `pace gate proxy`: a reverse proxy
// to kube-apiserver that passes on what the APF filter in front of it
// admitted, as the caller (its own credentials) or as the proxy acting as
// the caller (impersonation), over HTTP/2 except for the protocol upgrades
// of exec, attach and port-forward; its errors are kube-apiserver's Status
// objects, and its readiness follows the upstream's.
package kubeproxy

import (
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"

	"github.com/pace-platform/pace/flowcontrol/apfhttp"
	"github.com/pace-platform/pace/internal/auth"
	"github.com/pace-platform/pace/internal/kubestatus"
)

// Config is what a proxy forwards to and as whom.
type Config struct {
	// Upstream is kube-apiserver's URL; Transport reaches it (NewTransport).
	Upstream  *url.URL
	Transport http.RoundTripper
	// Impersonate forwards every request as the proxy acting as its
	// authenticated caller; else the caller's own Authorization goes on.
	Impersonate bool
	// Token is the proxy's own bearer token upstream, with Impersonate; ""
	// when its identity is the transport's client certificate.
	Token string
	// RequestHeader names the front proxy's identity headers to strip
	// besides the defaults; nil for none.
	RequestHeader *auth.RequestHeader
	Log           *slog.Logger
}

// New returns the reverse proxy of cfg. Identity headers never reach the
// upstream (consumed by authentication, or forged), nor does the
// upstream's own APF classification reach the client, which sees the
// proxy's; an upstream failure is a 502, or a 504 on a timeout.
func New(cfg Config) *httputil.ReverseProxy {
	log := cfg.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(cfg.Upstream)
			pr.SetXForwarded()
			auth.StripIdentity(pr.Out.Header, cfg.RequestHeader)
			if cfg.Impersonate {
				Impersonate(pr.Out, cfg.Token)
			}
		},
		Transport:  cfg.Transport,
		BufferPool: &copyBuffers{}, // else a 32 KiB buffer allocated and cleared per response
		ModifyResponse: func(res *http.Response) error {
			res.Header.Del(apfhttp.HeaderFlowSchemaUID)
			res.Header.Del(apfhttp.HeaderPriorityLevelUID)
			return nil
		},
		ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn),
		ErrorHandler: func(w http.ResponseWriter, _ *http.Request, err error) {
			log.Warn("upstream failed", "err", err)
			code := http.StatusBadGateway
			if ne, ok := errors.AsType[net.Error](err); ok && ne.Timeout() {
				code = http.StatusGatewayTimeout
			}
			kubestatus.Write(w, code, "upstream: "+err.Error())
		},
	}
}

// Impersonate sets r's upstream identity: the proxy's (token, or its client
// certificate on the transport) acting as the authenticated caller,
// system:anonymous for a caller without credentials.
func Impersonate(r *http.Request, token string) {
	r.Header.Del("Authorization")
	if token != "" {
		r.Header.Set("Authorization", "Bearer "+token)
	}
	u, ok := auth.FromContext(r.Context())
	if !ok {
		u = auth.AnonymousUser()
	}
	r.Header.Set("Impersonate-User", u.Name)
	if u.UID != "" {
		r.Header.Set("Impersonate-Uid", u.UID)
	}
	for _, g := range u.Groups {
		if g != auth.Authenticated { // added by the upstream to every impersonated user
			r.Header.Add("Impersonate-Group", g)
		}
	}
	for k, vs := range u.Extra {
		for _, v := range vs {
			r.Header.Add("Impersonate-Extra-"+url.PathEscape(k), v)
		}
	}
}

// RefuseImpersonation refuses requests that ask to act as someone else:
// the proxy would classify its caller while the upstream acted as another.
func RefuseImpersonation(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for name := range r.Header {
			if strings.HasPrefix(name, "Impersonate-") { // net/http keeps header names canonical
				kubestatus.Write(w, http.StatusForbidden, name+": impersonation is not passed through pace gate proxy; call as the identity itself")
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}
