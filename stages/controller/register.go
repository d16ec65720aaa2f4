package controller

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/pflag"

	"github.com/pace-platform/pace/internal/auth"
	"github.com/pace-platform/pace/internal/host"
	"github.com/pace-platform/pace/stages/controller/keda"
)

func init() {
	host.Register(host.Def{Name: "controller", Short: "Turn job progress into scaling decisions",
		Long: `The controller runs each job's control plugin (docs/control.md) on its
progress and publishes scaling decisions on pace.decisions.<job>. Plugins
keep their state in memory, so it runs on the leader. With --keda-listen
every replica also serves the jobs' desired replicas to KEDA as an external
scaler (docs/control.md#keda).`,
		New: func() host.Stage { return &command{} }})
}

// command is the controller as pace up and pace stage run it.
type command struct {
	// heartbeat is how often a decision that keeps a job's replicas is
	// published (--decision-heartbeat; 0: every decision).
	heartbeat time.Duration
	// The KEDA external scaler's listener (docs/control.md#keda).
	kedaListen, kedaCert, kedaKey, kedaClientCA string
}

func (s *command) Flags(fs *pflag.FlagSet) {
	fs.DurationVar(&s.heartbeat, "decision-heartbeat", DefaultHeartbeat,
		"how often a decision that keeps a job's replicas is published (a change is published at once; 0: every decision)")
	fs.StringVar(&s.kedaListen, "keda-listen", "", `listen address of the KEDA external scaler, which serves each job's desired replicas to KEDA ScaledObjects ("" = none)`)
	fs.StringVar(&s.kedaCert, "keda-tls-cert", "", "certificate file of the KEDA external scaler (TLS)")
	fs.StringVar(&s.kedaKey, "keda-tls-key", "", "key file of the KEDA external scaler (TLS)")
	fs.StringVar(&s.kedaClientCA, "keda-client-ca", "", "CA file that verifies KEDA's client certificate; needed beyond loopback")
}

// Validate refuses a negative heartbeat, half a TLS pair, and a scaler
// beyond loopback that does not verify its callers: it tells any caller
// every job's replicas.
func (s *command) Validate() error {
	if s.heartbeat < 0 {
		return fmt.Errorf("--decision-heartbeat %s: must not be negative", s.heartbeat)
	}
	if s.kedaListen == "" {
		return nil
	}
	if (s.kedaCert == "") != (s.kedaKey == "") {
		return errors.New("--keda-tls-cert and --keda-tls-key go together")
	}
	if s.kedaClientCA != "" && s.kedaCert == "" {
		return errors.New("--keda-client-ca needs --keda-tls-cert and --keda-tls-key")
	}
	host, _, err := net.SplitHostPort(s.kedaListen)
	if err != nil {
		return fmt.Errorf("--keda-listen %q: want host:port", s.kedaListen)
	}
	if ip := net.ParseIP(host); s.kedaClientCA == "" && host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return fmt.Errorf("--keda-listen %s is reachable from other machines: give --keda-client-ca (with --keda-tls-cert and --keda-tls-key) so that only KEDA, with its client certificate, may call it, or listen on 127.0.0.1", s.kedaListen)
	}
	return nil
}

// config is the stage's configuration the flags ask for.
func (s *command) config() Config {
	if s.heartbeat == 0 {
		return Config{Heartbeat: -1}
	}
	return Config{Heartbeat: s.heartbeat}
}

// Wire runs the plugins on the leader and, with --keda-listen, the KEDA
// external scaler on every replica (it only reads).
func (s *command) Wire(ctx context.Context, p host.Process) error {
	c, err := p.Client(ctx, "controller")
	if err != nil {
		return err
	}
	if s.kedaListen != "" {
		tlsConfig, err := s.kedaTLS()
		if err != nil {
			return err
		}
		ln, err := net.Listen("tcp", s.kedaListen)
		if err != nil {
			return fmt.Errorf("--keda-listen %s: %w", s.kedaListen, err)
		}
		log := p.Logger().With("stage", "keda")
		log.Info("KEDA external scaler listening", "addr", ln.Addr().String(), "tls", tlsConfig != nil)
		scaler := keda.New(c, 0, keda.WithLogger(log))
		p.Go(func(ctx context.Context) error { return keda.Serve(ctx, ln, scaler, tlsConfig) })
	}
	return p.Lead("controller", func() (func(context.Context) error, prometheus.Collector, error) {
		ctl, err := New(Deps{Bus: c}, s.config(), WithLogger(p.Logger()))
		if err != nil {
			return nil, nil, err
		}
		return ctl.Run, ctl.Metrics(), nil
	})
}

// kedaTLS is the scaler's TLS configuration, nil without a certificate.
func (s *command) kedaTLS() (*tls.Config, error) {
	if s.kedaCert == "" {
		return nil, nil
	}
	pair, err := tls.LoadX509KeyPair(s.kedaCert, s.kedaKey)
	if err != nil {
		return nil, fmt.Errorf("--keda-tls-cert, --keda-tls-key: %w", err)
	}
	cfg := &tls.Config{Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12}
	if s.kedaClientCA != "" {
		pool, err := auth.LoadCAs(s.kedaClientCA)
		if err != nil {
			return nil, fmt.Errorf("--keda-client-ca: %w", err)
		}
		cfg.ClientCAs, cfg.ClientAuth = pool, tls.RequireAndVerifyClientCert
	}
	return cfg, nil
}
