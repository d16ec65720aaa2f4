package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
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

// request sends a request and returns the response, or an error made from
// the API's error envelope for a non-2xx answer.
func (c *apiClient) request(ctx context.Context, method, path string, body []byte, contentType string) (*http.Response, error) {
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
		resp.StatusCode == http.StatusUnsupportedMediaType || resp.StatusCode == http.StatusConflict {
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

func checkOutput(format string, allowed ...string) error {
	for _, a := range allowed {
		if format == a {
			return nil
		}
	}
	return usageError("-o %q: want one of %s", format, strings.Join(allowed, ", "))
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
}

func final(status string) bool { return schemas.JobState(status).Final() }
