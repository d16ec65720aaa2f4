package bus

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
)

// ServerConfig configures an embedded NATS server with JetStream.
type ServerConfig struct {
	// DataDir holds the JetStream file store. Required.
	DataDir string `json:"data_dir"`
	// Listen is a host:port for outside clients and workers; empty means
	// in-process connections only. Port 0 picks a free port.
	Listen string `json:"listen,omitempty"`
	// MaxMemory and MaxStore cap JetStream's memory and disk use in bytes.
	// Zero means 256 MiB and 10 GiB.
	MaxMemory int64 `json:"max_memory,omitempty"`
	MaxStore  int64 `json:"max_store,omitempty"`
	// SyncAlways flushes every write to disk before acknowledging it.
	SyncAlways bool `json:"sync_always,omitempty"`
	// ReadyTimeout bounds start-up. Zero means 10s.
	ReadyTimeout time.Duration `json:"ready_timeout,omitempty"`
	// Auth, when set, makes every connection authenticate.
	Auth *ServerAuth `json:"-"`
}

// ServerAuth is how an embedded server authenticates its connections:
// Users log in with a password and get their configured permissions (Pace's
// stages); every other connection is handed to the auth callout service
// (CalloutUsers run it), which answers with a user JWT, signed by the
// account key Issuer, carrying that connection's permissions, or refuses.
// All of them share the global account.
type ServerAuth struct {
	Users        []*server.User
	Issuer       string
	CalloutUsers []string
}

// Server is a running embedded NATS server.
type Server struct {
	ns *server.Server
}

// StartServer starts an embedded NATS server and waits until it accepts
// connections. Call Shutdown when done.
func StartServer(cfg ServerConfig, log *slog.Logger) (*Server, error) {
	if cfg.DataDir == "" {
		return nil, errors.New("start nats: data dir is required")
	}
	if cfg.MaxMemory == 0 {
		cfg.MaxMemory = 256 << 20
	}
	if cfg.MaxStore == 0 {
		cfg.MaxStore = 10 << 30
	}
	if cfg.ReadyTimeout == 0 {
		cfg.ReadyTimeout = 10 * time.Second
	}
	opts := &server.Options{
		ServerName:         "pace",
		JetStream:          true,
		StoreDir:           cfg.DataDir,
		JetStreamMaxMemory: cfg.MaxMemory,
		JetStreamMaxStore:  cfg.MaxStore,
		SyncAlways:         cfg.SyncAlways,
		NoSigs:             true,
		NoLog:              true,
		DontListen:         cfg.Listen == "",
		// One work consumer per job: the server's default of 1,000
		// consumers per stream would cap the number of jobs.
		JetStreamLimits: server.JSLimitOpts{DefaultMaxConsumers: -1},
	}
	if a := cfg.Auth; a != nil {
		opts.Users = a.Users
		opts.AuthTimeout = 5
		opts.AuthCallout = &server.AuthCallout{Issuer: a.Issuer, Account: server.DEFAULT_GLOBAL_ACCOUNT, AuthUsers: a.CalloutUsers}
	}
	if cfg.Listen != "" {
		host, port, err := net.SplitHostPort(cfg.Listen)
		if err != nil {
			return nil, fmt.Errorf("start nats: listen address %q: %w", cfg.Listen, err)
		}
		opts.Host = host
		if opts.Port, err = strconv.Atoi(port); err != nil {
			return nil, fmt.Errorf("start nats: listen port %q: %w", port, err)
		}
		if opts.Port == 0 {
			opts.Port = server.RANDOM_PORT
		}
	}
	ns, err := server.NewServer(opts)
	if err != nil {
		return nil, fmt.Errorf("start nats: %w", err)
	}
	go ns.Start()
	if !ns.ReadyForConnections(cfg.ReadyTimeout) {
		ns.Shutdown()
		ns.WaitForShutdown()
		return nil, fmt.Errorf("start nats: not ready after %s (is %s in use?)", cfg.ReadyTimeout, cfg.Listen)
	}
	if log != nil {
		log.Info("nats started", "data_dir", cfg.DataDir, "listen", cfg.Listen, "sync_always", cfg.SyncAlways, "auth", cfg.Auth != nil)
	}
	return &Server{ns: ns}, nil
}

// ClientURL is the URL outside clients connect to; empty when the server
// accepts in-process connections only.
func (s *Server) ClientURL() string {
	if s.ns.Addr() == nil {
		return ""
	}
	return s.ns.ClientURL()
}

// InProcess returns a connection option that connects to s without TCP.
func (s *Server) InProcess() nats.Option { return nats.InProcessServer(s.ns) }

// Shutdown stops the server and waits for it, flushing the store.
func (s *Server) Shutdown() {
	s.ns.Shutdown()
	s.ns.WaitForShutdown()
}
