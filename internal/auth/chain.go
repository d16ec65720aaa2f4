package auth

import (
	"errors"
	"net/http"
)

// Chain returns an authenticator trying as in order: the first that
// identifies the caller wins. When none does and some found credentials
// invalid, the request is refused with their errors; when none found
// credentials, the caller is anonymous. So an unknown bearer token of a token
// file is still offered to a TokenReview further down.
func Chain(as ...Authenticator) Authenticator { return chain(as) }

type chain []Authenticator

func (c chain) Authenticate(r *http.Request) (User, bool, error) {
	var errs []error
	for _, a := range c {
		u, ok, err := a.Authenticate(r)
		switch {
		case ok && err == nil:
			return u, true, nil
		case err != nil:
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return User{}, true, errors.Join(errs...)
	}
	return User{}, false, nil
}
