package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func runPace(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var out, errb bytes.Buffer
	code = run(context.Background(), args, strings.NewReader(""), &out, &errb)
	return out.String(), errb.String(), code
}

func TestAPFClassifyJSON(t *testing.T) {
	t.Parallel()
	out, errOut, code := runPace(t, "apf", "classify", "--user", "alice", "--verb", "get", "--resource", "pods", "--namespace", "default", "-o", "json")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var got map[string]any
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"flowSchema": "global-default", "priorityLevel": "global-default", "distinguisher": "alice",
		"hash": 17644606172554983095.0, "hand": []any{55.0, 62.0, 126.0, 125.0, 105.0, 1.0}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if !strings.Contains(out, `"hash":17644606172554983095`) {
		t.Errorf("hash not printed exactly: %s", out)
	}
}

func TestAPFClassifySeedExample(t *testing.T) {
	t.Parallel()
	out, errOut, code := runPace(t, "apf", "classify", "--user", "system:serviceaccount:default:default", "--group", "system:serviceaccounts",
		"--verb", "list", "--resource", "events", "--namespace", "default", "--config", "../../examples/flowcontrol/list-events-default-service-account.yaml", "-o", "json")
	if code != exitOK || !strings.Contains(out, `"flowSchema":"list-events-default-service-account","priorityLevel":"catch-all"`) {
		t.Errorf("exit %d, out %s, err %s", code, out, errOut)
	}
}

// TestAPFClassifyPolicyFileFlags checks --flowcontrol-config, its
// deprecated alias --config, and that PACE_CONFIG (read by neither) cannot
// override the file given.
func TestAPFClassifyPolicyFileFlags(t *testing.T) {
	t.Setenv("PACE_CONFIG", "/does/not/exist.yaml")
	for _, flag := range []string{"--flowcontrol-config", "--config"} {
		out, errOut, code := runPace(t, "apf", "classify", "--user", "system:serviceaccount:default:default", "--verb", "list", "--resource", "events",
			"--namespace", "default", flag, "../../examples/flowcontrol/list-events-default-service-account.yaml", "-o", "json")
		if code != exitOK || !strings.Contains(out, `"flowSchema":"list-events-default-service-account"`) {
			t.Errorf("%s: exit %d, out %s, err %s", flag, code, out, errOut)
		}
		if deprecated := strings.Contains(errOut, "flag deprecated"); deprecated != (flag == "--config") {
			t.Errorf("%s: deprecation notice shown = %v", flag, deprecated)
		}
		if !strings.HasPrefix(out, "{") {
			t.Errorf("%s: stdout %q is not JSON alone", flag, out)
		}
	}
}

// TestAPFClassifyIgnoresGenericEnv checks that the flags describing the
// request read no environment variable: PACE_USER and PACE_PATH are set by
// other tools, and PACE_PATH would make the request ambiguous.
func TestAPFClassifyIgnoresGenericEnv(t *testing.T) {
	for k, v := range map[string]string{"PACE_USER": "bob", "PACE_GROUP": "system:masters", "PACE_NAME": "x", "PACE_PATH": "/healthz", "PACE_NAMESPACE": "ns"} {
		t.Setenv(k, v)
	}
	out, errOut, code := runPace(t, "apf", "classify", "--resource", "pods", "-o", "json")
	if code != exitOK || !strings.Contains(out, `"flowSchema":"pace-anonymous","priorityLevel":"pace-anonymous","distinguisher":""`) {
		t.Errorf("exit %d, out %s, err %s; want the anonymous defaults", code, out, errOut)
	}
	help, _, _ := runPace(t, "apf", "classify", "--help")
	if strings.Contains(help, "PACE_USER") || !strings.Contains(help, "PACE_FLOWCONTROL_CONFIG") {
		t.Errorf("classify help names the wrong environment variables:\n%s", help)
	}
}

func TestAPFValidate(t *testing.T) {
	t.Parallel()
	for _, f := range []string{"health-for-strangers.yaml", "list-events-default-service-account.yaml"} {
		if _, errOut, code := runPace(t, "apf", "validate", "../../examples/flowcontrol/"+f); code != exitOK {
			t.Errorf("%s: exit %d: %s", f, code, errOut)
		}
	}
	bad := t.TempDir() + "/bad.yaml"
	writeFile(t, bad, "apiVersion: flowcontrol.apiserver.k8s.io/v1\nkind: PriorityLevelConfiguration\nmetadata: {name: p}\n"+
		"spec: {type: Limited, limited: {limitResponse: {type: Queue, queuing: {queues: 4, handSize: 5}}}}\n")
	out, _, code := runPace(t, "apf", "validate", bad)
	if code != exitFailure || !strings.Contains(out, "priorityLevelConfigurations[p].spec.limited.limitResponse.queuing.handSize") {
		t.Errorf("exit %d, out %q; want 1 and the field path", code, out)
	}
}

func TestAPFShardingTable(t *testing.T) {
	t.Parallel()
	out, _, code := runPace(t, "apf", "sharding-table", "--hand", "8", "--queues", "64", "--elephants", "1,4,16")
	want := "HandSize\tQueues\t1 elephant(s)\t4 elephant(s)\t16 elephant(s)\n8\t64\t2.25929199850899e-10\t0.0004886697053040446\t0.35935114681123076\n"
	if code != exitOK || out != want {
		t.Errorf("exit %d, out:\n%s\nwant:\n%s", code, out, want)
	}
}

func TestAPFDefaultsRoundTrip(t *testing.T) {
	t.Parallel()
	out, _, code := runPace(t, "apf", "defaults")
	if code != exitOK || strings.Count(out, "kind: FlowSchema") != 16 || strings.Count(out, "kind: PriorityLevelConfiguration") != 11 {
		t.Fatalf("exit %d, %d schemas, %d levels", code, strings.Count(out, "kind: FlowSchema"), strings.Count(out, "kind: PriorityLevelConfiguration"))
	}
	f := t.TempDir() + "/d.yaml"
	writeFile(t, f, out)
	if _, errOut, code := runPace(t, "apf", "validate", f); code != exitOK {
		t.Errorf("defaults do not validate: %s", errOut)
	}
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestClientCertificatesNeedHTTPS: the authenticators that verify client
// certificates are refused, naming the missing flags, on a plain HTTP server.
func TestClientCertificatesNeedHTTPS(t *testing.T) {
	t.Parallel()
	ca := "../../examples/flowcontrol/tokens.csv" // not read: the check comes first
	for _, args := range [][]string{
		{"up", "--client-ca-file", ca},
		{"gate", "proxy", "--upstream", "http://127.0.0.1:1", "--requestheader-client-ca-file", ca},
	} {
		_, errOut, code := runPace(t, args...)
		if code != exitUsage || !strings.Contains(errOut, "--tls-cert and --tls-key") {
			t.Errorf("%v: exit %d, %s; want a usage error asking for --tls-cert and --tls-key", args, code, errOut)
		}
	}
	_, errOut, code := runPace(t, "gate", "proxy", "--upstream", "http://127.0.0.1:1", "--impersonate")
	if code != exitUsage || !strings.Contains(errOut, "--upstream-token-file") {
		t.Errorf("--impersonate without an identity: exit %d, %s; want a usage error", code, errOut)
	}
}
