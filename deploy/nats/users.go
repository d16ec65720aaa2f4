// Package nats holds the NATS server configuration of a distributed Pace
// installation, and gives its users to the embedded server of pace up, so
// that both run Pace's stages with the same permissions.
package nats

import (
	"crypto/rand"
	_ "embed"
	"encoding/base64"
	"fmt"
	"regexp"
	"strings"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/pace-platform/pace/schemas"
)

//go:embed auth.conf
var authConf string

var passwordVar = regexp.MustCompile(`\$(PACE_NATS_[A-Z]+_PASSWORD)`)

// Users returns the users of auth.conf for subject prefix p, each with a
// fresh random password (the second result, by user name).
func Users(p schemas.Prefix) ([]*server.User, map[string]string, error) {
	var defs strings.Builder
	seen := map[string]bool{}
	for _, m := range passwordVar.FindAllStringSubmatch(authConf, -1) {
		if !seen[m[1]] {
			seen[m[1]] = true
			fmt.Fprintf(&defs, "%s: %q\n", m[1], randomPassword())
		}
	}
	conf := authConf
	if p != schemas.DefaultPrefix {
		lower, upper := string(p), strings.ToUpper(string(p))
		conf = strings.NewReplacer(`"pace.`, `"`+lower+`.`, `KV_pace_`, `KV_`+lower+`_`, `$KV.pace_`, `$KV.`+lower+`_`,
			`$O.pace_`, `$O.`+lower+`_`, `OBJ_pace_`, `OBJ_`+lower+`_`, `.PACE_`, `.`+upper+`_`).Replace(conf)
	}
	var opts server.Options
	if err := opts.ProcessConfigString(defs.String() + conf); err != nil {
		return nil, nil, fmt.Errorf("auth.conf: %w", err)
	}
	passwords := make(map[string]string, len(opts.Users))
	for _, u := range opts.Users {
		passwords[u.Username] = u.Password
	}
	return opts.Users, passwords, nil
}

// CalloutAuthConf returns auth.conf with tenants by token turned on as its
// comment says: the auth_callout block uncommented, and the users
// pace-worker and pace-client, whose rights span every job, removed.
func CalloutAuthConf() (string, error) {
	var out []string
	inBlock, found, skipping := false, false, false
	for line := range strings.SplitSeq(authConf, "\n") {
		trimmed := strings.TrimSpace(line)
		switch {
		case trimmed == "# auth_callout {":
			inBlock, found = true, true
		case strings.HasPrefix(trimmed, "{user: pace-worker,") || strings.HasPrefix(trimmed, "{user: pace-client,"):
			skipping = true
		}
		if skipping {
			skipping = trimmed != "}}"
			continue
		}
		if inBlock {
			line = strings.Replace(line, "# ", "", 1)
			inBlock = trimmed != "# }"
		}
		out = append(out, line)
	}
	if !found {
		return "", fmt.Errorf("auth.conf has no commented auth_callout block")
	}
	return strings.Join(out, "\n"), nil
}

func randomPassword() string {
	b := make([]byte, 24)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}
