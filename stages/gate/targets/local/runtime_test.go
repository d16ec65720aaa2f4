package local_test

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/pace-platform/pace/stages/gate/targets/local"
)

// A replica that notes its start and its graceful stop in dir. The trap is
// set before the start is noted, so a SIGTERM right after the note finds it.
const graceful = `trap 'echo $$ >> "$DIR/stopped"; exit 0' TERM; echo $$ >> "$DIR/started"; echo $$ > "$DIR/$PACE_WORKER_ID"; while :; do sleep 0.05; done`

// A replica that ignores SIGTERM.
const stubborn = `trap '' TERM; echo $$ >> "$DIR/started"; while :; do sleep 0.05; done`

func newRuntime(t *testing.T, grace time.Duration) *local.Runtime {
	t.Helper()
	return startRuntime(t, local.Config{NATSURL: "nats://127.0.0.1:1", Grace: grace})
}

// startRuntime runs a runtime of cfg until the test ends.
func startRuntime(t *testing.T, cfg local.Config) *local.Runtime {
	t.Helper()
	r, err := local.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return r
}

func shell(dir, script string) local.Worker {
	return local.Worker{Job: "j1", Command: []string{"sh", "-c", script}, Env: map[string]string{"DIR": dir}}
}

func pids(t *testing.T, path string) []int {
	b, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var out []int
	for f := range strings.FieldsSeq(string(b)) {
		n, _ := strconv.Atoi(f)
		out = append(out, n)
	}
	return out
}

func alive(pid int) bool { return syscall.Kill(pid, 0) == nil }

// eventually polls cond until it holds, failing the test after two minutes:
// waits end as soon as cond holds, so a generous bound costs a passing test
// nothing, while processes started on a slow machine must not fail it (as
// bustest.Eventually).
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestScaleUpAndDownGracefully(t *testing.T) {
	dir := t.TempDir()
	r := newRuntime(t, time.Minute) // a slow machine's replicas still stop by SIGTERM, not SIGKILL
	w := shell(dir, graceful)
	if _, err := r.Scale(context.Background(), w, 3); err != nil {
		t.Fatal(err)
	}
	eventually(t, "3 replicas started", func() bool { return len(pids(t, filepath.Join(dir, "started"))) == 3 })
	if got := r.Replicas("j1"); got != 3 {
		t.Errorf("replicas = %d, want 3", got)
	}
	if _, err := r.Scale(context.Background(), w, 1); err != nil {
		t.Fatal(err)
	}
	eventually(t, "2 replicas stopped by SIGTERM", func() bool { return len(pids(t, filepath.Join(dir, "stopped"))) == 2 })
	eventually(t, "1 replica running", func() bool { return r.Running("j1") == 1 })
	// Scale-down stops the newest. A stopped replica has written "stopped"
	// from its TERM trap but may still be exiting: wait for it to be gone.
	for _, id := range []string{"j1-1", "j1-2"} {
		pid := pids(t, filepath.Join(dir, id))[0]
		eventually(t, "replica "+id+" gone", func() bool { return !alive(pid) })
	}
	if pid := pids(t, filepath.Join(dir, "j1-0"))[0]; !alive(pid) {
		t.Error("replica j1-0, the oldest, stopped; scale-down stops the newest")
	}
}

func TestCrashedReplicaIsRestarted(t *testing.T) {
	dir := t.TempDir()
	r := newRuntime(t, time.Second)
	if _, err := r.Scale(context.Background(), shell(dir, `echo $$ >> "$DIR/started"; exit 1`), 1); err != nil {
		t.Fatal(err)
	}
	eventually(t, "a restart after the crash", func() bool { return len(pids(t, filepath.Join(dir, "started"))) >= 2 })
	if got := r.Replicas("j1"); got != 1 {
		t.Errorf("replicas = %d, want 1 (a crash does not change the desired count)", got)
	}
}

// The restarts of a crashing replica back off on the runtime's clock: 1 s,
// then 2 s, … A fake clock that does not move holds the restart.
func TestRestartsBackOffOnTheClock(t *testing.T) {
	dir := t.TempDir()
	clk := clocktesting.NewFakeClock(time.Now())
	r := startRuntime(t, local.Config{NATSURL: "nats://127.0.0.1:1", Clock: clk})
	if _, err := r.Scale(context.Background(), shell(dir, `echo $$ >> "$DIR/started"; exit 1`), 1); err != nil {
		t.Fatal(err)
	}
	starts := func() int { return len(pids(t, filepath.Join(dir, "started"))) }
	for _, step := range []struct {
		wait  time.Duration // the backoff after the last crash
		after int           // starts once it has passed
	}{{time.Second, 2}, {2 * time.Second, 3}} {
		eventually(t, "the supervisor waiting to restart", clk.HasWaiters)
		n := starts()
		clk.Step(step.wait - time.Millisecond)
		if !clk.HasWaiters() || starts() != n {
			t.Fatalf("restarted before its %s backoff: %d starts", step.wait, starts())
		}
		clk.Step(time.Millisecond)
		eventually(t, "a restart after the backoff", func() bool { return starts() == step.after })
	}
}

func TestTerminateKillsAtOnce(t *testing.T) {
	dir := t.TempDir()
	r := newRuntime(t, time.Hour) // terminate must not wait for the grace period
	if _, err := r.Scale(context.Background(), shell(dir, stubborn), 2); err != nil {
		t.Fatal(err)
	}
	eventually(t, "2 replicas started", func() bool { return len(pids(t, filepath.Join(dir, "started"))) == 2 })
	r.Terminate("j1")
	for _, pid := range pids(t, filepath.Join(dir, "started")) {
		eventually(t, "replica "+strconv.Itoa(pid)+" killed", func() bool { return !alive(pid) })
	}
	if got := r.Replicas("j1"); got != 0 {
		t.Errorf("replicas after terminate = %d, want 0", got)
	}
}

func TestStubbornReplicaKilledAfterGrace(t *testing.T) {
	dir := t.TempDir()
	r := newRuntime(t, 200*time.Millisecond)
	w := shell(dir, stubborn)
	if _, err := r.Scale(context.Background(), w, 1); err != nil {
		t.Fatal(err)
	}
	eventually(t, "replica started", func() bool { return len(pids(t, filepath.Join(dir, "started"))) == 1 })
	if _, err := r.Scale(context.Background(), w, 0); err != nil {
		t.Fatal(err)
	}
	pid := pids(t, filepath.Join(dir, "started"))[0]
	eventually(t, "the stubborn replica killed after its grace", func() bool { return !alive(pid) })
}

func TestShutdownLeavesNoProcess(t *testing.T) {
	dir := t.TempDir()
	r, err := local.New(local.Config{NATSURL: "nats://127.0.0.1:1", Grace: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	if _, err := r.Scale(ctx, shell(dir, graceful), 2); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Scale(ctx, local.Worker{Job: "j2", Command: []string{"sh", "-c", stubborn}, Env: map[string]string{"DIR": dir}}, 1); err != nil {
		t.Fatal(err)
	}
	eventually(t, "3 replicas started", func() bool { return len(pids(t, filepath.Join(dir, "started"))) == 3 })
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	for _, pid := range pids(t, filepath.Join(dir, "started")) {
		if alive(pid) {
			t.Errorf("replica %d outlived the runtime", pid)
		}
	}
	if _, err := r.Scale(context.Background(), shell(dir, graceful), 1); err == nil {
		t.Error("Scale after shutdown succeeded, want ErrStopped")
	}
}

func TestScaleRejectsBadInput(t *testing.T) {
	r := newRuntime(t, time.Second)
	for _, tc := range []struct {
		w        local.Worker
		replicas int
	}{
		{local.Worker{Command: []string{"true"}}, 1},
		{local.Worker{Job: "j"}, 1},
		{local.Worker{Job: "j", Command: []string{"true"}}, -1},
		{local.Worker{Job: "j", Command: []string{"true"}}, 1000},
	} {
		if _, err := r.Scale(context.Background(), tc.w, tc.replicas); err == nil {
			t.Errorf("Scale(%+v, %d) succeeded, want an error", tc.w, tc.replicas)
		}
	}
}

// TestReplicasGetACleanEnvironment: a replica's command sees PATH, HOME,
// its job's variables and its own env, and none of Pace's other variables,
// which may hold secrets.
func TestReplicasGetACleanEnvironment(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("PACE_TOKEN", "s3cr3t-api-token")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "s3cr3t-cloud-key")
	t.Setenv("PACE_INFLUX_TOKEN", "s3cr3t-influx")
	t.Setenv("HOME", dir)
	r := newRuntime(t, time.Minute)
	w := shell(dir, `env > "$DIR/env.tmp" && mv "$DIR/env.tmp" "$DIR/env"; while :; do sleep 0.05; done`)
	w.Env["MY_SETTING"] = "mine"
	if _, err := r.Scale(context.Background(), w, 1); err != nil {
		t.Fatal(err)
	}
	var env string
	eventually(t, "the replica's environment written", func() bool {
		b, err := os.ReadFile(filepath.Join(dir, "env"))
		env = string(b)
		return err == nil
	})
	for _, want := range []string{"PATH=", "HOME=" + dir, "PACE_JOB=j1", "PACE_WORKER_ID=j1-0", "PACE_NATS_URL=", "MY_SETTING=mine", "DIR=" + dir} {
		if !strings.Contains(env, want) {
			t.Errorf("the replica's environment lacks %s:\n%s", want, env)
		}
	}
	if strings.Contains(env, "s3cr3t") {
		t.Errorf("a variable of Pace's own environment reached the replica:\n%s", env)
	}
}

// TestExecWorkerArguments: an exec worker runs `pace worker JOB --exec CMD`,
// with --exec-mode when the job sets one.
func TestExecWorkerArguments(t *testing.T) {
	dir := t.TempDir()
	fake := filepath.Join(dir, "pace")
	writeArgs := "#!/bin/sh\nprintf '%s\\n' \"$@\" > \"$DIR/$PACE_WORKER_ID.tmp\" && mv \"$DIR/$PACE_WORKER_ID.tmp\" \"$DIR/$PACE_WORKER_ID\"\nexec sleep 1000\n"
	if err := os.WriteFile(fake, []byte(writeArgs), 0o755); err != nil {
		t.Fatal(err)
	}
	r, err := local.New(local.Config{Binary: fake, NATSURL: "nats://127.0.0.1:1", Grace: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	tests := []struct {
		job, mode string
		want      string // the arguments after the worker's id, one per line
	}{
		{"item", "", "worker\nitem\n--exec\ncat\n"},
		{"lines", "lines", "worker\nlines\n--exec\ncat\n"},
	}
	for _, tt := range tests {
		if _, err := r.Scale(context.Background(), local.Worker{Job: tt.job, Exec: "cat", ExecMode: tt.mode, Env: map[string]string{"DIR": dir}}, 1); err != nil {
			t.Fatal(err)
		}
	}
	for _, tt := range tests {
		var args string
		eventually(t, "the arguments of "+tt.job, func() bool {
			b, err := os.ReadFile(filepath.Join(dir, tt.job+"-0"))
			args = string(b)
			return err == nil
		})
		if !strings.HasPrefix(args, tt.want) {
			t.Errorf("%s: arguments\n%s\nwant them to start with\n%s", tt.job, args, tt.want)
		}
		if got := strings.Contains(args, "--exec-mode\nlines\n"); got != (tt.mode != "") {
			t.Errorf("%s: --exec-mode lines given = %t, want %t:\n%s", tt.job, got, tt.mode != "", args)
		}
	}
}

// A replica gets the credential of the protocol it speaks only: the bus's
// token (JobEnv) or the Redis front's variables (RedisEnv), never both.
func TestReplicasGetTheirProtocolsCredentialsOnly(t *testing.T) {
	dir := t.TempDir()
	r := startRuntime(t, local.Config{NATSURL: "nats://127.0.0.1:1", Grace: time.Second,
		JobEnv:   func(job string) []string { return []string{"PACE_TOKEN=token-of-" + job} },
		RedisEnv: func(job string) []string { return []string{"REDIS_QUEUE=token-of-" + job} }})
	dump := `env > "$DIR/$PACE_JOB.tmp" && mv "$DIR/$PACE_JOB.tmp" "$DIR/$PACE_JOB"; while :; do sleep 0.05; done`
	for _, w := range []local.Worker{
		{Job: "native", Command: []string{"sh", "-c", dump}, Env: map[string]string{"DIR": dir}},
		{Job: "asperathos", Command: []string{"sh", "-c", dump}, Env: map[string]string{"DIR": dir}, Redis: true},
	} {
		if _, err := r.Scale(context.Background(), w, 1); err != nil {
			t.Fatal(err)
		}
	}
	for job, want := range map[string]struct{ has, lacks string }{
		"native":     {"PACE_TOKEN=token-of-native", "REDIS_QUEUE="},
		"asperathos": {"REDIS_QUEUE=token-of-asperathos", "PACE_TOKEN="},
	} {
		var env string
		eventually(t, job+"'s environment", func() bool {
			b, err := os.ReadFile(filepath.Join(dir, job))
			env = string(b)
			return err == nil
		})
		if !strings.Contains(env, want.has) || strings.Contains(env, want.lacks) {
			t.Errorf("%s's replica: environment\n%s\nwant %s and no %s…", job, env, want.has, want.lacks)
		}
	}
}
