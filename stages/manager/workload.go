package manager

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"unicode/utf8"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/pace-platform/pace/schemas"
)

// loadWorkload returns a batch job's items in order: inline ones as given
// (blank ones skipped), or the lines of a file or URL. p is the field path
// errors are reported under.
func (m *Stage) loadWorkload(ctx context.Context, w schemas.Workload, p *field.Path) ([]string, *field.Error) {
	var (
		data []byte
		ferr *field.Error
	)
	switch {
	case len(w.Items) > 0:
		items := make([]string, 0, len(w.Items))
		for _, it := range w.Items {
			if strings.TrimSpace(it) != "" {
				items = append(items, it)
			}
		}
		if len(items) == 0 {
			return nil, field.Invalid(p.Child("items"), len(w.Items), "every item is blank")
		}
		return items, nil
	case w.URL != "":
		data, ferr = m.fetch(ctx, w.URL, p.Child("url"))
	case w.File != "":
		data, ferr = m.readFile(w.File, p.Child("file"))
	default:
		return nil, nil
	}
	if ferr != nil {
		return nil, ferr
	}
	if !utf8.Valid(data) || bytes.IndexByte(data, 0) >= 0 {
		return nil, field.Invalid(p, "", "the workload is not text")
	}
	items := splitLines(string(data))
	if len(items) == 0 {
		return nil, field.Invalid(p, "", "the workload has no items")
	}
	return items, nil
}

// splitLines returns the non-blank lines of s in order; a last line without
// a newline is kept (Asperathos drops it) and "\r\n" endings are accepted.
func splitLines(s string) []string {
	var out []string
	for line := range strings.Lines(s) {
		if payload, ok := schemas.ItemLine(line); ok {
			out = append(out, payload)
		}
	}
	return out
}

func (m *Stage) fetch(ctx context.Context, url string, p *field.Path) ([]byte, *field.Error) {
	ctx, cancel := context.WithTimeout(ctx, m.cfg.WorkloadTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, field.Invalid(p, url, err.Error())
	}
	resp, err := m.httpClient.Do(req)
	if err != nil {
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return nil, field.Invalid(p, url, fmt.Sprintf("unreachable: no answer within %s", m.cfg.WorkloadTimeout))
		}
		return nil, field.Invalid(p, url, "unreachable: "+err.Error())
	}
	defer resp.Body.Close() //nolint:errcheck // read-only
	if resp.StatusCode != http.StatusOK {
		return nil, field.Invalid(p, url, "download failed: "+resp.Status)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "" {
		mt, _, _ := mime.ParseMediaType(ct)
		if !strings.HasPrefix(mt, "text/") && mt != "application/octet-stream" && mt != "application/json" {
			return nil, field.Invalid(p, url, fmt.Sprintf("not text: content type %q", mt))
		}
	}
	if resp.ContentLength > m.cfg.MaxWorkloadBytes {
		return nil, field.Invalid(p, url, fmt.Sprintf("too large: %d bytes, the limit is %d", resp.ContentLength, m.cfg.MaxWorkloadBytes))
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, m.cfg.MaxWorkloadBytes+1))
	if err != nil {
		return nil, field.Invalid(p, url, "download failed: "+err.Error())
	}
	if int64(len(data)) > m.cfg.MaxWorkloadBytes {
		return nil, field.Invalid(p, url, fmt.Sprintf("too large: more than %d bytes", m.cfg.MaxWorkloadBytes))
	}
	return data, nil
}

// readFile reads a workload file under the configured workload directory.
// Clients with a local file send its items inline ('pace submit' does).
func (m *Stage) readFile(name string, p *field.Path) ([]byte, *field.Error) {
	if m.cfg.WorkloadDir == "" {
		return nil, field.Forbidden(p, "this server reads no workload files: send the items inline (pace submit does)")
	}
	if !filepath.IsLocal(name) {
		return nil, field.Invalid(p, name, "must be a relative path inside the workload directory")
	}
	f, err := os.Open(filepath.Join(m.cfg.WorkloadDir, name))
	if err != nil {
		return nil, field.Invalid(p, name, "cannot read: "+err.Error())
	}
	defer f.Close() //nolint:errcheck // read-only
	data, err := io.ReadAll(io.LimitReader(f, m.cfg.MaxWorkloadBytes+1))
	if err != nil {
		return nil, field.Invalid(p, name, "cannot read: "+err.Error())
	}
	if int64(len(data)) > m.cfg.MaxWorkloadBytes {
		return nil, field.Invalid(p, name, fmt.Sprintf("too large: more than %d bytes", m.cfg.MaxWorkloadBytes))
	}
	return data, nil
}
