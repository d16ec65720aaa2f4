package main

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"text/tabwriter"

	"github.com/spf13/cobra"
)

type reportOptions struct {
	api      apiFlags
	output   string
	detailed bool
}

func newReportCmd(a *app) *cobra.Command {
	o := &reportOptions{}
	cmd := &cobra.Command{
		Use:   "report ID",
		Short: "Print a job's report",
		Long: `Report prints a job's summary report (Asperathos' fields: max, min and final
error, final replicas, execution time; and Pace's: deadline met, lateness,
replica-seconds, items ok/dead, item time percentiles), or with --detailed
its samples: job progress, time progress, replicas and error per time.`,
		Example: `  pace report kj-3898be2
  pace report kj-3898be2 --detailed -o json`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error { return o.run(cmd.Context(), a, args[0]) },
	}
	o.api.add(cmd.Flags())
	choiceVarP(cmd.Flags(), &o.output, "output", "o", "table", "output format", "table", "json", "yaml")
	cmd.Flags().BoolVar(&o.detailed, "detailed", false, "print every sample instead of the summary")
	return cmd
}

func (o *reportOptions) run(ctx context.Context, a *app, id string) error {
	path := "/submissions/" + id + "/report/summary"
	if o.detailed {
		path = "/submissions/" + id + "/report"
	}
	var raw map[string]json.RawMessage
	if printed, err := o.api.client().show(ctx, path, o.output, a.stdout, &raw); printed || err != nil {
		return err
	}
	keys := make([]string, 0, len(raw))
	for k := range raw {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
	if o.detailed {
		fmt.Fprintln(tw, "TIME\tJOB_PROGRESS\tTIME_PROGRESS\tREPLICAS\tERROR")
		for _, k := range keys {
			var s struct {
				JobProgress  float64 `json:"job_progress"`
				TimeProgress float64 `json:"time_progress"`
				Replicas     int     `json:"replicas"`
				Error        float64 `json:"error"`
			}
			_ = json.Unmarshal(raw[k], &s)
			fmt.Fprintf(tw, "%s\t%.3f\t%.3f\t%d\t%+.3f\n", k, s.JobProgress, s.TimeProgress, s.Replicas, s.Error)
		}
		return tw.Flush()
	}
	for _, k := range keys {
		fmt.Fprintf(tw, "%s:\t%s\n", k, reportValue(raw[k]))
	}
	return tw.Flush()
}

// reportValue renders one summary field for people: strings unquoted, null
// as "-", an Asperathos [value, time] pair as "value at time".
func reportValue(raw json.RawMessage) string {
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return string(raw)
	}
	return humanValue(v)
}

func humanValue(v any) string {
	switch v := v.(type) {
	case nil:
		return "-"
	case string:
		return v
	case float64:
		return strconv.FormatFloat(v+0, 'f', -1, 64) // +0 turns -0 into 0
	case []any:
		if len(v) == 2 {
			if at, ok := v[1].(string); ok {
				return humanValue(v[0]) + " at " + at
			}
		}
	}
	b, _ := json.Marshal(v) // decoded from JSON, so it encodes
	return string(b)
}
