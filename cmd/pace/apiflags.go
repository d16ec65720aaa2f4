package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/pflag"
	"sigs.k8s.io/yaml"

	"github.com/pace-platform/pace/schemas"
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

// apiClient calls the manager API.
type apiClient struct {
	f  apiFlags
	hc *http.Client
}

func (f *apiFlags) client() *apiClient { return &apiClient{f: *f, hc: &http.Client{}} }

// validate checks --api before any request, so that a mistyped URL is a
// usage error naming the flag rather than a transport error.
func (f *apiFlags) validate() error {
	u, err := url.Parse(f.url)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return usageError("--api %q: want an http:// or https:// URL such as http://127.0.0.1:8080", f.url)
	}
	if f.timeout <= 0 {
		return usageError("--request-timeout %s: must be > 0", f.timeout)
	}
	return nil
}

// request sends a request and returns the response, or an error made from
// the API's error envelope for a non-2xx answer.
func (c *apiClient) request(ctx context.Context, method, path string, body []byte, contentType string) (*http.Response, error) {
	if err := c.f.validate(); err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimRight(c.f.url, "/")+path, bytes.NewReader(body))
	if err != nil {
		return nil, usageError("--api %q: %v", c.f.url, err)
	}
	if body != nil {
		req.Header.Set("Content-Type", contentType)
	}
	if c.f.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.f.token)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		if errors.Is(err, syscall.ECONNREFUSED) {
			err = fmt.Errorf("%w (is Pace running? --api is %s)", err, c.f.url)
		}
		return nil, signalled(ctx, fmt.Errorf("%s %s: %w", method, path, err))
	}
	if resp.StatusCode < 300 {
		return resp, nil
	}
	defer resp.Body.Close() //nolint:errcheck // error path
	data, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	apiErr := &schemas.APIError{}
	if json.Unmarshal(data, apiErr) != nil || apiErr.Code == 0 {
		apiErr = &schemas.APIError{Code: resp.StatusCode, Name: resp.Status, Message: strings.TrimSpace(string(data))}
	}
	if resp.StatusCode == http.StatusBadRequest || resp.StatusCode == http.StatusRequestEntityTooLarge ||
		resp.StatusCode == http.StatusUnsupportedMediaType || resp.StatusCode == http.StatusConflict ||
		resp.StatusCode == http.StatusUnprocessableEntity {
		return nil, rejected(apiErr)
	}
	return nil, apiErr
}

// call sends a request with a timeout and decodes a JSON answer into out (nil: discard).
func (c *apiClient) call(ctx context.Context, method, path string, body []byte, out any) error {
	ctx, cancel := context.WithTimeout(ctx, c.f.timeout)
	defer cancel()
	resp, err := c.request(ctx, method, path, body, "application/json")
	if err != nil {
		return err
	}
	defer resp.Body.Close() //nolint:errcheck // read-only
	if out == nil || resp.StatusCode == http.StatusNoContent {
		return nil
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("%s %s: unreadable answer: %w", method, path, err)
	}
	return nil
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
