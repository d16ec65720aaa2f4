package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// guardTokens are a tenant, an admin and Prometheus' token.
const guardTokens = "alice-token,alice,1\nroot-token,root,0,\"pace:admins\"\nprom-token,prometheus,9,\"pace:metrics\"\n"

// patientClient bounds a request only so that a hang fails the test; what
// is awaited answers long before on any machine.
var patientClient = &http.Client{Timeout: 2 * time.Minute}

func request(t *testing.T, method, url, token, body string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(method, url, strings.NewReader(body))
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := patientClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close() //nolint:errcheck // test
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// slowBody opens a connection to the server at base and sends a POST to
// path whose body stops after one byte of the length it announces.
func slowBody(t *testing.T, base, path string) net.Conn {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	if _, err := fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: pace\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{", path); err != nil {
		t.Fatal(err)
	}
	return conn
}

// answer reads the status of the response on conn, waiting at most 2
// minutes; 0 when none came.
func answer(conn net.Conn) int {
	_ = conn.SetReadDeadline(time.Now().Add(2 * time.Minute))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		return 0
	}
	_ = resp.Body.Close()
	return resp.StatusCode
}

// dispatched reads apiserver_flowcontrol_dispatched_requests_total of a
// flow schema and its level from /metrics, as the admin.
func dispatched(t *testing.T, base, schema, level string) float64 {
	t.Helper()
	code, body := request(t, "GET", base+"/metrics", "root-token", "")
	if code != http.StatusOK {
		t.Fatalf("/metrics as the admin: %d", code)
	}
	series := fmt.Sprintf("apiserver_flowcontrol_dispatched_requests_total{flow_schema=%q,priority_level=%q} ", schema, level)
	for line := range strings.SplitSeq(body, "\n") {
		if v, ok := strings.CutPrefix(line, series); ok {
			n, _ := strconv.ParseFloat(v, 64)
			return n
		}
	}
	return 0
}

// levelLoad reads the requests waiting and executing on a priority level
// from the APF dump, as the admin.
func levelLoad(t *testing.T, base, level string) (waiting, executing int) {
	t.Helper()
	code, body := request(t, "GET", base+"/debug/api_priority_and_fairness/dump_priority_levels", "root-token", "")
	if code != http.StatusOK {
		t.Fatalf("dump as the admin: %d", code)
	}
	for line := range strings.SplitSeq(body, "\n") {
		cols := strings.Split(line, ",")
		if len(cols) > 5 && strings.TrimSpace(cols[0]) == level {
			waiting, _ = strconv.Atoi(strings.TrimSpace(cols[4]))
			executing, _ = strconv.Atoi(strings.TrimSpace(cols[5]))
			return waiting, executing
		}
	}
	t.Fatalf("no level %s in the dump:\n%s", level, body)
	return 0, 0
}

// TestUpServesNoSeatToSlowOrAnonymousClients replays the attacks of issue
// 17 item 4 against pace up --token-file: slow anonymous bodies once held
// every seat of pace-submissions until a tenant's submission got 429;
// /metrics and the APF dumps were served to anyone; POST /submissions.json
// was classified global-default and a log read that does not follow
// bypassed APF; the UI's streams were open to anyone.
func TestUpServesNoSeatToSlowOrAnonymousClients(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	tokens := filepath.Join(dir, "tokens.csv")
	if err := os.WriteFile(tokens, []byte(guardTokens), 0o600); err != nil {
		t.Fatal(err)
	}
	// 15 seats in all, so pace-submissions has 2 and anonymous callers 1.
	u := startUp(t, filepath.Join(dir, "data"), "--token-file", tokens, "--body-timeout", "1s",
		"--max-requests-inflight", "10", "--max-mutating-requests-inflight", "5")
	const job = `{"name":"guard","deadline":"1m","workload":{"items":["a","b"]}}`

	// 1. Slow anonymous bodies take no seat and wait in no queue (they held
	// pace-submissions' seats and filled its queues, until the borrowing
	// of idle levels' seats ran out too): alice's submission is served
	// beside sixty of them, each of which is answered, 408 once its time
	// is up or 429 beyond the anonymous bodies read at once.
	var slow []net.Conn
	for range 60 {
		slow = append(slow, slowBody(t, u.httpURL, "/submissions"))
	}
	if code, _ := request(t, "GET", u.httpURL+"/livez", "", ""); code != http.StatusOK { // the slow requests are in by now
		t.Fatalf("livez: %d", code)
	}
	for _, level := range []string{"pace-submissions", "pace-anonymous"} {
		if waiting, executing := levelLoad(t, u.httpURL, level); waiting+executing != 0 {
			t.Errorf("%s beside 60 slow bodies: %d waiting, %d executing; want none", level, waiting, executing)
		}
	}
	if code, body := request(t, "POST", u.httpURL+"/submissions", "alice-token", job); code != http.StatusAccepted {
		t.Errorf("alice's submission beside 60 slow anonymous bodies: %d %s, want 202", code, body)
	}
	codes := map[int]int{}
	for _, c := range slow {
		codes[answer(c)]++
	}
	if codes[http.StatusRequestTimeout] == 0 || codes[http.StatusRequestTimeout]+codes[http.StatusTooManyRequests] != len(slow) {
		t.Errorf("slow bodies answered %v, want each 408 or 429, some 408", codes)
	}

	// 4. Metrics and the APF dumps are the admins' (and Prometheus').
	for _, c := range []struct {
		path, token string
		want        int
	}{
		{"/metrics", "", http.StatusUnauthorized},
		{"/metrics", "alice-token", http.StatusForbidden},
		{"/metrics", "prom-token", http.StatusOK},
		{"/metrics", "root-token", http.StatusOK},
		{"/debug/api_priority_and_fairness/dump_requests", "", http.StatusUnauthorized},
		{"/debug/api_priority_and_fairness/dump_priority_levels", "alice-token", http.StatusForbidden},
		{"/debug/api_priority_and_fairness/dump_queues", "prom-token", http.StatusForbidden},
		{"/debug/api_priority_and_fairness/dump_priority_levels", "root-token", http.StatusOK},
		{"/ui/events/jobs", "", http.StatusUnauthorized},
	} {
		if code, body := request(t, "GET", u.httpURL+c.path, c.token, ""); code != c.want {
			t.Errorf("GET %s as %q: %d %.80s, want %d", c.path, c.token, code, body, c.want)
		}
	}

	// 5. Every route is classified by the route it serves.
	before := dispatched(t, u.httpURL, "pace-submissions", "pace-submissions")
	code, body := request(t, "POST", u.httpURL+"/submissions.json", "alice-token", job)
	if code != http.StatusAccepted {
		t.Fatalf("POST /submissions.json: %d %s", code, body)
	}
	if got := dispatched(t, u.httpURL, "pace-submissions", "pace-submissions") - before; got != 1 {
		t.Errorf("POST /submissions.json dispatched %v times on pace-submissions, want 1", got)
	}
	var created struct {
		ID string `json:"job_id"`
	}
	if err := json.Unmarshal([]byte(body), &created); err != nil {
		t.Fatalf("POST /submissions.json: %v %s", err, body)
	}
	id := created.ID
	before = dispatched(t, u.httpURL, "pace-reads", "pace-reads")
	if code, body := request(t, "GET", u.httpURL+"/submissions/"+id+"/log", "alice-token", ""); code != http.StatusOK {
		t.Fatalf("GET log: %d %s", code, body)
	}
	if got := dispatched(t, u.httpURL, "pace-reads", "pace-reads") - before; got != 1 {
		t.Errorf("a log read that does not follow dispatched %v times on pace-reads, want 1", got)
	}
	u.stop(t)
}
