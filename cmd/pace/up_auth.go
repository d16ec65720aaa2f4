package main

import (
	"context"
	"log/slog"
	"net"
	"path/filepath"

	"github.com/nats-io/nkeys"

	"github.com/pace-platform/pace/bus"
	"github.com/pace-platform/pace/bus/natsauth"
	"github.com/pace-platform/pace/bus/rediswq"
	natsconf "github.com/pace-platform/pace/deploy/nats"
	"github.com/pace-platform/pace/internal/auth"
	"github.com/pace-platform/pace/internal/host"
	"github.com/pace-platform/pace/internal/runner"
	"github.com/pace-platform/pace/schemas"
)

// busAuth is how pace up's embedded server authenticates: Pace's stages as
// the users of deploy/nats/auth.conf, everyone else by token through the
// auth callout (package natsauth).
type busAuth struct {
	server    *bus.ServerAuth
	passwords map[string]string // by user
	issuer    nkeys.KeyPair
	tokens    *auth.TokenFile
}

// secured reports whether the bus must authenticate: with a token file, or
// when NATS or the Redis front listens beyond loopback. Beyond loopback
// without a token file is refused unless --insecure.
func (o *upOptions) secured() (bool, error) {
	if o.f.fc.tokenFile != "" {
		return true, nil
	}
	for _, l := range []struct{ flag, addr string }{{"--nats-listen", o.natsListen}, {"--redis-listen", o.flags.Lookup("redis-listen").Value.String()}} {
		if l.addr == "" || o.insecure {
			continue
		}
		host, _, _ := net.SplitHostPort(l.addr)
		if ip := net.ParseIP(host); host == "localhost" || ip != nil && ip.IsLoopback() {
			continue
		}
		return false, usageError("%s %s is reachable from other machines, and without --token-file anyone reaching it could run commands as this user or take its jobs' items: give --token-file (tenants then authenticate with their tokens), listen on 127.0.0.1, or accept the risk with --insecure", l.flag, l.addr)
	}
	return false, nil
}

// newBusAuth loads the token file and makes the stages' users and the
// callout's issuer key.
func (o *upOptions) newBusAuth() (*busAuth, error) {
	tokens, err := auth.LoadTokenFile(o.f.fc.tokenFile)
	if err != nil {
		return nil, usageError("--token-file: %v", err)
	}
	users, passwords, err := natsconf.Users(schemas.Prefix(o.prefix))
	if err != nil {
		return nil, err
	}
	server, issuer, err := natsauth.ServerAuth(users)
	if err != nil {
		return nil, err
	}
	return &busAuth{server: server, passwords: passwords, issuer: issuer, tokens: tokens}, nil
}

// as returns the option that logs a stage (manager, gate, …, or admin) in.
func (b *busAuth) as(stage string) bus.Option {
	return bus.WithUserPassword("pace-"+stage, b.passwords["pace-"+stage])
}

// tokenClient is the Redis front's Opener: each queue's connection logs in
// with its job's token.
func (b *busAuth) tokenClient(srv *bus.Server, o *upOptions) rediswq.Opener {
	return func(ctx context.Context, token string) (*bus.Client, func(), error) {
		c, err := bus.Connect(ctx, "", bus.WithServer(srv), bus.WithName("pace-up-redis"),
			bus.WithPrefix(schemas.Prefix(o.prefix)), bus.WithTokenAuth(token))
		if err != nil {
			return nil, nil, err
		}
		return c, func() { closeClient(c) }, nil
	}
}

// wire gives local workers their job's token in sh and returns how a
// stage connects as its own user and the authorization service, answering
// on c (pace-admin's connection).
func (b *busAuth) wire(sh *host.Shared, srv *bus.Server, c *bus.Client, data string, o *upOptions, log *slog.Logger) (
	stageClient func(context.Context, string) (*bus.Client, error), callout runner.Loop, err error) {
	jobs, err := natsauth.LoadJobTokens(filepath.Join(data, "job-token.key"))
	if err != nil {
		return nil, nil, err
	}
	sh.Workers.JobToken = jobs.Mint
	sh.Workers.JobClient = b.tokenClient(srv, o)
	stageClient = func(ctx context.Context, stage string) (*bus.Client, error) {
		return bus.Connect(ctx, "", bus.WithServer(srv), bus.WithName("pace-up-"+stage), bus.WithLogger(log),
			bus.WithPrefix(schemas.Prefix(o.prefix)), b.as(stage))
	}
	return stageClient, natsauth.New(c, b.issuer, b.tokens, jobs, log).Run, nil
}
