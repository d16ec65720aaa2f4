package main

import (
	"context"
	"crypto/tls"
	"net"

	"github.com/spf13/pflag"

	"github.com/pace-platform/pace/bus"
	"github.com/pace-platform/pace/stages/controller/keda"
)

// kedaFlags configure the KEDA external scaler (docs/control.md#keda).
type kedaFlags struct {
	listen, cert, key, clientCA string
}

func (f *kedaFlags) add(fs *pflag.FlagSet) {
	fs.StringVar(&f.listen, "keda-listen", "", `listen address of the KEDA external scaler, which serves each job's desired replicas to KEDA ScaledObjects ("" = none)`)
	fs.StringVar(&f.cert, "keda-tls-cert", "", "certificate file of the KEDA external scaler (TLS)")
	fs.StringVar(&f.key, "keda-tls-key", "", "key file of the KEDA external scaler (TLS)")
	fs.StringVar(&f.clientCA, "keda-client-ca", "", "CA file that verifies KEDA's client certificate; needed beyond loopback")
}

// validate refuses half a TLS pair, and a listener beyond loopback that does
// not verify its callers: the scaler tells any caller every job's replicas.
func (f *kedaFlags) validate() error {
	if f.listen == "" {
		return nil
	}
	if (f.cert == "") != (f.key == "") {
		return usageError("--keda-tls-cert and --keda-tls-key go together")
	}
	if f.clientCA != "" && f.cert == "" {
		return usageError("--keda-client-ca needs --keda-tls-cert and --keda-tls-key")
	}
	host, _, err := net.SplitHostPort(f.listen)
	if err != nil {
		return usageError("--keda-listen %q: want host:port", f.listen)
	}
	if ip := net.ParseIP(host); f.clientCA == "" && host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return usageError("--keda-listen %s is reachable from other machines: give --keda-client-ca (with --keda-tls-cert and --keda-tls-key) so that only KEDA, with its client certificate, may call it, or listen on 127.0.0.1", f.listen)
	}
	return nil
}

// tlsConfig is the scaler's TLS configuration, nil without a certificate.
func (f *kedaFlags) tlsConfig() (*tls.Config, error) {
	if f.cert == "" {
		return nil, nil
	}
	pair, err := tls.LoadX509KeyPair(f.cert, f.key)
	if err != nil {
		return nil, usageError("--keda-tls-cert, --keda-tls-key: %v", err)
	}
	cfg := &tls.Config{Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12}
	if f.clientCA != "" {
		pool, err := loadPool(f.clientCA)
		if err != nil {
			return nil, usageError("--keda-client-ca: %v", err)
		}
		cfg.ClientCAs, cfg.ClientAuth = pool, tls.RequireAndVerifyClientCert
	}
	return cfg, nil
}

// serveKEDA adds the KEDA external scaler, reading c, to w's loops when
// --keda-listen is set; every replica serves it (it only reads).
func (w *wiring) serveKEDA(c *bus.Client) error {
	f := &w.f.keda
	if f.listen == "" {
		return nil
	}
	tlsConfig, err := f.tlsConfig()
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", f.listen)
	if err != nil {
		return usageError("--keda-listen %s: %v", f.listen, err)
	}
	log := w.log.With("stage", "keda")
	log.Info("KEDA external scaler listening", "addr", ln.Addr().String(), "tls", tlsConfig != nil)
	scaler := keda.New(c, 0, keda.WithLogger(log))
	w.loops = append(w.loops, func(ctx context.Context) error { return keda.Serve(ctx, ln, scaler, tlsConfig) })
	return nil
}
