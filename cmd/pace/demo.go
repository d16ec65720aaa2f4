package main

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/pace-platform/pace/schemas"
	"github.com/pace-platform/pace/stages/manager"
)

//go:embed demo.yaml
var demoSpec []byte

// demoItems is the number of items the demo job gets.
const demoItems = 120

// errDemoMissed ends `pace up --demo` with exit code 1.
var errDemoMissed = errors.New("the demo job missed its deadline")

// errDemoDone ends `pace up --demo` cleanly once the report is printed.
var errDemoDone = errors.New("demo finished")

// demoJob returns the demo job document as JSON, with its items. The
// YAML is read as the manager reads it (manager.YAMLToJSON).
func demoJob() ([]byte, error) {
	doc, err := manager.YAMLToJSON(demoSpec)
	if err != nil {
		return nil, fmt.Errorf("demo job: %w", err)
	}
	var m map[string]any
	if err := json.Unmarshal(doc, &m); err != nil {
		return nil, fmt.Errorf("demo job: %w", err)
	}
	items := make([]string, demoItems)
	for i := range items {
		items[i] = fmt.Sprint(i + 1)
	}
	m["workload"] = map[string]any{"items": items}
	return json.Marshal(m)
}

// runDemo submits the demo job to the API at url, shows its progress and
// prints its report. It returns errDemoDone when the deadline was met,
// errDemoMissed otherwise, so that `pace up` stops either way.
func runDemo(ctx context.Context, a *app, url string) error {
	doc, err := demoJob()
	if err != nil {
		return err
	}
	c := (&apiFlags{url: url, timeout: 30 * time.Second}).client()
	var created struct {
		JobID string `json:"job_id"`
	}
	if err := c.call(ctx, "POST", "/submissions", doc, &created); err != nil {
		return fmt.Errorf("submit the demo job: %w", err)
	}
	fmt.Fprintf(a.stdout, "Demo: job %s, %d items of 0.5 s due in 30 s; one worker would need a minute.\n", created.JobID, demoItems)
	fmt.Fprintf(a.stdout, "Watch it at %s/ui/jobs/%s or with: pace status %s --api %s\n", url, created.JobID, created.JobID, url)
	follow := &submitOptions{pollInterval: time.Second, now: time.Now}
	if err := follow.followTo(ctx, a.stdout, c, created.JobID); err != nil && ctx.Err() == nil {
		fmt.Fprintln(a.stdout, err)
	}
	if ctx.Err() != nil {
		return nil
	}
	var sum struct {
		DeadlineMet     *bool   `json:"deadline_met"`
		LatenessSeconds float64 `json:"lateness_seconds"`
		ReplicaSeconds  float64 `json:"replica_seconds"`
		ExecutionTime   int     `json:"execution_time"`
		FinalReplicas   int     `json:"final_replicas"`
		ItemsOK         int     `json:"items_ok"`
		ItemsDead       int     `json:"items_dead"`
	}
	if err := c.call(ctx, "GET", "/submissions/"+created.JobID+"/report/summary", nil, &sum); err != nil {
		return fmt.Errorf("demo report: %w", err)
	}
	met := sum.DeadlineMet != nil && *sum.DeadlineMet
	verdict := "deadline met"
	if !met {
		verdict = fmt.Sprintf("deadline missed by %.1f s", sum.LatenessSeconds)
	}
	fmt.Fprintf(a.stdout, "\nReport for %s\n%s\n", created.JobID, strings.Repeat("-", 40))
	fmt.Fprintf(a.stdout, "result:           %s\n", verdict)
	fmt.Fprintf(a.stdout, "items:            %d ok, %d dead\n", sum.ItemsOK, sum.ItemsDead)
	fmt.Fprintf(a.stdout, "execution time:   %d s (deadline 30 s)\n", sum.ExecutionTime)
	fmt.Fprintf(a.stdout, "replica-seconds:  %.1f (one worker alone: %d, but it would finish after the deadline)\n",
		sum.ReplicaSeconds, demoItems/2)
	if !met {
		return errDemoMissed
	}
	return errDemoDone
}

// prepareDemo checks that --demo can run and quiets the logs so that the
// progress display stays readable. Without --data it uses a fresh directory.
func (o *upOptions) prepareDemo(cmd *cobra.Command, a *app) error {
	if o.f.fc.tokenFile != "" {
		return usageError("--demo submits its job anonymously: run it without --token-file")
	}
	if cmd.Flags().Lookup("actuator").Value.String() != schemas.LocalActuator {
		return usageError("--demo needs --actuator local")
	}
	if !cmd.Flags().Changed("log-level") {
		a.logLevel = "warn"
		if err := a.setupLogger(); err != nil {
			return err
		}
	}
	if !cmd.Flags().Changed("data") {
		dir, err := os.MkdirTemp("", "pace-demo")
		if err != nil {
			return err
		}
		o.data, o.demoDir = dir, dir
	}
	return nil
}
