package natsauth

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/pace-platform/pace/schemas"
)

// jobTokenPrefix starts every job token: job:<job>:<mac>.
const jobTokenPrefix = "job:"

// JobTokens mints and checks the tokens of jobs' workers: an HMAC of the
// job's id under a key only Pace holds, so a token opens one job and cannot
// be forged or widened to another.
type JobTokens struct {
	key []byte
}

// NewJobTokens returns tokens keyed by key, which must have at least 32 bytes.
func NewJobTokens(key []byte) (*JobTokens, error) {
	if len(key) < 32 {
		return nil, fmt.Errorf("job token key: %d bytes, want at least 32", len(key))
	}
	return &JobTokens{key: key}, nil
}

// ReadJobTokens reads the key from file: at least 32 bytes, shared by the
// processes that mint and check tokens (pace stage gate and manager).
func ReadJobTokens(file string) (*JobTokens, error) {
	key, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("job token key: %w", err)
	}
	return NewJobTokens(key)
}

// LoadJobTokens reads the key from file, creating the file with a random
// key (mode 0600) if it does not exist, so that tokens outlive a restart.
func LoadJobTokens(file string) (*JobTokens, error) {
	key, err := os.ReadFile(file)
	if errors.Is(err, os.ErrNotExist) {
		key = make([]byte, 32)
		_, _ = rand.Read(key)
		f, cerr := os.OpenFile(file, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if cerr != nil {
			return nil, fmt.Errorf("job token key: %w", cerr)
		}
		_, err = f.Write(key)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		return nil, fmt.Errorf("job token key: %w", err)
	}
	return NewJobTokens(key)
}

// Mint returns the token of job's workers.
func (t *JobTokens) Mint(job string) string { return jobTokenPrefix + job + ":" + t.mac(job) }

// Job returns the job a token opens, and false for anything else.
func (t *JobTokens) Job(token string) (string, bool) {
	job, ok := TokenJob(token)
	if !ok || !hmac.Equal([]byte(token[len(jobTokenPrefix)+len(job)+1:]), []byte(t.mac(job))) {
		return "", false
	}
	return job, true
}

func (t *JobTokens) mac(job string) string {
	h := hmac.New(sha256.New, t.key)
	h.Write([]byte("pace job worker\x00" + job))
	return base64.RawURLEncoding.EncodeToString(h.Sum(nil))
}

// TokenJob returns the job a token names, without checking its MAC: for
// routing only, since only the server's check proves the token.
func TokenJob(token string) (string, bool) {
	rest, ok := strings.CutPrefix(token, jobTokenPrefix)
	if !ok {
		return "", false
	}
	job, mac, ok := strings.Cut(rest, ":")
	return job, ok && mac != "" && schemas.ValidToken(job)
}
