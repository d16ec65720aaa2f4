package auth

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
)

// ErrInvalidToken is returned by TokenFile.Authenticate for a bearer token
// that is not in the file.
var ErrInvalidToken = errors.New("invalid bearer token")

// TokenFile authenticates bearer tokens listed in a CSV file of
// kube-apiserver's --token-auth-file format, one user per line:
//
//	token,user,uid,"group1,group2"
//
// The groups column is optional. Lines starting with # are comments.
type TokenFile struct {
	users map[[sha256.Size]byte]User
}

// LoadTokenFile reads a token file.
func LoadTokenFile(path string) (*TokenFile, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("token file: %w", err)
	}
	defer f.Close() //nolint:errcheck // read-only
	t, err := ParseTokens(f)
	if err != nil {
		return nil, fmt.Errorf("token file %s: %w", path, err)
	}
	return t, nil
}

// ParseTokens reads token-file content from r. Errors name the line.
func ParseTokens(r io.Reader) (*TokenFile, error) {
	cr := csv.NewReader(r)
	cr.FieldsPerRecord = -1
	cr.Comment = '#'
	cr.TrimLeadingSpace = true
	t := &TokenFile{users: map[[sha256.Size]byte]User{}}
	for {
		rec, err := cr.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
		line, _ := cr.FieldPos(0)
		if len(rec) < 3 {
			return nil, fmt.Errorf("line %d: want token,user,uid[,\"groups\"], got %d columns", line, len(rec))
		}
		token, name, uid := strings.TrimSpace(rec[0]), strings.TrimSpace(rec[1]), strings.TrimSpace(rec[2])
		if token == "" || name == "" {
			return nil, fmt.Errorf("line %d: token and user must not be empty", line)
		}
		u := User{Name: name, UID: uid}
		if len(rec) > 3 {
			for g := range strings.SplitSeq(rec[3], ",") {
				if g = strings.TrimSpace(g); g != "" {
					u.Groups = append(u.Groups, g)
				}
			}
		}
		u.Groups = append(u.Groups, Authenticated)
		key := sha256.Sum256([]byte(token))
		if _, dup := t.users[key]; dup {
			return nil, fmt.Errorf("line %d: duplicate token", line)
		}
		t.users[key] = u
	}
	return t, nil
}

// Authenticate implements Authenticator for bearer tokens. Tokens are
// compared by hash, in constant time.
func (t *TokenFile) Authenticate(r *http.Request) (User, bool, error) {
	token, ok := bearerToken(r)
	if !ok {
		return User{}, false, nil
	}
	key := sha256.Sum256([]byte(token))
	for k, u := range t.users {
		if subtle.ConstantTimeCompare(k[:], key[:]) == 1 {
			return u, true, nil
		}
	}
	return User{}, true, ErrInvalidToken
}

// Lookup returns the user of a token, for credentials that arrive outside an
// Authorization header (e.g. a login form).
func (t *TokenFile) Lookup(token string) (User, bool) {
	r := &http.Request{Header: http.Header{"Authorization": {"Bearer " + token}}}
	u, ok, err := t.Authenticate(r)
	return u, ok && err == nil
}
