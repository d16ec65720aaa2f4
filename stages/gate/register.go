package gate

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/pflag"

	"github.com/pace-platform/pace/bus"
	"github.com/pace-platform/pace/bus/rediswq"
	"github.com/pace-platform/pace/internal/host"
	"github.com/pace-platform/pace/internal/runner"
	"github.com/pace-platform/pace/schemas"
	"github.com/pace-platform/pace/stages/gate/targets"
)

func init() {
	host.Register(host.Def{Name: "gate", Short: "Admit infrastructure requests through APF and execute them",
		Long: `The gate consumes infrastructure requests (pace.k8s.requests), admits them
through API Priority and Fairness and executes them on the job's target:
local worker processes (--actuator local; they connect to --nats) and, with
--kubernetes, Kubernetes workloads. APF's seats are one pool and a job's
requests must apply in order, so it runs on the leader; local workers are
children of the leader and stop with its term. The leader answers the
visualizer's requests for its APF state (pace.flowcontrol.dump). Beside the
workers it serves the jobs' queues over the Redis protocol (--redis-listen)
for Asperathos workers.`,
		Uses: host.UsesFlowControl | host.UsesJobTokens,
		New:  func() host.Stage { return &command{targets: map[string]targets.Command{}} }})
}

// command is the gate as pace up and pace stage run it: the flags of every
// registered target and of the Redis front.
type command struct {
	targets map[string]targets.Command // by name
	// redisListen is the Redis front's address; podRedisAddr is where
	// worker pods reach it.
	redisListen, podRedisAddr string
	redisLn                   net.Listener // opened by Provide; nil: no front
}

func (c *command) Flags(fs *pflag.FlagSet) {
	fs.StringVar(&c.redisListen, "redis-listen", "127.0.0.1:0", `listen address of the Redis front, where Asperathos workers read their job's queue (port 0: any free port; "" = none; docs/asperathos.md)`)
	fs.StringVar(&c.podRedisAddr, "pod-redis-addr", "", `host:port of the Redis front that worker pods reach, e.g. pace-redis.pace.svc:6379 ("" = pods get no REDIS_HOST)`)
	for _, d := range targets.Defs() {
		t := d.New()
		t.Flags(fs)
		c.targets[d.Name] = t
	}
}

// Validate checks the flags of the targets the flags leave disabled, so
// that a bad value is refused even where the gate is left out; the enabled
// ones are checked by Provide, against where workers reach the bus.
func (c *command) Validate() error {
	for _, d := range targets.Defs() {
		if t := c.targets[d.Name]; !t.Enabled() {
			if err := t.Validate(targets.Workers{RedisAddr: c.podRedisAddr}); err != nil {
				return err
			}
		}
	}
	return nil
}

// Idle refuses a gate without a target to run workers on.
func (c *command) Idle() error {
	if len(c.enabled()) > 0 {
		return nil
	}
	var names []string
	for _, d := range targets.Defs() {
		names = append(names, d.Name)
	}
	return fmt.Errorf("the gate needs a runtime: enable a target (%s), e.g. --actuator local or --kubernetes", strings.Join(names, ", "))
}

// enabled returns the targets the flags enable, by name.
func (c *command) enabled() map[string]targets.Command {
	on := map[string]targets.Command{}
	for name, t := range c.targets {
		if t.Enabled() {
			on[name] = t
		}
	}
	return on
}

// Provide checks the enabled targets' flags against where workers reach
// the bus, opens the Redis front's listener and tells the other stages
// where it is and how many local workers a job may have.
func (c *command) Provide(s *host.Shared) error {
	for _, d := range targets.Defs() {
		if t := c.targets[d.Name]; t.Enabled() {
			if err := t.Validate(targets.Workers{Workers: host.Workers{NATSURL: s.Workers.NATSURL}, RedisAddr: c.podRedisAddr}); err != nil {
				return err
			}
		}
	}
	if local, ok := c.enabled()[schemas.LocalActuator].(interface{ MaxReplicas() int }); ok {
		s.LocalMaxReplicas = local.MaxReplicas()
	}
	for _, t := range c.targets {
		s.Workers.Hide = append(s.Workers.Hide, t.Secrets()...)
	}
	if c.redisListen != "" && c.redisLn == nil {
		ln, err := net.Listen("tcp", c.redisListen)
		if err != nil {
			return fmt.Errorf("--redis-listen %s: %w", c.redisListen, err)
		}
		c.redisLn = ln
	}
	switch {
	case c.podRedisAddr != "":
		s.RedisAddr = c.podRedisAddr
	case c.redisLn != nil:
		s.RedisAddr = c.redisLn.Addr().String()
	}
	return nil
}

// Wire opens the enabled targets anew for each term of the leader (the
// local workers are its children) and serves the Redis front on every
// replica.
func (c *command) Wire(ctx context.Context, p host.Process) error {
	sh := p.Shared()
	if sh.FlowControl == nil {
		return errors.New("gate: the process has no APF gate")
	}
	client, err := p.Client(ctx, "gate")
	if err != nil {
		return err
	}
	w := targets.Workers{Workers: sh.Workers, RedisAddr: c.podRedisAddr}
	if mint := w.JobToken; mint != nil {
		w.JobEnv = func(job string) []string { return []string{"PACE_TOKEN=" + mint(job)} }
	}
	if c.redisLn != nil {
		w.RedisEnv = c.serveRedis(p, client, sh.Workers)
	}
	openers := map[string]targets.Opener{}
	for name, t := range c.enabled() {
		if openers[name], err = t.Opener(w, p.Logger()); err != nil {
			return err
		}
	}
	return p.Lead("gate", func() (runner.Loop, prometheus.Collector, error) {
		exec, runTargets, err := targets.Open(client, openers, targets.WithLogger(p.Logger()))
		if err != nil {
			return nil, nil, err
		}
		gs, err := New(Deps{Bus: client, Gate: sh.FlowControl, Actuator: exec}, Config{}, WithLogger(p.Logger()))
		if err != nil {
			return nil, nil, err
		}
		loops := []runner.Loop{runTargets, gs.Run}
		if sh.AnswerFlowControl != nil {
			loops = append(loops, sh.AnswerFlowControl("gate", sh.FlowControl))
		}
		return runner.Group(loops...), gs.Metrics(), nil
	})
}

// serveRedis serves the jobs' queues over the Redis protocol, for
// Asperathos workers (docs/asperathos.md), and returns the environment
// that tells a job's local workers where: REDIS_HOST, REDIS_PORT and
// REDIS_QUEUE, their job's id on an open bus and its token when workers get
// job tokens, with which the front then logs in for the job. c serves every
// queue on an open bus, and writes the front's lines to the jobs' logs
// (the errors workers push, commands it does not serve).
func (c *command) serveRedis(p host.Process, client *bus.Client, w host.Workers) func(job string) []string {
	var mint func(string) string
	open := rediswq.Opener(w.JobClient)
	if w.JobToken == nil || w.JobClient == nil {
		open = rediswq.SharedClient(client)
	} else {
		mint = w.JobToken
	}
	front := rediswq.New(rediswq.Config{Open: open, Secured: mint != nil, Journal: client.Outputs().PublishLog, Log: p.Logger()})
	p.Go(func(ctx context.Context) error { return front.Serve(ctx, c.redisLn) })
	host, port, _ := net.SplitHostPort(c.redisLn.Addr().String())
	return func(job string) []string {
		queue := job
		if mint != nil {
			queue = mint(job)
		}
		return []string{"REDIS_HOST=" + host, "REDIS_PORT=" + port, "REDIS_QUEUE=" + queue}
	}
}
