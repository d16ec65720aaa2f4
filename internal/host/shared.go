package host

import (
	"context"
	"net/http"

	"github.com/pace-platform/pace/bus"
	"github.com/pace-platform/pace/flowcontrol/apf"
	"github.com/pace-platform/pace/flowcontrol/apfhttp"
	"github.com/pace-platform/pace/internal/auth"
	"github.com/pace-platform/pace/internal/runner"
)

// Shared is what the stages of one process share beyond the bus. The
// command fills it before the stages wire; Providers add to it.
type Shared struct {
	// Identity names this replica among its stage's; "" in pace up, which
	// runs one of each stage.
	Identity string
	// URL is the base URL of the process's HTTP server; UIURL is the web
	// UI's, for links in jobs' views ("" : none).
	URL, UIURL string
	// FlowControl is the process's APF gate: the job API and the bus gate
	// share its seats. Nil unless a stage uses it.
	FlowControl *apf.Gate
	// Authenticator says who callers are; nil when every caller is
	// anonymous.
	Authenticator auth.Authenticator
	// API serves the routes that go behind authentication, bodies read
	// whole and, once AdmitAPI is called, APF; UI serves routes outside APF.
	API, UI *http.ServeMux
	// Workers is what the targets are told about the workers they start.
	Workers Workers
	// AnswerFlowControl answers the visualizer's requests for fc's state
	// as stage; nil where the visualizer reads fc in process (pace up).
	AnswerFlowControl func(stage string, fc *apf.Gate) runner.Loop
	// TraceURL is the trace viewer jobs' pages link to ("" : none).
	TraceURL string
	// RedisAddr is where the Redis front serves the jobs' queues, for the
	// jobs' views ("" : no front); LocalMaxReplicas is the most workers the
	// local target runs for one job (0: no local target). The gate
	// provides both.
	RedisAddr        string
	LocalMaxReplicas int

	resolve apfhttp.Resolver
	maxBody int64
}

// AdmitAPI puts the routes of API behind APF, classified by resolve, with
// bodies of at most maxBody bytes.
func (s *Shared) AdmitAPI(resolve apfhttp.Resolver, maxBody int64) {
	s.resolve, s.maxBody = resolve, maxBody
}

// admission returns what AdmitAPI set: nil when the API is not behind APF.
func (s *Shared) admission() (resolve apfhttp.Resolver, maxBody int64) {
	return s.resolve, s.maxBody
}

// Workers is what a process tells its targets about the workers they
// start, and the Redis front about the jobs it serves.
type Workers struct {
	// NATSURL is where workers on this machine reach the bus; "" when the
	// server has no TCP listener.
	NATSURL string
	// Env is every local worker's extra environment (log level, prefix,
	// connection settings).
	Env []string
	// JobToken mints a job's worker token, when workers get job tokens
	// (nil otherwise); JobClient then connects as a job's worker with one.
	JobToken  func(job string) string
	JobClient func(ctx context.Context, token string) (*bus.Client, func(), error)
	// Hide are paths sandboxed local workers must not reach: Pace's data
	// and the process's secret files.
	Hide []string
}
