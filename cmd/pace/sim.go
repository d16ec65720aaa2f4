package main

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/pace-platform/pace/schemas"
	"github.com/pace-platform/pace/stages/controller/plugin/builtin"
	"github.com/pace-platform/pace/stages/controller/sim"
)

func newSimCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "sim",
		Short: "Simulate controllers on scenario files, without a cluster",
		Long: `Sim runs the controller plugins against a deterministic discrete-event model
of workers and a queue (stages/controller/sim). The same seed gives the same
output, byte for byte.`,
	}
	cmd.AddCommand(newSimRunCmd(a), newSimCompareCmd(a))
	return cmd
}

type simRunOptions struct {
	controller string
	output     string
	firstJob   bool
}

func newSimRunCmd(a *app) *cobra.Command {
	o := &simRunOptions{}
	cmd := &cobra.Command{
		Use:   "run SCENARIO",
		Short: "Simulate one scenario with one controller",
		Long: `Run simulates the scenario file with one controller and prints a summary
(table), the summary with the sampled time series and the decisions (json),
or the time series alone (csv). The job runs as a later job of its program,
with the item time and start-up that admission forecasts from the program's
earlier jobs (five other draws of the scenario), as pace sim compare runs it;
--first-job runs it as the program's first job, without a forecast.`,
		Example: `  pace sim run examples/scenarios/04-tight.yaml
  pace sim run examples/scenarios/08-slow-startup.yaml --first-job
  pace sim run examples/scenarios/01-asperathos-327.yaml --controller default -o json
  pace sim run examples/scenarios/12-streaming-bursts.yaml -o csv > bursts.csv`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error { return o.run(a, args[0]) },
	}
	cmd.Flags().StringVar(&o.controller, "controller", builtin.DefaultName, "controller plugin to simulate")
	choiceVarP(cmd.Flags(), &o.output, "output", "o", "table", "output format", "table", "json", "csv")
	cmd.Flags().BoolVar(&o.firstJob, "first-job", false, "run the job as its program's first, without the forecast of earlier jobs")
	return cmd
}

func (o *simRunOptions) run(a *app, path string) error {
	reg := builtin.Registry()
	if _, ok := reg[o.controller]; !ok {
		return usageError("--controller %q: want one of %v", o.controller, reg.Names())
	}
	s, err := sim.Load(path)
	if err != nil {
		return rejected(err)
	}
	simulate := sim.RunLater
	if o.firstJob {
		simulate = sim.Run
	}
	r, err := simulate(s, reg, o.controller)
	if err != nil {
		return rejected(err)
	}
	switch o.output {
	case "json":
		enc := json.NewEncoder(a.stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(r)
	case "csv":
		cw := csv.NewWriter(a.stdout)
		_ = cw.Write([]string{"t", "job_progress", "time_progress", "error", "replicas", "desired", "done", "queue"})
		f := func(x float64) string { return strconv.FormatFloat(x, 'f', -1, 64) }
		for _, p := range r.Series {
			_ = cw.Write([]string{f(p.T), f(p.JobProgress), f(p.TimeProgress), f(p.Error),
				strconv.Itoa(p.Replicas), strconv.Itoa(p.Desired), strconv.Itoa(p.Done), strconv.Itoa(p.Queue)})
		}
		cw.Flush()
		return cw.Error()
	}
	tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "scenario\t%s\n", r.Scenario)
	fmt.Fprintf(tw, "controller\t%s\n", r.Controller)
	if r.Mode == schemas.Batch {
		verdict := "deadline met"
		if !r.Met {
			verdict = fmt.Sprintf("deadline missed by %.1fs", r.Lateness)
		}
		fmt.Fprintf(tw, "result\t%s (finished at %.1fs, deadline %.0fs)\n", verdict, r.Finish, r.Deadline)
		fmt.Fprintf(tw, "replica-seconds\t%.1f (oracle %.1f, %.2fx)\n", r.ReplicaSeconds, r.Oracle, r.CostVsOracle)
	} else {
		fmt.Fprintf(tw, "p99 latency\t%.1fs (target met: %v)\n", r.LatencyP99, r.Met)
		fmt.Fprintf(tw, "replica-seconds\t%.1f\n", r.ReplicaSeconds)
	}
	fmt.Fprintf(tw, "scaling actions\t%d (peak %d replicas, %d redeliveries)\n", r.ScalingActions, r.PeakReplicas, r.Redeliveries)
	return tw.Flush()
}

type simCompareOptions struct {
	scenarios string
	output    string
	docs      string
}

func newSimCompareCmd(a *app) *cobra.Command {
	o := &simCompareOptions{}
	cmd := &cobra.Command{
		Use:   "compare",
		Short: "Run every scenario with every controller and compare them",
		Long: `Compare runs each scenario in --scenarios with the default, pid, hpa and
deadline controllers, each as a later job of its program (admission forecasts
its item time and start-up from five earlier jobs, other draws of the
scenario), and the batch scenarios with the deadline controller on a first job
(deadline-first-job, no forecast) and the tuned yardstick (the deadline
controller with the setting that did best on other draws of the scenario),
and prints, per controller, the fraction of feasible deadlines
met, the geometric mean of replica-seconds over the oracle's, and the mean
number of scaling actions. It also writes DIR/controllers.md and its
SVG plots in DIR/controllers/ for --docs DIR; by default (auto) that is ./docs
when ./docs/controllers.md exists, i.e. when run from the repository's root,
and nothing otherwise (--docs none).`,
		Example: `  pace sim compare
  pace sim compare --scenarios examples/scenarios -o json | jq .controllers
  pace sim compare --docs /tmp/report --scenarios my-scenarios`,
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, args []string) error { return o.run(a) },
	}
	cmd.Flags().StringVar(&o.scenarios, "scenarios", "examples/scenarios", "directory of scenario YAML files")
	choiceVarP(cmd.Flags(), &o.output, "output", "o", "table", "output format", "table", "json")
	cmd.Flags().StringVar(&o.docs, "docs", "auto", "also write controllers.md and plots into this directory: a path, auto or none")
	return cmd
}

func (o *simCompareOptions) run(a *app) error {
	switch o.docs {
	case "none":
		o.docs = ""
	case "auto":
		o.docs = ""
		if _, err := os.Stat(filepath.Join("docs", "controllers.md")); err == nil {
			o.docs = "docs"
		}
	}
	scs, err := sim.LoadDir(o.scenarios)
	if err != nil {
		return rejected(err)
	}
	rep, err := sim.Compare(scs, builtin.Registry(), sim.Columns, o.docs != "")
	if err != nil {
		return err
	}
	if o.docs != "" {
		if err := writeSimDocs(o.docs, rep); err != nil {
			return err
		}
	}
	for i := range rep.Scenarios { // the printed report carries no series
		for n, r := range rep.Scenarios[i].Results {
			r.Series, r.Decisions = nil, nil
			rep.Scenarios[i].Results[n] = r
		}
	}
	if o.output == "json" {
		enc := json.NewEncoder(a.stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "CONTROLLER\tFEASIBLE DEADLINES MET\tCOST VS ORACLE\tSCALING ACTIONS\tSTREAMING P99 MET")
	for _, n := range sim.Columns {
		s := rep.Controllers[n]
		streaming := fmt.Sprintf("%.0f%%", 100*s.StreamingLatencyMet)
		if n == sim.Tuned || n == sim.FirstJob {
			streaming = "-" // batch jobs only
		}
		fmt.Fprintf(tw, "%s\t%.0f%%\t%.3f\t%.1f\t%s\n", n, 100*s.FeasibleDeadlinesMet, s.CostVsOracle, s.ScalingActions, streaming)
	}
	return tw.Flush()
}

// writeSimDocs writes dir/controllers.md and dir/controllers/*.svg.
func writeSimDocs(dir string, rep sim.Report) error {
	if err := os.MkdirAll(filepath.Join(dir, "controllers"), 0o755); err != nil {
		return err
	}
	files, err := sim.Docs(rep, sim.Columns)
	if err != nil {
		return err
	}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(dir, filepath.FromSlash(name)), b, 0o644); err != nil {
			return err
		}
	}
	return nil
}
