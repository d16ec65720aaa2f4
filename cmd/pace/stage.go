package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/pace-platform/pace/bus"
	"github.com/pace-platform/pace/flowcontrol/apf"
	"github.com/pace-platform/pace/internal/flagvalue"
	"github.com/pace-platform/pace/internal/host"
	"github.com/pace-platform/pace/internal/runner"
	"github.com/pace-platform/pace/schemas"
	"github.com/pace-platform/pace/stages/visualizer"
)

func newStageCmd(a *app) *cobra.Command {
	var names []string
	for _, d := range host.Defs() {
		names = append(names, d.Name)
	}
	cmd := &cobra.Command{
		Use:   "stage NAME",
		Short: "Run one stage of Pace against a NATS server",
		Long: `Stage runs one stage of Pace's pipeline against an external NATS server
with JetStream, so that each stage can be deployed, scaled and restarted on
its own (docs/stages.md). 'pace up' runs every stage in one process with an
embedded server instead.

Stages: ` + strings.Join(names, ", ") + `.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				return usageError("%s: unknown stage %q: want one of %s", cmd.CommandPath(), args[0], strings.Join(names, ", "))
			}
			return usageError("%s needs a stage: one of %s", cmd.CommandPath(), strings.Join(names, ", "))
		},
	}
	for _, d := range host.Defs() {
		cmd.AddCommand(newStageRunCmd(a, d))
	}
	return cmd
}

// stageOptions are the flags of one pace stage command.
type stageOptions struct {
	nats     natsFlags
	f        stageFlags
	identity string
	busStore flagvalue.Bytes // the store the streams share (--bus-store)
}

const stageCommon = `

Every stage connects to --nats, provisions the streams and buckets Pace
uses (idempotent: give every stage the same --metrics-*, --lease-ttl), and
serves /livez, /readyz (NATS and JetStream reachable; a standby is ready
too) and /metrics (pace_stage_leader{stage} is 1 on the leader) on --http,
with HTTPS by --tls-cert and --tls-key. Stages that run on a leader elect
one among their replicas with a lease of --lease-ttl; the others stand by.
SIGTERM stops the stage cleanly and hands leadership over at once.`

func newStageRunCmd(a *app, d host.Def) *cobra.Command {
	o := &stageOptions{}
	cmd := &cobra.Command{
		Use:   d.Name,
		Short: d.Short,
		Long:  d.Long + stageCommon,
		Example: fmt.Sprintf(`  pace stage %[1]s --nats nats://nats:4222 --http :8080
  PACE_NATS_URL=tls://nats:4222 PACE_NATS_CREDS=/etc/pace/nats.creds pace stage %[1]s --identity $POD_NAME`, d.Name),
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error { return o.run(cmd.Context(), a, d) },
	}
	f := cmd.Flags()
	o.nats.add(f)
	o.f.http.add(f, ":8080", "HTTP listen address for health, metrics and (by stage) the API and UI")
	o.f.prov.add(f, "a fifth of --bus-store")
	f.Var(&o.busStore, "bus-store", "JetStream store the streams share, e.g. 10GiB (the servers' max_file_store): each stream's size bound is a share of it, as docs/bus.md lists (default 600MiB)")
	o.f.trace.add(f)
	f.StringVar(&o.identity, "identity", "", "name of this replica in leader election and logs, unique per process (default: host name and process id)")
	o.f.addUses(f, d.Uses)
	o.f.stage(d).Flags(f)
	return cmd
}

func (o *stageOptions) run(ctx context.Context, a *app, d host.Def) error {
	if err := o.f.http.validate(); err != nil {
		return err
	}
	if err := o.f.fc.clientCerts(&o.f.http); err != nil {
		return err
	}
	if err := o.f.prov.validate(); err != nil {
		return err
	}
	if err := o.f.tokens.validateCallout(o.f.fc.tokenFile); err != nil {
		return err
	}
	stage := o.f.stage(d)
	if err := stage.Validate(); err != nil {
		return usageError("%v", err)
	}
	if idle, ok := stage.(host.Idler); ok {
		if err := idle.Idle(); err != nil {
			return usageError("%v", err)
		}
	}
	if err := o.f.trace.validate(); err != nil {
		return err
	}
	sh := host.Shared{Workers: host.Workers{NATSURL: o.nats.url, Env: o.workerEnv(a)}}
	if o.f.tokens.jobTokenKey != "" {
		sh.Workers.JobClient = o.nats.jobClient(a)
	}
	if err := o.f.provide([]host.Def{d}, &sh); err != nil {
		return err
	}
	identity := o.identity
	if identity == "" {
		host, _ := os.Hostname()
		identity = fmt.Sprintf("%s-%d", host, os.Getpid())
	}
	a.log = a.log.With("replica", identity) // every line of this process, the bus client's too
	log := a.log
	stopTraces, err := o.f.trace.start(ctx, a, "pace-"+d.Name)
	if err != nil {
		return err
	}
	defer stopTraces()
	c, err := o.nats.connect(ctx, a, "pace-"+d.Name)
	if err != nil {
		return err
	}
	defer closeClient(c)
	// A stage started while its cluster recovers waits for it rather than
	// exiting, for as long as it would wait for an unreachable server.
	err = bus.RetryTemporary(ctx, log, o.nats.connectTimeout, "provision", func(ctx context.Context) error {
		return c.Provision(ctx, o.f.prov.limits(int64(o.busStore), o.nats.authenticated()))
	})
	if err != nil {
		return signalled(ctx, err)
	}
	ln, err := net.Listen("tcp", o.f.http.addr)
	if err != nil {
		return fmt.Errorf("--http %s: %w", o.f.http.addr, err)
	}
	defer ln.Close() //nolint:errcheck // closed by the server already when it ran
	sh.Identity = identity
	sh.AnswerFlowControl = func(stage string, fc *apf.Gate) runner.Loop {
		return func(ctx context.Context) error {
			return visualizer.ServeFlowControl(ctx, c, stage, identity, fc, log.With("stage", stage))
		}
	}
	w := newWiring(&o.f, c, log, ln, sh, nil)
	w.startBudget = o.nats.connectTimeout
	if err := w.prepare(ctx, []host.Def{d}); err != nil {
		return signalled(ctx, err)
	}
	if err := stage.Wire(ctx, w); err != nil {
		return signalled(ctx, err)
	}
	elect, err := w.Elect(identity)
	if err != nil {
		return usageError("--identity %q: %v", identity, err)
	}
	log.Info("stage started", "stage", d.Name, "http", w.Shared().URL, "nats", bus.RedactURLs(o.nats.url))
	err = w.Run(ctx, ln, elect)
	log.Info("stage stopped", "stage", d.Name)
	return err
}

// workerEnv passes the connection settings on to local workers, secrets
// in their environment (never on a command line). With job tokens
// (--job-token-key) a worker gets its job's token instead of the stage's
// credentials, and only the CA of the stage's TLS settings.
func (o *stageOptions) workerEnv(a *app) []string {
	env := append(workerEnv(a, o.nats.prefix), o.f.trace.workerEnv()...)
	creds := [][2]string{{"PACE_NATS_CREDS", o.nats.creds}, {"PACE_NATS_NKEY", o.nats.nkey},
		{"PACE_NATS_USER", o.nats.user}, {"PACE_NATS_PASSWORD", o.nats.password}, {"PACE_NATS_CA", o.nats.tlsCA},
		{"PACE_NATS_CERT", o.nats.tlsCert}, {"PACE_NATS_KEY", o.nats.tlsKey}}
	if o.f.tokens.jobTokenKey != "" {
		creds = [][2]string{{"PACE_NATS_CA", o.nats.tlsCA}}
	}
	for _, kv := range creds {
		if kv[1] != "" {
			env = append(env, kv[0]+"="+kv[1])
		}
	}
	return env
}

// workerEnv is the environment of local workers: the log level and prefix.
func workerEnv(a *app, prefix string) []string {
	env := []string{"PACE_LOG_LEVEL=" + a.logLevel}
	if prefix != string(schemas.DefaultPrefix) {
		env = append(env, "PACE_PREFIX="+prefix)
	}
	return env
}
