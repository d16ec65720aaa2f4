package sink

import (
	"context"
	"fmt"

	"github.com/spf13/pflag"

	"github.com/pace-platform/pace/internal/host"
	"github.com/pace-platform/pace/stages/sink/influx"
	"github.com/pace-platform/pace/stages/sink/prom"
)

func init() {
	host.Register(host.Def{Name: "sink", Short: "Export job progress to Prometheus and InfluxDB",
		Long: `The sink serves every job's latest progress as pace_job_* on /metrics (each
replica its own copy) and, with --influx-url, writes progress to InfluxDB
through a durable consumer the replicas share.`,
		New: func() host.Stage { return &command{} }})
}

// command is the sink as pace up and pace stage run it.
type command struct{ influx influx.Config }

func (s *command) Flags(fs *pflag.FlagSet) {
	fs.StringVar(&s.influx.URL, "influx-url", "", `InfluxDB URL, e.g. http://localhost:8086 ("" = no InfluxDB)`)
	fs.StringVar(&s.influx.Bucket, "influx-bucket", "pace", `InfluxDB 2.x bucket, or "db" / "db/rp" on 1.8`)
	fs.StringVar(&s.influx.Token, "influx-token", "", `InfluxDB 2.x token, or "user:password" on 1.8 with auth`)
	fs.StringVar(&s.influx.Org, "influx-org", "", "InfluxDB 2.x organization (ignored by 1.8)")
}

func (s *command) Validate() error {
	if s.influx.URL == "" {
		return nil
	}
	errs := s.influx.Defaults().Validate()
	if len(errs) == 0 {
		return nil
	}
	// Only url and bucket have flags; the token is never echoed.
	if e := errs[0]; e.Field == "url" {
		return fmt.Errorf("--influx-url %q: %s", s.influx.URL, e.Detail)
	}
	return fmt.Errorf("--influx-%s: %s", errs[0].Field, errs[0].Detail)
}

// Wire serves every job's latest progress as pace_job_* metrics (each
// replica its own reader) and, with --influx-url, writes progress to
// InfluxDB through a durable consumer the replicas share.
func (s *command) Wire(ctx context.Context, p host.Process) error {
	c, err := p.Client(ctx, "sink")
	if err != nil {
		return err
	}
	log := p.Logger()
	ps := prom.New(prom.Config{})
	pst, err := New(Deps{Bus: c, Sink: ps}, Config{Name: "prom", Start: Latest}, WithLogger(log))
	if err != nil {
		return err
	}
	p.Register(ps, pst.Metrics())
	p.Go(pst.Run)
	if s.influx.URL == "" {
		return nil
	}
	is, err := influx.New(s.influx, influx.WithLogger(log))
	if err != nil {
		return fmt.Errorf("--influx-*: %w", err)
	}
	ist, err := New(Deps{Bus: c, Sink: is}, Config{Name: "influx", Start: Durable}, WithLogger(log))
	if err != nil {
		return err
	}
	p.Register(is.Stats(), ist.Metrics())
	p.Go(is.Run)
	p.Go(ist.Run)
	return nil
}
