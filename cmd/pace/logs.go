package main

import (
	"bufio"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/pace-platform/pace/schemas"
)

type logsOptions struct {
	api    apiFlags
	follow bool
}

func newLogsCmd(a *app) *cobra.Command {
	o := &logsOptions{}
	cmd := &cobra.Command{
		Use:   "logs ID",
		Short: "Print a job's log",
		Long: `Logs prints the log lines of job ID, oldest first, one per line: time
(RFC 3339, UTC), source (the manager, the controller, a worker, …) and text.
With --follow it keeps printing new lines until the job ends.`,
		Example: `  pace logs kj-3898be2
  pace logs upper-1a2b3c4 -f`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error { return o.run(cmd.Context(), a, args[0]) },
	}
	o.api.add(cmd.Flags())
	cmd.Flags().BoolVarP(&o.follow, "follow", "f", false, "keep printing new lines until the job ends")
	return cmd
}

func (o *logsOptions) run(ctx context.Context, a *app, id string) error {
	c := o.api.client()
	if !o.follow {
		var lines []schemas.LogLine
		if err := c.call(ctx, "GET", "/submissions/"+id+"/log", nil, &lines); err != nil {
			return err
		}
		for _, l := range lines {
			printLogLine(a.stdout, l)
		}
		return nil
	}
	resp, err := c.request(ctx, "GET", "/submissions/"+id+"/log?follow=true", nil, "")
	if err != nil {
		return err
	}
	defer resp.Body.Close() //nolint:errcheck // read-only
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		var l schemas.LogLine
		if json.Unmarshal(sc.Bytes(), &l) == nil {
			printLogLine(a.stdout, l)
		}
	}
	if err := sc.Err(); err != nil && ctx.Err() == nil {
		return fmt.Errorf("follow log of %s: %w", id, err)
	}
	return nil
}

func printLogLine(w io.Writer, l schemas.LogLine) {
	fmt.Fprintf(w, "%s %s %s\n", l.At.UTC().Format(time.RFC3339Nano), l.Source, readable(l.Line))
}

// readable turns a structured line (a JSON object with msg, as Pace's own
// workers log) into "LEVEL msg key=value …", its fields in sorted order
// and its own time left out (the line's time is printed); any other line
// is returned as it is.
func readable(line string) string {
	if !strings.HasPrefix(line, "{") {
		return line
	}
	var rec map[string]any
	if json.Unmarshal([]byte(line), &rec) != nil {
		return line
	}
	msg, ok := rec["msg"].(string)
	if !ok {
		return line
	}
	level, _ := rec["level"].(string)
	var b strings.Builder
	b.WriteString(cmp.Or(level, "INFO") + " " + msg)
	for _, k := range slices.Sorted(maps.Keys(rec)) {
		if k == "msg" || k == "level" || k == "time" {
			continue
		}
		v, _ := json.Marshal(rec[k])
		if s, ok := rec[k].(string); ok && s != "" && !strings.ContainsAny(s, " \"=") {
			v = []byte(s)
		}
		fmt.Fprintf(&b, " %s=%s", k, v)
	}
	return b.String()
}
