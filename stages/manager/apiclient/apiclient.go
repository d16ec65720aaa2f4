// Package apiclient calls Pace's job API over HTTP (docs/api.md): what
// pace submit, status, jobs, logs and the other API commands send, usable
// from any Go program.
package apiclient

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
	"time"

	"github.com/pace-platform/pace/schemas"
)

// Client calls the job API at one base URL.
type Client struct {
	base    string
	token   string
	timeout time.Duration
	hc      *http.Client
}

// ErrInvalid wraps the error of a base URL or timeout New refuses.
var ErrInvalid = errors.New("invalid API client setting")

// New returns a client of the API at base (an http:// or https:// URL),
// sending token as a bearer token when set and bounding each Call by
// timeout.
func New(base, token string, timeout time.Duration) (*Client, error) {
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("%w: URL %q: want an http:// or https:// URL such as http://127.0.0.1:8080", ErrInvalid, base)
	}
	if timeout <= 0 {
		return nil, fmt.Errorf("%w: timeout %s: must be > 0", ErrInvalid, timeout)
	}
	return &Client{base: strings.TrimRight(base, "/"), token: token, timeout: timeout, hc: &http.Client{}}, nil
}

// Do sends a request with a body of contentType (nil: none) and returns the
// response. A non-2xx answer is an error: the API's error envelope, a
// *schemas.APIError (built from the status and body when the answer is not
// one).
func (c *Client) Do(ctx context.Context, method, path string, body []byte, contentType string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", contentType)
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", method, path, err)
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
	return nil, apiErr
}

// Call sends a request with a JSON body (nil: none) within the client's
// timeout and decodes a JSON answer into out (nil: discard it).
func (c *Client) Call(ctx context.Context, method, path string, body []byte, out any) error {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	resp, err := c.Do(ctx, method, path, body, "application/json")
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
