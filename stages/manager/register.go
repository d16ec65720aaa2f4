package manager

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/pflag"

	"github.com/pace-platform/pace/internal/flagvalue"
	"github.com/pace-platform/pace/internal/host"
	"github.com/pace-platform/pace/internal/runner"
)

func init() {
	host.Register(host.Def{Name: "manager", Short: "Serve the job API and run the job lifecycle",
		Long: `The manager serves the job API (/submissions, /plugins, /openapi.json;
docs/api.md) behind API Priority and Fairness, on every replica. The
lifecycle loop (recovering job records from their events, the NATS API on
pace.submit and pace.control.*, completion checks) runs on the leader. Every
replica also moves items past their max deliveries to the dead-letter stream
and answers the visualizer's requests for its APF state
(pace.flowcontrol.dump).`,
		Uses: host.UsesFlowControl | host.UsesAuthentication | host.UsesCallout,
		New:  func() host.Stage { return &command{} }})
}

// command is the manager as pace up and pace stage run it: the job API's
// limits and quotas, who may run workers on the host, the UI's address.
type command struct {
	workloadDir      string
	maxBody          flagvalue.Bytes
	maxWorkload      flagvalue.Bytes
	workloadTimeout  time.Duration
	resourceInterval time.Duration
	allowAnonymous   bool
	localExec        string
	maxJobItems      int
	maxUserQueued    int
	maxUserJobs      int
	asperathosCORS   string
	allowPrivileged  bool
	uiURL            string
}

func (c *command) Flags(fs *pflag.FlagSet) {
	c.maxBody, c.maxWorkload = 8<<20, 64<<20
	fs.StringVar(&c.workloadDir, "workload-dir", "", "directory that job specs' workload.file paths are read from (none: refused)")
	fs.Var(&c.maxBody, "max-body", "largest accepted API request body")
	fs.Var(&c.maxWorkload, "max-workload", "largest workload downloaded or read for a job")
	fs.DurationVar(&c.workloadTimeout, "workload-timeout", 30*time.Second, "time limit of a workload download")
	fs.DurationVar(&c.resourceInterval, "job-check-interval", time.Second, "how often running jobs are checked for completion")
	fs.IntVar(&c.maxJobItems, "max-job-items", 1_000_000, "most items one submission may have (413 beyond)")
	fs.IntVar(&c.maxUserQueued, "max-user-queued", 2_000_000, "most items one user may have queued or running in unfinished jobs (429 beyond, until some are done)")
	fs.IntVar(&c.maxUserJobs, "max-user-jobs", 10_000, "most unfinished jobs one user may have, submitted or declared by a push (429 beyond, until one ends)")
	fs.BoolVar(&c.allowPrivileged, "allow-privileged-workers", false, "let jobs run privileged worker pods with host devices (worker.security.privileged, e.g. /dev/isgx for SGX); refused otherwise")
	fs.StringVar(&c.asperathosCORS, "asperathos-cors", "*", `Access-Control-Allow-Origin of the Asperathos routes (/asperathos/…; docs/api.md), "*" as Asperathos answered, "none" for no CORS headers`)
	fs.BoolVar(&c.allowAnonymous, "allow-anonymous", false, "with --token-file, let callers without a token submit and change their own (system:anonymous) jobs")
	fs.StringVar(&c.localExec, "local-exec", LocalExecAll, "whose jobs may run workers on this host (sandboxed unless --local-exec-unsandboxed): all, admins (pace:admins) or none")
	fs.StringVar(&c.uiURL, "ui-url", "", `base URL of the web UI for jobs' visualizer_url, e.g. https://pace.example/ui ("" = pace up's own UI; none in pace stage)`)
}

// Validate refuses a bad --local-exec or quota before anything starts.
func (c *command) Validate() error {
	if c.maxJobItems < 1 || c.maxUserQueued < 1 || c.maxUserJobs < 1 {
		return fmt.Errorf("--max-job-items %d, --max-user-queued %d and --max-user-jobs %d: must be at least 1",
			c.maxJobItems, c.maxUserQueued, c.maxUserJobs)
	}
	switch c.localExec {
	case LocalExecAll, LocalExecAdmins, LocalExecNone:
		return nil
	}
	return fmt.Errorf("--local-exec %q: want all, admins or none", c.localExec)
}

// Wire serves the job API behind APF and runs the dead-letter mover and the
// APF object counts on every replica, the lifecycle on the leader.
func (c *command) Wire(ctx context.Context, p host.Process) error {
	sh, log := p.Shared(), p.Logger()
	if sh.FlowControl == nil {
		return fmt.Errorf("manager: the process has no APF gate")
	}
	client, err := p.Client(ctx, "manager")
	if err != nil {
		return err
	}
	ui := c.uiURL
	if ui == "" {
		ui = sh.UIURL
	}
	cfg := Config{MaxBodyBytes: int64(c.maxBody), MaxWorkloadBytes: int64(c.maxWorkload),
		WorkloadTimeout: c.workloadTimeout, WorkloadDir: c.workloadDir, Interval: c.resourceInterval, Open: sh.Authenticator == nil,
		AllowAnonymous: c.allowAnonymous, VisualizerURL: ui, RedisAddr: sh.RedisAddr, AsperathosCORS: c.asperathosCORS,
		AllowPrivileged: c.allowPrivileged, LocalMaxReplicas: sh.LocalMaxReplicas, LocalExec: c.localExec,
		MaxJobItems: c.maxJobItems, MaxUserQueued: c.maxUserQueued, MaxUserJobs: c.maxUserJobs}
	opts := []Option{WithLogger(log)}
	if a := sh.Authenticator; a != nil {
		opts = append(opts, WithAuthenticator(a))
		if users, ok := a.(Users); ok { // Asperathos enable_auth: password = token
			opts = append(opts, WithUsers(users))
		}
	} else {
		warnOpen(sh.URL, log)
	}
	m, err := New(Deps{Bus: client}, cfg, opts...)
	if err != nil {
		return err
	}
	api := NewAPI(m)
	api.Register(sh.API)
	sh.AdmitAPI(api.Resolver(), int64(c.maxBody))
	p.Go(client.Letters().Move)
	p.Go(CountJobs(client, sh.FlowControl.ObjectCounts(), log))
	if sh.AnswerFlowControl != nil {
		p.Go(sh.AnswerFlowControl("manager", sh.FlowControl))
	}
	return p.Lead("manager", func() (runner.Loop, prometheus.Collector, error) {
		return m.Run, m.Metrics(), nil
	})
}

// warnOpen logs that the job API at base is open to every caller: a
// warning on loopback, an error beyond it.
func warnOpen(base string, log *slog.Logger) {
	u, _ := url.Parse(base)
	host := u.Hostname()
	if ip := net.ParseIP(host); host == "localhost" || ip != nil && ip.IsLoopback() {
		log.Warn("job API is open: no --token-file, every caller may see and change every job", "http", base)
		return
	}
	log.Error("job API is open on a non-loopback address: no --token-file, anyone who reaches it may see and change every job", "http", base)
}
