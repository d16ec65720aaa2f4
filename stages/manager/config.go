package manager

import (
	"time"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Config holds the manager's settings.
type Config struct {
	// MaxBodyBytes bounds a request body; 0 means 8 MiB.
	MaxBodyBytes int64 `json:"max_body_bytes,omitempty"`
	// MaxWorkloadBytes bounds a downloaded or read workload; 0 means 64 MiB.
	MaxWorkloadBytes int64 `json:"max_workload_bytes,omitempty"`
	// WorkloadTimeout bounds a workload download; 0 means 30s.
	WorkloadTimeout time.Duration `json:"workload_timeout,omitempty"`
	// WorkloadDir is where workload.file paths are read from; empty
	// refuses file workloads (clients send items inline).
	WorkloadDir string `json:"workload_dir,omitempty"`
	// RequestTimeout bounds every request but a followed log; 0 means 60s.
	RequestTimeout time.Duration `json:"request_timeout,omitempty"`
	// Interval is how often running jobs are checked for completion and
	// finished ones for cleanup; 0 means 1s.
	Interval time.Duration `json:"interval,omitempty"`
	// CheckTimeout bounds one job's check (see Reconcile) and one sweep
	// for stray items; 0 means 10s.
	CheckTimeout time.Duration `json:"check_timeout,omitempty"`
	// CheckConcurrency is how many jobs are checked at once; 0 means 8.
	CheckConcurrency int `json:"check_concurrency,omitempty"`
	// StraySweep is how often the work stream is checked for items
	// published to jobs that do not accept them (see SweepStrays); a job's
	// end triggers a check too. 0 means 2s.
	StraySweep time.Duration `json:"stray_sweep,omitempty"`
	// StrayGrace is how long items of a job that does not exist wait
	// before they are refused as such: a client may publish a job's first
	// items just before it creates the job. 0 means 5s.
	StrayGrace time.Duration `json:"stray_grace,omitempty"`
	// Open runs the API without authentication: every caller may see and
	// change every job. Without it anonymous callers are refused.
	Open bool `json:"open,omitempty"`
	// AllowAnonymous lets callers without credentials submit jobs and
	// change the jobs they submitted (owned by system:anonymous). By
	// default they may only read: probes, plugins, the OpenAPI document.
	AllowAnonymous bool `json:"allow_anonymous,omitempty"`
	// VisualizerURL is the base URL of the web UI; empty when there is none.
	VisualizerURL string `json:"visualizer_url,omitempty"`
	// AllowPrivileged lets jobs run privileged workers with host devices
	// (worker.security.privileged, the SCONE/SGX case); refused otherwise.
	AllowPrivileged bool `json:"allow_privileged,omitempty"`
	// AsperathosCORS is the Access-Control-Allow-Origin of the API's
	// Asperathos routes (AsperathosPrefix): "" means any origin, as
	// Asperathos answered; "none" sends no CORS headers.
	AsperathosCORS string `json:"asperathos_cors,omitempty"`
	// RedisAddr is the host:port of the Redis front, where Asperathos
	// workers read their job's queue; job views show it as Asperathos'
	// redis_ip and redis_port. Empty when there is none.
	RedisAddr string `json:"redis_addr,omitempty"`
	// LocalMaxReplicas is the most workers the local actuator runs for one
	// job: a job it would run (actuator local or unnamed, with a worker
	// spec) asking for more is refused at submission. 0 means no local
	// actuator runs beside this manager, or its cap is unknown.
	LocalMaxReplicas int `json:"local_max_replicas,omitempty"`
	// LocalExec says whose jobs may run workers on this host: the local
	// actuator runs a job's worker.exec or worker.command as Pace's own
	// user. LocalExecAll (the default) lets every caller who may submit;
	// LocalExecAdmins only pace:admins and system:masters; LocalExecNone
	// nobody (jobs without a worker spec, or on Kubernetes, are unaffected).
	LocalExec string `json:"local_exec,omitempty"`
	// MaxJobItems bounds the items of one submission (413 beyond); 0
	// means 1,000,000.
	MaxJobItems int `json:"max_job_items,omitempty"`
	// MaxUserQueued bounds the items one user may have queued or running
	// in unfinished jobs: a submission that would pass it is refused (429)
	// until some are done. 0 means 2,000,000.
	MaxUserQueued int `json:"max_user_queued,omitempty"`
	// MaxUserJobs bounds the unfinished jobs one user may have, submitted
	// or declared: another is refused (429) until one ends, so that no
	// tenant can multiply the per-job bounds by jobs without end. 0 means
	// 10,000.
	MaxUserJobs int `json:"max_user_jobs,omitempty"`
}

// Who may run workers on the host (Config.LocalExec).
const (
	LocalExecAll    = "all"
	LocalExecAdmins = "admins"
	LocalExecNone   = "none"
)

// Defaults returns c with zero fields set to their defaults.
func (c Config) Defaults() Config {
	if c.MaxBodyBytes == 0 {
		c.MaxBodyBytes = 8 << 20
	}
	if c.MaxWorkloadBytes == 0 {
		c.MaxWorkloadBytes = 64 << 20
	}
	if c.WorkloadTimeout == 0 {
		c.WorkloadTimeout = 30 * time.Second
	}
	if c.RequestTimeout == 0 {
		c.RequestTimeout = 60 * time.Second
	}
	if c.Interval == 0 {
		c.Interval = time.Second
	}
	if c.CheckTimeout == 0 {
		c.CheckTimeout = 10 * time.Second
	}
	if c.CheckConcurrency == 0 {
		c.CheckConcurrency = 8
	}
	if c.LocalExec == "" {
		c.LocalExec = LocalExecAll
	}
	if c.StraySweep == 0 {
		c.StraySweep = 2 * time.Second
	}
	if c.StrayGrace == 0 {
		c.StrayGrace = 5 * time.Second
	}
	if c.MaxJobItems == 0 {
		c.MaxJobItems = 1_000_000
	}
	if c.MaxUserQueued == 0 {
		c.MaxUserQueued = 2_000_000
	}
	if c.MaxUserJobs == 0 {
		c.MaxUserJobs = 10_000
	}
	return c
}

// Validate reports every invalid setting of a defaulted Config.
func (c Config) Validate() (errs field.ErrorList) {
	for name, v := range map[string]int64{"max_body_bytes": c.MaxBodyBytes, "max_workload_bytes": c.MaxWorkloadBytes,
		"max_job_items": int64(c.MaxJobItems), "max_user_queued": int64(c.MaxUserQueued),
		"max_user_jobs":     int64(c.MaxUserJobs),
		"check_concurrency": int64(c.CheckConcurrency)} {
		if v <= 0 {
			errs = append(errs, field.Invalid(field.NewPath(name), v, "must be positive"))
		}
	}
	for name, v := range map[string]time.Duration{"workload_timeout": c.WorkloadTimeout,
		"request_timeout": c.RequestTimeout, "interval": c.Interval, "stray_sweep": c.StraySweep,
		"stray_grace": c.StrayGrace, "check_timeout": c.CheckTimeout} {
		if v <= 0 {
			errs = append(errs, field.Invalid(field.NewPath(name), v.String(), "must be positive"))
		}
	}
	if c.LocalExec != LocalExecAll && c.LocalExec != LocalExecAdmins && c.LocalExec != LocalExecNone {
		errs = append(errs, field.NotSupported(field.NewPath("local_exec"), c.LocalExec, []string{LocalExecAll, LocalExecAdmins, LocalExecNone}))
	}
	return errs
}
