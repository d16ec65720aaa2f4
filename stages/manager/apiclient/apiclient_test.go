package apiclient_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/pace-platform/pace/bus/bustest"
	"github.com/pace-platform/pace/internal/leaktest"
	"github.com/pace-platform/pace/schemas"
	"github.com/pace-platform/pace/stages/manager"
	"github.com/pace-platform/pace/stages/manager/apiclient"
)

// TestMain fails the package when a test leaves a goroutine behind.
func TestMain(m *testing.M) { leaktest.Main(m) }

// TestClientCallsTheJobAPI: against the manager's real API on a real bus,
// a job is submitted and read back, and the API's refusals come back as
// its error envelope, with their status and the field at fault.
func TestClientCallsTheJobAPI(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	m, err := manager.New(manager.Deps{Bus: bustest.Client(t, bustest.Server(t))}, manager.Config{Open: true})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	manager.NewAPI(m).Register(mux)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	c, err := apiclient.New(srv.URL+"/", "", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var created struct {
		JobID string `json:"job_id"`
	}
	doc := []byte(`{"name": "squares", "mode": "batch", "deadline": "1h", "workload": {"items": ["1", "2"]}}`)
	if err := c.Call(ctx, "POST", "/submissions", doc, &created); err != nil || created.JobID == "" {
		t.Fatalf("submit: %+v, %v", created, err)
	}
	var job struct {
		ID    string `json:"app_id"`
		Total int    `json:"total"`
	}
	if err := c.Call(ctx, "GET", "/submissions/"+created.JobID, nil, &job); err != nil || job.ID != created.JobID || job.Total != 2 {
		t.Errorf("job %s = %+v, %v; want its 2 items", created.JobID, job, err)
	}
	var apiErr *schemas.APIError
	if err := c.Call(ctx, "GET", "/submissions/nothing-here", nil, nil); !errors.As(err, &apiErr) || apiErr.Code != http.StatusNotFound {
		t.Errorf("unknown job: err = %v, want a 404 APIError", err)
	}
	err = c.Call(ctx, "POST", "/submissions", []byte(`{"name": "x", "mode": "sideways", "workload": {"items": ["1"]}}`), nil)
	if !errors.As(err, &apiErr) || apiErr.Code != http.StatusBadRequest || !strings.Contains(apiErr.Message, "mode") {
		t.Errorf("bad mode: err = %v, want a 400 APIError naming the field", err)
	}
	for _, bad := range []struct {
		url     string
		timeout time.Duration
	}{{"ftp://pace", time.Second}, {"127.0.0.1:8080", time.Second}, {srv.URL, 0}} {
		if _, err := apiclient.New(bad.url, "", bad.timeout); !errors.Is(err, apiclient.ErrInvalid) {
			t.Errorf("New(%q, %s): err = %v, want ErrInvalid", bad.url, bad.timeout, err)
		}
	}
}
