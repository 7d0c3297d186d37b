package etcdstore

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/transport"

	"github.com/intranode/intranode/backend"
	"github.com/intranode/intranode/symmetric/store"
)

// Scheme is the URL scheme this package registers with store.Open.
const Scheme = "etcd"

// EnvPassword supplies the password of an etcd:// URL that names a user
// but no password.
const EnvPassword = "INTRANODE_ETCD_PASSWORD"

func init() {
	store.RegisterScheme(Scheme, func(ctx context.Context, u *url.URL, opts ...store.Option) (store.Store, error) {
		s, err := Open(ctx, u, opts...)
		if err != nil {
			return nil, err // a nil Store, not a Store holding a nil *Store
		}
		return s, nil
	})
}

// Open opens the store an etcd:// URL names (see ConfigFromURL); store.Open
// calls it for such URLs.
func Open(ctx context.Context, u *url.URL, opts ...store.Option) (*Store, error) {
	cfg, err := ConfigFromURL(u)
	if err != nil {
		return nil, err
	}
	return New(ctx, cfg, opts...)
}

// ConfigFromURL reads a Config from
//
//	etcd://[USER[:PASSWORD]@]HOST:PORT[,HOST:PORT...]/PREFIX[?PARAMS]
//
// with parameters ttl (a Go duration), member, tls (a boolean: TLS with the
// system's roots), cacert, cert and key (PEM files; any implies TLS; cert
// and key go together). A USER without a PASSWORD takes it from
// $INTRANODE_ETCD_PASSWORD.
func ConfigFromURL(u *url.URL) (Config, error) {
	bad := func(format string, args ...any) (Config, error) {
		return Config{}, backend.Errorf(backend.CodeInvalidArgument, "etcd store: URL %q: %s", u.Redacted(), fmt.Sprintf(format, args...))
	}
	if u.Scheme != Scheme {
		return bad("scheme is not %s://", Scheme)
	}
	if err := store.CheckQuery(u, "ttl", "member", "tls", "cacert", "cert", "key"); err != nil {
		return Config{}, err
	}
	if u.Host == "" || u.Opaque != "" {
		return bad("want %s://HOST:PORT[,HOST:PORT...]/PREFIX", Scheme)
	}
	var cfg Config
	q := u.Query()
	var err error
	if v := q.Get("ttl"); v != "" {
		if cfg.TTL, err = time.ParseDuration(v); err != nil || cfg.TTL <= 0 {
			return bad("ttl %q is not a positive duration", v)
		}
	}
	cfg.Member = q.Get("member")
	cfg.Prefix = u.Path
	if strings.Trim(cfg.Prefix, "/") == "" {
		return bad("no prefix: name the job, as in %s://HOST:PORT/intranode/JOB", Scheme)
	}
	useTLS := false
	if v := q.Get("tls"); v != "" {
		if useTLS, err = strconv.ParseBool(v); err != nil {
			return bad("tls %q is not a boolean", v)
		}
	}
	info := transport.TLSInfo{TrustedCAFile: q.Get("cacert"), CertFile: q.Get("cert"), KeyFile: q.Get("key")}
	if (info.CertFile == "") != (info.KeyFile == "") {
		return bad("cert and key go together")
	}
	switch {
	case !info.Empty() || info.TrustedCAFile != "":
		if cfg.TLS, err = info.ClientConfig(); err != nil {
			return Config{}, backend.Wrap(backend.CodeInvalidArgument, err, fmt.Sprintf("etcd store: URL %q: TLS files", u.Redacted()))
		}
	case useTLS:
		cfg.TLS = &tls.Config{MinVersion: tls.VersionTLS12}
	}
	endpointScheme := "http://"
	if cfg.TLS != nil {
		endpointScheme = "https://"
	}
	for _, hp := range strings.Split(u.Host, ",") {
		if _, port, err := net.SplitHostPort(hp); err != nil || port == "" {
			return bad("endpoint %q is not HOST:PORT", hp)
		}
		cfg.Endpoints = append(cfg.Endpoints, endpointScheme+hp)
	}
	if u.User != nil {
		cfg.Username = u.User.Username()
		pw, ok := u.User.Password()
		if !ok {
			pw = os.Getenv(EnvPassword)
		}
		cfg.Password = pw
	}
	return cfg, nil
}
