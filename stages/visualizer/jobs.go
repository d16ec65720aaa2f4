package visualizer

import (
	"context"
	"errors"
	"net/http"

	"github.com/pace-platform/pace/bus"
	"github.com/pace-platform/pace/internal/auth"
	"github.com/pace-platform/pace/schemas"
)

// sees is u's view of jobs, as the job API's: every job on an open UI, else
// those u owns (every job for an admin).
func (s *Stage) sees(u auth.User) func(owner string) bool {
	return func(owner string) bool { return s.cfg.Open || u.Owns(owner) }
}

// jobs returns the jobs u may see.
func (s *Stage) jobs(ctx context.Context, u auth.User) ([]*schemas.JobRecord, error) {
	return s.bus.Jobs().ListSeen(ctx, s.sees(u))
}

// job returns job id if u may see it; another user's job is not found, as
// the job API answers.
func (s *Stage) job(ctx context.Context, u auth.User, id string) (*schemas.JobRecord, error) {
	rec, err := s.bus.Jobs().StatusSeen(ctx, id, s.sees(u))
	if errors.Is(err, bus.ErrJobNotFound) {
		return nil, &schemas.APIError{Code: http.StatusNotFound, Name: "NOT_FOUND", Message: "job " + id + " not found"}
	}
	return rec, err
}
