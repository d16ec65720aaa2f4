package schemas

import (
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// MaxTokenLength bounds job and item identifiers, which become subject tokens
// and consumer names.
const MaxTokenLength = 128

// ValidToken reports whether s can be used as one subject token and inside a
// stream or consumer name: 1..MaxTokenLength characters of [A-Za-z0-9_-].
func ValidToken(s string) bool {
	if s == "" || len(s) > MaxTokenLength {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		ok := 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_'
		if !ok {
			return false
		}
	}
	return true
}

// validateToken appends an error when s is not a valid token.
func validateToken(errs field.ErrorList, path *field.Path, s string) field.ErrorList {
	switch {
	case s == "":
		return append(errs, field.Required(path, ""))
	case !ValidToken(s):
		return append(errs, field.Invalid(path, s, "must be 1-128 characters of letters, digits, '-' or '_'"))
	}
	return errs
}
