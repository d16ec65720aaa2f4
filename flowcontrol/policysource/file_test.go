package policysource_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	flowcontrolv1 "k8s.io/api/flowcontrol/v1"

	"github.com/pace-platform/pace/flowcontrol/policy"
	"github.com/pace-platform/pace/flowcontrol/policysource"
)

func schemaYAML(name string) string {
	return `apiVersion: flowcontrol.apiserver.k8s.io/v1
kind: FlowSchema
metadata: {name: ` + name + `}
spec:
  matchingPrecedence: 1000
  priorityLevelConfiguration: {name: exempt}
  rules:
  - nonResourceRules: [{nonResourceURLs: ["/healthz"], verbs: ["*"]}]
    subjects: [{kind: Group, group: {name: "system:unauthenticated"}}]
`
}

// TestFileReloadsOnChange: the file is applied over the defaults at once,
// again when its content changes, and a file that no longer loads leaves the
// policy in force.
func TestFileReloadsOnChange(t *testing.T) {
	path := filepath.Join(t.TempDir(), "apf.yaml")
	write := func(s string) {
		if err := os.WriteFile(path, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(schemaYAML("first"))
	applied := make(chan policy.Objects, 10)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	src := &policysource.File{Path: path, Every: 10 * time.Millisecond}
	go func() {
		done <- src.Run(ctx, func(_ context.Context, objs policy.Objects) error { applied <- objs; return nil })
	}()
	next := func() policy.Objects {
		t.Helper()
		select {
		case objs := <-applied:
			return objs
		case <-time.After(10 * time.Second):
			t.Fatal("nothing applied")
			return policy.Objects{}
		}
	}
	has := func(objs policy.Objects, name string) bool {
		return slices.ContainsFunc(objs.FlowSchemas, func(fs *flowcontrolv1.FlowSchema) bool { return fs.Name == name })
	}
	first := next()
	if !has(first, "first") || !has(first, "exempt") {
		t.Fatalf("first policy lacks the file's schema or the defaults: %d schemas", len(first.FlowSchemas))
	}
	write("kind: FlowSchema\nspec: {bad")
	write(schemaYAML("second")) // may be read before or after the bad content: only it is applied
	if second := next(); !has(second, "second") || has(second, "first") {
		t.Errorf("after the change: first %v, second %v", has(second, "first"), has(second, "second"))
	}
	write("kind: FlowSchema\nspec: {bad")
	time.Sleep(100 * time.Millisecond) // several reads of the broken file
	select {
	case objs := <-applied:
		t.Errorf("a broken file was applied: %d schemas", len(objs.FlowSchemas))
	default:
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run after cancel: %v", err)
	}
}

// TestFileMissingAtFirst: a file that cannot be read at first is an error.
func TestFileMissingAtFirst(t *testing.T) {
	src := &policysource.File{Path: filepath.Join(t.TempDir(), "nope.yaml")}
	if err := src.Run(context.Background(), func(context.Context, policy.Objects) error { return nil }); err == nil {
		t.Error("Run with a missing file: nil error")
	}
}
