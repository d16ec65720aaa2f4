package nats_test

import (
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/pace-platform/pace/bus/natsauth"
	"github.com/pace-platform/pace/schemas"
)

// TestAuthConfGrantsTheStageUsersRights checks auth.conf, and its copy
// under deploy/kubernetes, against natsauth.StageUsers, the one source of
// the stage users' rights (pace up's embedded server takes them from it):
// each user is granted exactly the subjects listed there, denied nothing
// else by a deny list, and may answer requests only when listed so.
func TestAuthConfGrantsTheStageUsersRights(t *testing.T) {
	want := natsauth.StageUsers(schemas.DefaultPrefix)
	for _, path := range []string{"auth.conf", "../kubernetes/base/nats/auth.conf"} {
		t.Run(path, func(t *testing.T) {
			conf, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			users := parseUsers(t, string(conf))
			if len(users) != len(want) {
				t.Errorf("%d users, want %d: those of natsauth.StageUsers", len(users), len(want))
			}
			for _, u := range users {
				r, ok := want[u.Username]
				if !ok {
					t.Errorf("%s: not a user of natsauth.StageUsers", u.Username)
					continue
				}
				p := u.Permissions
				check := func(what string, got *server.SubjectPermission, want []string) {
					var allow []string
					if got != nil {
						allow = got.Allow
						if len(got.Deny) > 0 {
							t.Errorf("%s %s: deny list %v; the rights are allow-lists", u.Username, what, got.Deny)
						}
					}
					if missing, extra := diff(want, allow); len(missing)+len(extra) > 0 {
						t.Errorf("%s %s: auth.conf lacks %v and has %v beyond natsauth.StageUsers", u.Username, what, missing, extra)
					}
				}
				check("publish", p.Publish, r.Publish)
				check("subscribe", p.Subscribe, r.Subscribe)
				if (p.Response != nil) != r.Responses {
					t.Errorf("%s: allow_responses %v, want %v", u.Username, p.Response != nil, r.Responses)
				}
			}
		})
	}
}

// parseUsers reads the users of an auth.conf, its variables set.
func parseUsers(t *testing.T, conf string) []*server.User {
	t.Helper()
	_, issuer, err := natsauth.NewIssuer()
	if err != nil {
		t.Fatal(err)
	}
	defs := fmt.Sprintf("PACE_NATS_CALLOUT_ISSUER: %q\n", issuer)
	seen := map[string]bool{}
	for _, m := range regexp.MustCompile(`\$(PACE_NATS_[A-Z]+_PASSWORD)`).FindAllStringSubmatch(conf, -1) {
		if !seen[m[1]] {
			seen[m[1]] = true
			defs += fmt.Sprintf("%s: %q\n", m[1], strings.ToLower(m[1]))
		}
	}
	var opts server.Options
	if err := opts.ProcessConfigString(defs + conf); err != nil {
		t.Fatal(err)
	}
	return opts.Users
}

// diff returns what of want got lacks, and what got has beyond want.
func diff(want, got []string) (missing, extra []string) {
	for _, s := range want {
		if !slices.Contains(got, s) {
			missing = append(missing, s)
		}
	}
	for _, s := range got {
		if !slices.Contains(want, s) {
			extra = append(extra, s)
		}
	}
	return missing, extra
}
