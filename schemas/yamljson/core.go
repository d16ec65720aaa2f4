package yamljson

import (
	"encoding/json"
	"math/big"
	"regexp"
	"strings"

	"go.yaml.in/yaml/v3"
)

// YAML 1.2 core schema patterns (https://yaml.org/spec/1.2.2/#1023-core-schema).
var (
	coreNull  = regexp.MustCompile(`^(null|Null|NULL|~|)$`)
	coreBool  = regexp.MustCompile(`^(true|True|TRUE|false|False|FALSE)$`)
	coreInt   = regexp.MustCompile(`^[-+]?[0-9]+$`)
	coreOct   = regexp.MustCompile(`^0o[0-7]+$`)
	coreHex   = regexp.MustCompile(`^0x[0-9a-fA-F]+$`)
	coreFloat = regexp.MustCompile(`^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$`)
)

// coreScalar is the JSON of a scalar resolved by the YAML 1.2 core schema.
func coreScalar(n *yaml.Node) string {
	s := n.Value
	quoted := n.Style&(yaml.DoubleQuotedStyle|yaml.SingleQuotedStyle|yaml.LiteralStyle|yaml.FoldedStyle) != 0
	if quoted || n.Style&yaml.TaggedStyle != 0 && n.Tag == "!!str" {
		return jsonString(s)
	}
	switch {
	case coreNull.MatchString(s):
		return "null"
	case coreBool.MatchString(s):
		return strings.ToLower(s)
	case coreOct.MatchString(s):
		return baseInt(s[2:], 8)
	case coreHex.MatchString(s):
		return baseInt(s[2:], 16)
	case coreInt.MatchString(s), coreFloat.MatchString(s):
		return jsonNumber(s)
	}
	return jsonString(s)
}

func jsonString(s string) string {
	b, _ := json.Marshal(s) // a string always encodes
	return string(b)
}

// baseInt writes digits in base as a decimal JSON number.
func baseInt(digits string, base int) string {
	var v big.Int
	v.SetString(digits, base) // the pattern matched: cannot fail
	return v.String()
}

// jsonNumber rewrites a core-schema number in JSON's grammar without
// changing its value or precision: no '+' sign or leading zeros (010 is
// ten), a 0 before a leading '.', no '.' without digits after it.
func jsonNumber(s string) string {
	sign := ""
	switch s[0] {
	case '-':
		sign, s = "-", s[1:]
	case '+':
		s = s[1:]
	}
	mant, exp := s, ""
	if i := strings.IndexAny(s, "eE"); i >= 0 {
		mant, exp = s[:i], s[i:]
	}
	whole, frac, _ := strings.Cut(mant, ".")
	whole = strings.TrimLeft(whole, "0")
	if whole == "" {
		whole = "0"
	}
	if frac != "" {
		frac = "." + frac
	}
	return sign + whole + frac + exp
}
