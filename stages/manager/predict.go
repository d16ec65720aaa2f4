package manager

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/pace-platform/pace/schemas"
)

// history is what the finished jobs of one worker program (a command, an
// exec command or an image: workerKey) took, for the prediction of the
// next: the mean item time and the start-up, from their first item's
// result, over the items and jobs it learned from.
type history struct {
	ItemSeconds    float64   `json:"item_seconds"`
	StartupSeconds float64   `json:"startup_seconds"`
	Items          int       `json:"items"`
	Jobs           int       `json:"jobs"`
	UpdatedAt      time.Time `json:"updated_at"`
}

// learnLimit is the most items of a job whose results are read to learn
// its item times: a bigger job's would cost the manager a long read.
const learnLimit = 50_000

// historyWindow caps the items a history weighs, so that it follows a
// program whose items got slower or faster.
const historyWindow = 10_000

// Start-up of a runtime before the first history: a process, a pod.
var defaultStartup = map[string]time.Duration{schemas.LocalActuator: time.Second, schemas.KubernetesActuator: 15 * time.Second}

// workerKey names a job's worker program in the history bucket; "" when
// Pace runs no workers for it.
func workerKey(spec *schemas.JobSpec) string {
	w := spec.Worker
	var id string
	switch {
	case w.Exec != "":
		id = "exec\x00" + w.Exec
	case w.Image != "":
		id = "image\x00" + w.Image + "\x00" + strings.Join(w.Command, "\x00")
	case len(w.Command) > 0:
		id = "command\x00" + strings.Join(w.Command, "\x00")
	default:
		return ""
	}
	sum := sha256.Sum256([]byte(id))
	return hex.EncodeToString(sum[:16])
}

func (m *Stage) historyKV(ctx context.Context) (jetstream.KeyValue, error) {
	return m.bucket(ctx, schemas.BucketItemTimes, "item times of finished jobs, per worker program")
}

// predict forecasts a batch job's completion at replicas.max from its
// workload.item_time, else from the history of its worker program; a job
// without either, or without a deadline, gets basis none.
func (m *Stage) predict(ctx context.Context, spec *schemas.JobSpec, items int) *schemas.Prediction {
	p := &schemas.Prediction{Basis: schemas.BasisNone}
	deadline := spec.Deadline.After.D()
	if !spec.Deadline.At.IsZero() {
		deadline = spec.Deadline.At.Sub(m.clock.Now())
	}
	if spec.Mode != schemas.Batch || deadline <= 0 || items == 0 {
		return p
	}
	startup := defaultStartup[spec.Actuator.Name]
	if startup == 0 {
		startup = defaultStartup[schemas.LocalActuator]
	}
	itemTime := spec.Workload.ItemTime.D()
	if itemTime > 0 {
		p.Basis = schemas.BasisHint
	}
	if key := workerKey(spec); key != "" {
		if h, err := m.history(ctx, key); err == nil && h.Items > 0 {
			if itemTime == 0 {
				itemTime, p.Basis, p.Samples = time.Duration(h.ItemSeconds*float64(time.Second)), schemas.BasisHistory, h.Items
			}
			startup = time.Duration(h.StartupSeconds * float64(time.Second))
		}
	}
	if p.Basis == schemas.BasisNone {
		return p
	}
	f := schemas.Forecast(items, spec.Replicas.Max, itemTime, startup, deadline)
	f.Basis, f.Samples = p.Basis, p.Samples
	return &f
}

// confidence grades a prediction by its basis: high from the history of
// 100 items or more, medium from a smaller history or the spec's hint.
func confidence(p *schemas.Prediction) string {
	if p.Basis == schemas.BasisHistory && p.Samples >= 100 {
		return "high"
	}
	return "medium"
}

// infeasible is the refusal of a job predicted to miss its deadline whose
// policy is reject: 422, error name DeadlineInfeasible.
func infeasible(spec *schemas.JobSpec, p *schemas.Prediction) *schemas.APIError {
	need := "no replica count can: its start-up alone takes longer"
	if p.ReplicasNeeded > 0 {
		need = fmt.Sprintf("it needs %d replicas", p.ReplicasNeeded)
	}
	e := apiError(http.StatusUnprocessableEntity,
		"deadline %s cannot be met: at replicas.max %d the job is predicted to take %s (basis %s: %s per item, %s start-up); %s",
		spec.Deadline.String(), spec.Replicas.Max, p.ETA.D(), p.Basis, p.ItemTime.D(), p.Startup.D(), need)
	e.Name = "DeadlineInfeasible"
	return e
}

// history reads the item times of a worker program.
func (m *Stage) history(ctx context.Context, key string) (*history, error) {
	kv, err := m.historyKV(ctx)
	if err != nil {
		return nil, err
	}
	e, err := kv.Get(ctx, key)
	if err != nil {
		return nil, err
	}
	var h history
	if err := json.Unmarshal(e.Value(), &h); err != nil {
		return nil, err
	}
	return &h, nil
}

// learn adds a finished job's item times to its worker program's history:
// the mean of its results' durations, and its start-up, from its start to
// its first result less one item time.
func (m *Stage) learn(ctx context.Context, rec *schemas.JobRecord) {
	key := workerKey(&rec.Spec)
	if key == "" || rec.StartedAt.IsZero() {
		return
	}
	results, err := m.bus.Outputs().StoredResults(ctx, rec.ID)
	if err != nil || len(results) == 0 {
		return
	}
	var sum float64
	first := results[0].FinishedAt
	for _, r := range results {
		sum += r.Duration.D().Seconds()
		if r.FinishedAt.Before(first) {
			first = r.FinishedAt
		}
	}
	n := len(results)
	mean := sum / float64(n)
	startup := math.Max(0, first.Sub(rec.StartedAt).Seconds()-mean)
	kv, err := m.historyKV(ctx)
	if err != nil {
		m.log.Warn("item times not learned", "job", rec.ID, "err", err)
		return
	}
	for range 3 { // compare-and-set against concurrent learners
		h, rev := history{}, uint64(0)
		if e, err := kv.Get(ctx, key); err == nil {
			_ = json.Unmarshal(e.Value(), &h)
			rev = e.Revision()
		} else if !errors.Is(err, jetstream.ErrKeyNotFound) {
			break
		}
		old := float64(min(h.Items, historyWindow))
		h.ItemSeconds = (h.ItemSeconds*old + sum) / (old + float64(n))
		h.StartupSeconds = (h.StartupSeconds*float64(h.Jobs) + startup) / float64(h.Jobs+1)
		h.Items, h.Jobs, h.UpdatedAt = min(h.Items+n, historyWindow), h.Jobs+1, m.clock.Now()
		data, _ := json.Marshal(h)
		if rev == 0 {
			_, err = kv.Create(ctx, key, data)
		} else {
			_, err = kv.Update(ctx, key, data, rev)
		}
		if err == nil {
			return
		}
	}
	m.log.Warn("item times not learned", "job", rec.ID, "err", err)
}
