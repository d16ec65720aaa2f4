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
	"github.com/nats-io/nkeys"

	"github.com/pace-platform/pace/schemas"
)

//go:embed auth.conf
var authConf string

var passwordVar = regexp.MustCompile(`\$(PACE_NATS_[A-Z]+_PASSWORD)`)

// calloutIssuerVar holds the public key of the account that signs the auth
// callout's answers.
const calloutIssuerVar = "PACE_NATS_CALLOUT_ISSUER"

// Users returns the users of auth.conf for subject prefix p, Pace's stages
// and pace-admin, each with a fresh random password (the second result, by
// user name). Tenants and workers are no users: they log in by token,
// through the auth callout (natsauth.ServerAuth sets it up for the embedded
// server).
func Users(p schemas.Prefix) ([]*server.User, map[string]string, error) {
	// auth.conf's callout needs an issuer to parse; the users do not
	// depend on it.
	issuer, err := nkeys.CreateAccount()
	if err != nil {
		return nil, nil, err
	}
	pub, err := issuer.PublicKey()
	if err != nil {
		return nil, nil, err
	}
	var defs strings.Builder
	fmt.Fprintf(&defs, "%s: %q\n", calloutIssuerVar, pub)
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

func randomPassword() string {
	b := make([]byte, 24)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}
