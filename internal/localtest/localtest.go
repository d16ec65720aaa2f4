// Package localtest helps tests run programs in the local runtime's
// sandboxes.
package localtest

import "os"

// ProgramDir creates a directory for programs that sandboxed workers run,
// as an installed program's would be: every user may reach it, and it is
// outside /tmp, which a sandbox replaces with its own. It is under /run
// where the test may write there (as root), else under the default
// temporary directory. The caller removes it.
func ProgramDir(pattern string) (string, error) {
	dir, err := os.MkdirTemp("/run", pattern)
	if err != nil {
		dir, err = os.MkdirTemp("", pattern)
	}
	if err != nil {
		return "", err
	}
	return dir, os.Chmod(dir, 0o755)
}
