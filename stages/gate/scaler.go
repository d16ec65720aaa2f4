package gate

import (
	"context"
	"fmt"
	"time"

	"github.com/pace-platform/pace/schemas"
)

// Scaler is the one method of an actuator runtime the gate needs (the
// local runtime and the Kubernetes actuator provide it).
type Scaler interface {
	Scale(ctx context.Context, job string, replicas int32) error
}

// ScaleActuator executes scale requests (a Replicas count on a job) with a
// Scaler; other requests fail.
func ScaleActuator(s Scaler) Actuator {
	return ActuatorFunc(func(ctx context.Context, req *schemas.KubeRequest) (*schemas.KubeOutcome, error) {
		if req.Job == "" || req.Subresource != "scale" {
			return nil, fmt.Errorf("request %s: only scale requests of a job are supported", req.ID)
		}
		if err := s.Scale(ctx, req.Job, int32(req.Replicas)); err != nil { //nolint:gosec // replicas are validated non-negative
			return nil, err
		}
		return &schemas.KubeOutcome{RequestID: req.ID, Job: req.Job, Status: schemas.Applied, Replicas: req.Replicas, At: time.Now()}, nil
	})
}
