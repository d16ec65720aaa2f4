package auth

import (
	"crypto/x509"
	"net/http"
	"net/url"
	"slices"
	"strings"
)

// Default identity headers of a front proxy (kube-apiserver's
// --requestheader-* defaults).
var (
	DefaultUserHeaders   = []string{"X-Remote-User"}
	DefaultGroupHeaders  = []string{"X-Remote-Group"}
	DefaultExtraPrefixes = []string{"X-Remote-Extra-"}
)

// RequestHeader trusts the identity headers a front proxy sets, and only
// from it: the request's client certificate must verify against Roots (the
// front proxy's CA, --requestheader-client-ca-file) and, when AllowedNames is
// set, have one of them as its common name. The user is the first non-empty
// of UserHeaders, the groups every value of GroupHeaders, the extras the
// headers starting with one of ExtraPrefixes (the rest of the name, lower
// case and unescaped, is the key). A request from anyone else is not
// recognised, and its identity headers mean nothing: StripIdentity removes them.
type RequestHeader struct {
	Roots                                    *x509.CertPool
	AllowedNames                             []string
	UserHeaders, GroupHeaders, ExtraPrefixes []string
}

// Authenticate implements Authenticator.
func (h RequestHeader) Authenticate(r *http.Request) (User, bool, error) {
	cert, err := verifiedPeer(r, h.Roots)
	if cert == nil || err != nil || (len(h.AllowedNames) > 0 && !slices.Contains(h.AllowedNames, cert.Subject.CommonName)) {
		return User{}, false, nil // not the front proxy: another authenticator may know the certificate
	}
	var u User
	for _, name := range h.UserHeaders {
		if u.Name = strings.TrimSpace(r.Header.Get(name)); u.Name != "" {
			break
		}
	}
	if u.Name == "" {
		return User{}, false, nil
	}
	for _, name := range h.GroupHeaders {
		u.Groups = append(u.Groups, r.Header.Values(name)...)
	}
	u.Groups = append(u.Groups, Authenticated)
	for name, values := range r.Header {
		for _, prefix := range h.ExtraPrefixes {
			key, ok := cutPrefixFold(name, prefix)
			if !ok || key == "" {
				continue
			}
			if k, err := url.PathUnescape(strings.ToLower(key)); err == nil {
				key = k
			}
			if u.Extra == nil {
				u.Extra = map[string][]string{}
			}
			u.Extra[key] = append(u.Extra[key], values...)
		}
	}
	return u, true, nil
}

// StripIdentity removes from h the identity headers of a front proxy (the
// defaults, and rh's when given) and every Impersonate-* header: after
// authentication they are either consumed or forged, and passed on they
// could name someone else to an upstream that trusts the sender.
func StripIdentity(h http.Header, rh *RequestHeader) {
	users, groups, prefixes := DefaultUserHeaders, DefaultGroupHeaders, DefaultExtraPrefixes
	if rh != nil {
		users, groups, prefixes = slices.Concat(users, rh.UserHeaders), slices.Concat(groups, rh.GroupHeaders), slices.Concat(prefixes, rh.ExtraPrefixes)
	}
	for _, name := range slices.Concat(users, groups) {
		h.Del(name)
	}
	for name := range h {
		if _, ok := cutPrefixFold(name, "Impersonate-"); ok {
			h.Del(name)
			continue
		}
		for _, prefix := range prefixes {
			if _, ok := cutPrefixFold(name, prefix); ok {
				h.Del(name)
			}
		}
	}
}

// cutPrefixFold is strings.CutPrefix ignoring case.
func cutPrefixFold(s, prefix string) (string, bool) {
	if len(s) < len(prefix) || !strings.EqualFold(s[:len(prefix)], prefix) {
		return s, false
	}
	return s[len(prefix):], true
}
