package visualizer

import (
	"context"
	"errors"
	"net/http"

	"github.com/pace-platform/pace/bus"
	"github.com/pace-platform/pace/internal/auth"
	"github.com/pace-platform/pace/schemas"
)

// jobs returns the jobs u may see: every job on an open UI, else those u
// owns (every job for an admin), as the job API lists them.
func (s *Stage) jobs(ctx context.Context, u auth.User) ([]*schemas.JobRecord, error) {
	all, err := s.bus.Jobs().List(ctx)
	if err != nil {
		return nil, err
	}
	seen := all[:0]
	for _, rec := range all {
		if s.cfg.Open || u.Owns(rec.Spec.Owner) {
			seen = append(seen, rec)
		}
	}
	return seen, nil
}

// job returns job id if u may see it; another user's job is not found,
// as the job API answers, so that its existence is not revealed.
func (s *Stage) job(ctx context.Context, u auth.User, id string) (*schemas.JobRecord, error) {
	rec, err := s.bus.Jobs().Status(ctx, id)
	if errors.Is(err, bus.ErrJobNotFound) || err == nil && !s.cfg.Open && !u.Owns(rec.Spec.Owner) {
		return nil, &schemas.APIError{Code: http.StatusNotFound, Name: "NOT_FOUND", Message: "job " + id + " not found"}
	}
	return rec, err
}
