package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"syscall"
	"time"

	"github.com/spf13/pflag"
	"sigs.k8s.io/yaml"

	"github.com/pace-platform/pace/schemas"
	"github.com/pace-platform/pace/stages/manager/apiclient"
)

// apiFlags are the flags of every command that talks to the manager API.
type apiFlags struct {
	url     string
	token   string
	timeout time.Duration
}

func (f *apiFlags) add(fs *pflag.FlagSet) {
	fs.StringVar(&f.url, "api", "http://127.0.0.1:8080", "manager API URL (the HTTP URL 'pace up' prints)")
	fs.StringVar(&f.token, "token", "", "bearer token for the API (see pace up --token-file)")
	fs.DurationVar(&f.timeout, "request-timeout", time.Minute, "timeout of each API request (not of a followed log)")
}

// apiClient calls the manager API with the flags' settings; its errors
// carry the exit codes of the command line.
type apiClient struct {
	f apiFlags
}

func (f *apiFlags) client() *apiClient { return &apiClient{f: *f} }

// api returns the client of the flags, checked before any request, so that
// a mistyped URL is a usage error naming the flag rather than a transport
// error.
func (c *apiClient) api() (*apiclient.Client, error) {
	cl, err := apiclient.New(c.f.url, c.f.token, c.f.timeout)
	switch {
	case err == nil:
		return cl, nil
	case c.f.timeout <= 0:
		return nil, usageError("--request-timeout %s: must be > 0", c.f.timeout)
	}
	return nil, usageError("--api %q: want an http:// or https:// URL such as http://127.0.0.1:8080", c.f.url)
}

// request sends a request and returns the response, or an error made from
// the API's error envelope for a non-2xx answer.
func (c *apiClient) request(ctx context.Context, method, path string, body []byte, contentType string) (*http.Response, error) {
	cl, err := c.api()
	if err != nil {
		return nil, err
	}
	resp, err := cl.Do(ctx, method, path, body, contentType)
	return resp, c.exitCode(ctx, err)
}

// call sends a request with a timeout and decodes a JSON answer into out (nil: discard).
func (c *apiClient) call(ctx context.Context, method, path string, body []byte, out any) error {
	cl, err := c.api()
	if err != nil {
		return err
	}
	return c.exitCode(ctx, cl.Call(ctx, method, path, body, out))
}

// exitCode gives err its exit code: input the API refused is rejected; a
// refused connection says where Pace was looked for.
func (c *apiClient) exitCode(ctx context.Context, err error) error {
	var apiErr *schemas.APIError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &apiErr):
		switch apiErr.Code {
		case http.StatusBadRequest, http.StatusRequestEntityTooLarge, http.StatusUnsupportedMediaType,
			http.StatusConflict, http.StatusUnprocessableEntity:
			return rejected(apiErr)
		}
		return apiErr
	case errors.Is(err, syscall.ECONNREFUSED):
		err = fmt.Errorf("%w (is Pace running? --api is %s)", err, c.f.url)
	}
	return signalled(ctx, err)
}

// show fetches path once. For -o json or yaml it prints the answer and
// returns true; for a table it decodes the answer into table instead.
func (c *apiClient) show(ctx context.Context, path, format string, w io.Writer, table any) (bool, error) {
	var raw json.RawMessage
	if err := c.call(ctx, "GET", path, nil, &raw); err != nil {
		return false, err
	}
	if format == "table" {
		if err := json.Unmarshal(raw, table); err != nil {
			return false, fmt.Errorf("GET %s: unreadable answer: %w", path, err)
		}
		return false, nil
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return true, fmt.Errorf("GET %s: unreadable answer: %w", path, err)
	}
	_, err := printStructured(w, format, v)
	return true, err
}

// printStructured writes v as JSON or YAML; it returns false for other formats.
func printStructured(w io.Writer, format string, v any) (bool, error) {
	switch format {
	case "json":
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return true, enc.Encode(v)
	case "yaml":
		b, err := yaml.Marshal(v)
		if err != nil {
			return true, err
		}
		_, err = w.Write(b)
		return true, err
	}
	return false, nil
}

// jobView is the part of GET /submissions/{id} the CLI shows.
type jobView struct {
	ID            string    `json:"app_id"`
	Status        string    `json:"status"`
	Name          string    `json:"name"`
	Owner         string    `json:"owner"`
	Mode          string    `json:"mode"`
	Total         int       `json:"total"`
	Done          int       `json:"done"`
	Dead          int       `json:"dead"`
	Pending       int       `json:"pending"`
	InFlight      int       `json:"in_flight"`
	Replicas      int       `json:"replicas"`
	StopRequested bool      `json:"stop_requested"`
	Reason        string    `json:"reason"`
	CreatedAt     time.Time `json:"created_at"`
	StartedAt     time.Time `json:"started_at"`
	FinishedAt    time.Time `json:"finished_at"`
	Deadline      time.Time `json:"deadline"`
	// The forecast at admission (batch jobs with a deadline).
	Prediction          *schemas.Prediction `json:"prediction"`
	PredictedCompletion time.Time           `json:"predicted_completion"`
	Confidence          string              `json:"confidence"`
}

// owner is the job's owner, or "-" for a job created by a push, which has none.
func (v jobView) owner() string {
	if v.Owner == "" {
		return "-"
	}
	return v.Owner
}

func final(status string) bool { return schemas.JobState(status).Final() }
