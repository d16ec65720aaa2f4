// Package nats holds the NATS server configuration of a distributed Pace
// installation, and gives its users to the embedded server of pace up, so
// that both run Pace's stages with the same permissions: those of
// natsauth.StageUsers, which auth.conf must grant exactly (a test checks).
package nats

import (
	"crypto/rand"
	"encoding/base64"
	"maps"
	"slices"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/pace-platform/pace/bus/natsauth"
	"github.com/pace-platform/pace/schemas"
)

// Users returns the users of auth.conf for subject prefix p, Pace's stages
// and pace-admin, with the rights of natsauth.StageUsers, each with a fresh
// random password (the second result, by user name), in the order of
// their names. Tenants and workers are no users: they log in by token,
// through the auth callout (natsauth.ServerAuth sets it up for the
// embedded server).
func Users(p schemas.Prefix) ([]*server.User, map[string]string, error) {
	rights := natsauth.StageUsers(p)
	names := slices.Sorted(maps.Keys(rights))
	users := make([]*server.User, 0, len(names))
	passwords := make(map[string]string, len(names))
	for _, name := range names {
		r := rights[name]
		perms := &server.Permissions{
			Publish:   &server.SubjectPermission{Allow: r.Publish},
			Subscribe: &server.SubjectPermission{Allow: r.Subscribe},
		}
		if r.Responses {
			perms.Response = &server.ResponsePermission{MaxMsgs: server.DEFAULT_ALLOW_RESPONSE_MAX_MSGS,
				Expires: server.DEFAULT_ALLOW_RESPONSE_EXPIRATION}
		}
		passwords[name] = randomPassword()
		users = append(users, &server.User{Username: name, Password: passwords[name], Permissions: perms})
	}
	return users, passwords, nil
}

func randomPassword() string {
	b := make([]byte, 24)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}
