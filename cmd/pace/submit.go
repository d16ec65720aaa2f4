package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/pace-platform/pace/stages/manager"
)

type submitOptions struct {
	api          apiFlags
	wait         bool
	pollInterval time.Duration
	now          func() time.Time
}

func newSubmitCmd(a *app) *cobra.Command {
	o := &submitOptions{now: time.Now}
	cmd := &cobra.Command{
		Use:   "submit FILE",
		Short: "Submit a job (Pace YAML/JSON spec or Asperathos JSON)",
		Long: `Submit sends a job document to the manager API and prints the new job's id
alone on standard output. FILE is Pace's spec in YAML or JSON, or an
Asperathos kubejobs submission; "-" reads standard input. A workload.file
in a Pace spec is read here, relative to FILE, and sent inline.

A refused document (or an unreadable FILE) exits with code 3 and lists
every invalid field. With --wait it shows the job's progress on standard
error until it ends and exits 0 only if the job completed.`,
		Example: `  pace submit job.yaml
  pace submit asperathos-payload.json --api http://pace:8080 --token "$TOKEN"
  id=$(pace submit job.yaml) && pace status "$id"
  pace submit job.yaml --wait`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error { return o.run(cmd.Context(), a, args[0]) },
	}
	o.api.add(cmd.Flags())
	cmd.Flags().BoolVar(&o.wait, "wait", false, "show progress until the job ends; exit 0 only if it completed")
	cmd.Flags().DurationVar(&o.pollInterval, "poll-interval", time.Second, "how often --wait asks for the job's state")
	return cmd
}

func (o *submitOptions) run(ctx context.Context, a *app, file string) error {
	if o.pollInterval <= 0 {
		return usageError("--poll-interval %s: must be > 0", o.pollInterval)
	}
	doc, err := readDoc(a.stdin, file)
	if err != nil {
		return rejected(err)
	}
	c := o.api.client()
	var out struct {
		JobID string `json:"job_id"`
	}
	if err := c.call(ctx, "POST", "/submissions", doc, &out); err != nil {
		return err
	}
	fmt.Fprintln(a.stdout, out.JobID)
	if !o.wait {
		return nil
	}
	return o.follow(ctx, a, c, out.JobID)
}

// readDoc reads a job document as JSON, converting YAML as the manager
// does (manager.YAMLToJSON: strings as written) and inlining a Pace spec's
// workload.file. A JSON document is sent as it is.
func readDoc(stdin io.Reader, file string) ([]byte, error) {
	var raw []byte
	var err error
	if file == "-" {
		raw, err = io.ReadAll(stdin)
	} else {
		raw, err = os.ReadFile(file)
	}
	if err != nil {
		return nil, err
	}
	doc := raw
	if !json.Valid(raw) {
		if doc, err = manager.YAMLToJSON(raw); err != nil {
			return nil, fmt.Errorf("%s: %w", file, err)
		}
	}
	var m map[string]any
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.UseNumber() // numbers are sent back as written, not as float64
	if dec.Decode(&m) != nil {
		return doc, nil // the server reports what is wrong with it
	}
	w, _ := m["workload"].(map[string]any)
	name, _ := w["file"].(string)
	_, plugin := m["plugin"]
	if _, info := m["plugin_info"]; plugin || info || name == "" {
		return doc, nil
	}
	if !filepath.IsAbs(name) && file != "-" {
		name = filepath.Join(filepath.Dir(file), name)
	}
	data, err := os.ReadFile(name)
	if err != nil {
		return nil, fmt.Errorf("workload.file: %w", err)
	}
	items := []string{}
	for line := range strings.Lines(string(data)) {
		if line = strings.TrimRight(line, "\r\n"); strings.TrimSpace(line) != "" {
			items = append(items, line)
		}
	}
	delete(w, "file")
	w["items"] = items
	return json.Marshal(m)
}

// follow shows the job's progress on standard error until it ends.
func (o *submitOptions) follow(ctx context.Context, a *app, c *apiClient, id string) error {
	return o.followTo(ctx, a.stderr, c, id)
}

// followTo shows the job's progress on w until it ends: one line redrawn in
// place on a terminal, a line per change otherwise.
func (o *submitOptions) followTo(ctx context.Context, w io.Writer, c *apiClient, id string) error {
	tty := false
	if f, ok := w.(*os.File); ok {
		tty = isTerminal(f)
	}
	last := ""
	t := time.NewTicker(o.pollInterval)
	defer t.Stop()
	for {
		var v jobView
		if err := c.call(ctx, "GET", "/submissions/"+id, nil, &v); err != nil {
			return err
		}
		line := progressLine(v, o.now())
		switch {
		case tty:
			fmt.Fprintf(w, "\r\033[K%s", line)
		case line != last:
			fmt.Fprintln(w, line)
		}
		last = line
		if final(v.Status) {
			if tty {
				fmt.Fprintln(w)
			}
			if v.Status != "completed" {
				return fmt.Errorf("job %s ended %s: %s", id, v.Status, v.Reason)
			}
			return nil
		}
		select {
		case <-ctx.Done():
			return signalled(ctx, ctx.Err())
		case <-t.C:
		}
	}
}

// progressLine renders a job's progress: a bar, items done/total,
// replicas and the time left to the deadline.
func progressLine(v jobView, now time.Time) string {
	const width = 20
	frac := 0.0
	if v.Total > 0 {
		frac = float64(v.Done+v.Dead) / float64(v.Total)
	}
	filled := int(frac * width)
	bar := strings.Repeat("#", filled) + strings.Repeat(".", width-filled)
	items := fmt.Sprintf("%d/%d items", v.Done, v.Total)
	if v.Total == 0 {
		items = fmt.Sprintf("%d items", v.Done)
	}
	if v.Dead > 0 {
		items += fmt.Sprintf(", %d dead", v.Dead)
	}
	left := "no deadline"
	if !v.Deadline.IsZero() {
		if d := v.Deadline.Sub(now).Round(time.Second); d >= 0 {
			left = d.String() + " to deadline"
		} else {
			left = (-d).String() + " past deadline"
		}
	}
	replicas := fmt.Sprintf("%d replicas", v.Replicas)
	if v.Replicas == 1 {
		replicas = "1 replica"
	}
	return fmt.Sprintf("%s [%s] %3.0f%% %s, %s, %s, %s", v.ID, bar, 100*frac, items, replicas, left, v.Status)
}
