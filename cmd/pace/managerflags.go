package main

import (
	"log/slog"
	"net"
	"time"

	"github.com/spf13/pflag"

	"github.com/pace-platform/pace/bus"
	"github.com/pace-platform/pace/internal/auth"
	"github.com/pace-platform/pace/stages/manager"
)

// managerFlags are pace up's flags of the job manager API.
type managerFlags struct {
	workloadDir      string
	maxBody          byteSize
	maxWorkload      byteSize
	workloadTimeout  time.Duration
	resourceInterval time.Duration
	allowAnonymous   bool
	localExec        string
	maxJobItems      int
	maxUserQueued    int
	maxUserJobs      int
	asperathosCORS   string
	allowPrivileged  bool
}

func (f *managerFlags) add(fs *pflag.FlagSet) {
	f.maxBody, f.maxWorkload = 8<<20, 64<<20
	fs.StringVar(&f.workloadDir, "workload-dir", "", "directory that job specs' workload.file paths are read from (none: refused)")
	fs.Var(&f.maxBody, "max-body", "largest accepted API request body")
	fs.Var(&f.maxWorkload, "max-workload", "largest workload downloaded or read for a job")
	fs.DurationVar(&f.workloadTimeout, "workload-timeout", 30*time.Second, "time limit of a workload download")
	fs.DurationVar(&f.resourceInterval, "job-check-interval", time.Second, "how often running jobs are checked for completion")
	fs.IntVar(&f.maxJobItems, "max-job-items", 1_000_000, "most items one submission may have (413 beyond)")
	fs.IntVar(&f.maxUserQueued, "max-user-queued", 2_000_000, "most items one user may have queued or running in unfinished jobs (429 beyond, until some are done)")
	fs.IntVar(&f.maxUserJobs, "max-user-jobs", 10_000, "most unfinished jobs one user may have, submitted or declared by a push (429 beyond, until one ends)")
	fs.BoolVar(&f.allowPrivileged, "allow-privileged-workers", false, "let jobs run privileged worker pods with host devices (worker.security.privileged, e.g. /dev/isgx for SGX); refused otherwise")
	fs.StringVar(&f.asperathosCORS, "asperathos-cors", "*", `Access-Control-Allow-Origin of the Asperathos routes (/asperathos/…; docs/api.md), "*" as Asperathos answered, "none" for no CORS headers`)
	f.addAccess(fs)
}

// addAccess registers the flags of who may see and change which jobs.
func (f *managerFlags) addAccess(fs *pflag.FlagSet) {
	fs.BoolVar(&f.allowAnonymous, "allow-anonymous", false, "with --token-file, let callers without a token submit and change their own (system:anonymous) jobs")
	fs.StringVar(&f.localExec, "local-exec", manager.LocalExecAll, "whose jobs may run workers on this host (sandboxed unless --local-exec-unsandboxed): all, admins (pace:admins) or none")
}

// validate refuses a bad --local-exec or quota before anything starts.
func (f *managerFlags) validate() error {
	if f.maxJobItems < 1 || f.maxUserQueued < 1 || f.maxUserJobs < 1 {
		return usageError("--max-job-items %d, --max-user-queued %d and --max-user-jobs %d: must be at least 1",
			f.maxJobItems, f.maxUserQueued, f.maxUserJobs)
	}
	switch f.localExec {
	case manager.LocalExecAll, manager.LocalExecAdmins, manager.LocalExecNone:
		return nil
	}
	return usageError("--local-exec %q: want all, admins or none", f.localExec)
}

// build returns the manager and its API, served on httpAddr, with links to
// the UI at uiURL ("" = none); localMax is the local actuator's cap of
// workers per job when one runs beside it (0: none). authn is the --token-file authenticator;
// without one the API is open, which is logged as a warning (an error when
// not on loopback).
func (f *managerFlags) build(c *bus.Client, authn auth.Authenticator, httpAddr, uiURL, redisAddr string, localMax int, log *slog.Logger) (*manager.Stage, *manager.API, error) {
	cfg := manager.Config{MaxBodyBytes: int64(f.maxBody), MaxWorkloadBytes: int64(f.maxWorkload),
		WorkloadTimeout: f.workloadTimeout, WorkloadDir: f.workloadDir, Interval: f.resourceInterval, Open: authn == nil,
		AllowAnonymous: f.allowAnonymous, VisualizerURL: uiURL, RedisAddr: redisAddr, AsperathosCORS: f.asperathosCORS, AllowPrivileged: f.allowPrivileged, LocalMaxReplicas: localMax, LocalExec: f.localExec,
		MaxJobItems: f.maxJobItems, MaxUserQueued: f.maxUserQueued, MaxUserJobs: f.maxUserJobs}
	opts := []manager.Option{manager.WithLogger(log)}
	if authn != nil {
		opts = append(opts, manager.WithAuthenticator(authn))
		if users, ok := authn.(manager.Users); ok { // Asperathos enable_auth: password = token
			opts = append(opts, manager.WithUsers(users))
		}
	} else {
		host, _, _ := net.SplitHostPort(httpAddr)
		ip := net.ParseIP(host)
		if host == "localhost" || (ip != nil && ip.IsLoopback()) {
			log.Warn("job API is open: no --token-file, every caller may see and change every job", "http", httpAddr)
		} else {
			log.Error("job API is open on a non-loopback address: no --token-file, anyone who reaches it may see and change every job", "http", httpAddr)
		}
	}
	m, err := manager.New(manager.Deps{Bus: c}, cfg, opts...)
	if err != nil {
		return nil, nil, usageError("%v", err)
	}
	return m, manager.NewAPI(m), nil
}
