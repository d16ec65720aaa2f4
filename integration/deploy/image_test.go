package deploy

import (
	"archive/tar"
	"bufio"
	"bytes"
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/pace-platform/pace/internal/localtest"
)

// nonRootUID is the uid of the image (distroless's nonroot user).
const nonRootUID = 65532

// dockerfile is what the tests read from the Dockerfile: the build stage's
// environment and go build command, and the final stage's instructions.
type dockerfile struct {
	goVersion string   // ARG GO_VERSION
	env       []string // ENV of the build stage, KEY=VALUE
	build     string   // the shell command of the RUN that calls go build
	final     []string // instructions of the last stage, joined lines
}

var runFlags = regexp.MustCompile(`^(--[a-z]+=\S+\s+)*`)

func parseDockerfile(t *testing.T) dockerfile {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(repo, "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	var d dockerfile
	stages := 0
	var line strings.Builder
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		text := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(text, "#") || text == "" {
			continue
		}
		if cont, ok := strings.CutSuffix(text, `\`); ok {
			line.WriteString(cont + " ")
			continue
		}
		line.WriteString(text)
		instr, args, _ := strings.Cut(line.String(), " ")
		line.Reset()
		switch instr = strings.ToUpper(instr); {
		case instr == "FROM":
			stages++
			d.final = nil
		case instr == "ARG" && strings.HasPrefix(args, "GO_VERSION="):
			d.goVersion = strings.TrimPrefix(args, "GO_VERSION=")
		case instr == "ENV" && stages == 1:
			d.env = append(d.env, strings.Fields(args)...)
		case instr == "RUN" && stages == 1 && strings.Contains(args, "go build"):
			d.build = runFlags.ReplaceAllString(args, "")
		}
		d.final = append(d.final, instr+" "+args)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if stages != 2 || d.build == "" {
		t.Fatalf("Dockerfile: want a build stage with a RUN go build and a final stage, got %d stages, build %q", stages, d.build)
	}
	return d
}

// TestDockerfileImage checks the final stage: a distroless static base, the
// binary alone, a numeric non-root user and pace as the entrypoint; and that
// the builder's Go is the one go.mod asks for.
func TestDockerfileImage(t *testing.T) {
	d := parseDockerfile(t)
	data, err := os.ReadFile(filepath.Join(repo, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	goMod := "none"
	if m := regexp.MustCompile(`(?m)^go (\S+)$`).FindSubmatch(data); m != nil {
		goMod = string(m[1])
	}
	if d.goVersion != goMod {
		t.Errorf("Dockerfile GO_VERSION = %q, go.mod's go directive is %s", d.goVersion, goMod)
	}
	for _, want := range []string{"CGO_ENABLED=0", "GOTOOLCHAIN=local"} {
		if !strings.Contains(strings.Join(d.env, " "), want) {
			t.Errorf("build stage ENV %v lacks %s", d.env, want)
		}
	}
	want := []string{
		"FROM gcr.io/distroless/static-debian12:nonroot",
		"COPY --from=build /out/pace /pace",
		fmt.Sprintf("USER %d:%d", nonRootUID, nonRootUID),
		"EXPOSE 8080",
		`ENTRYPOINT ["/pace"]`,
	}
	if strings.Join(d.final, "\n") != strings.Join(want, "\n") {
		t.Errorf("final stage:\n%s\nwant:\n%s", strings.Join(d.final, "\n"), strings.Join(want, "\n"))
	}
}

var (
	imageOnce sync.Once
	imagePath string
	imageErr  error
)

// imageBinary builds pace as the Dockerfile does: from the committed files
// that .dockerignore lets into the build context, with the build stage's
// ENV and its go build command run by sh -c (as RUN does), VERSION set.
func imageBinary(t *testing.T) string {
	t.Helper()
	imageOnce.Do(func() { imagePath, imageErr = buildImageBinary(parseDockerfile(t)) })
	if imageErr != nil {
		t.Fatal(imageErr)
	}
	return imagePath
}

func buildImageBinary(d dockerfile) (string, error) {
	ctxDir := filepath.Join(workDir, "context")
	if err := copyContext(ctxDir); err != nil {
		return "", err
	}
	out := filepath.Join(workDir, "out", "pace")
	if !strings.Contains(d.build, "/out/pace") {
		return "", fmt.Errorf("Dockerfile go build %q does not write /out/pace", d.build)
	}
	cmd := exec.Command("sh", "-c", strings.ReplaceAll(d.build, "/out/pace", out))
	cmd.Dir = ctxDir
	cmd.Env = append(append(os.Environ(), d.env...), "VERSION=v0.0.0-imagetest")
	defer localtest.LockBuilds()()
	if msg, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("image build %q: %w\n%s", d.build, err, msg)
	}
	return out, os.Chmod(filepath.Dir(out), 0o755)
}

// copyContext extracts the committed tree (HEAD, as a clean checkout or CI
// has it) into dst, less what .dockerignore excludes.
func copyContext(dst string) error {
	ignore, err := readDockerignore()
	if err != nil {
		return err
	}
	cmd := exec.Command("git", "-C", repo, "archive", "--format=tar", "HEAD")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	archive, err := cmd.Output()
	if err != nil {
		return fmt.Errorf("git archive HEAD: %w: %s", err, stderr.Bytes())
	}
	tr := tar.NewReader(bytes.NewReader(archive))
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("git archive HEAD: %w", err)
		}
		if h.Typeflag != tar.TypeReg || ignore.excludes(h.Name) {
			continue
		}
		if err := writeFile(filepath.Join(dst, filepath.FromSlash(h.Name)), tr); err != nil {
			return err
		}
	}
}

func writeFile(name string, r io.Reader) error {
	if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
		return err
	}
	f, err := os.Create(name)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, r); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}

// dockerignore holds .dockerignore's patterns: root-relative paths matched
// with filepath.Match against a file and each of its parent directories, a
// leading **/ matching at any depth. Other syntax (! exceptions, ** inside a
// pattern) is refused rather than guessed at.
type dockerignore []string

func readDockerignore() (dockerignore, error) {
	data, err := os.ReadFile(filepath.Join(repo, ".dockerignore"))
	if err != nil {
		return nil, err
	}
	var ig dockerignore
	for _, l := range strings.Split(string(data), "\n") {
		l = strings.TrimSpace(l)
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		p := strings.TrimPrefix(strings.TrimPrefix(l, "/"), "**/")
		if strings.HasPrefix(l, "!") || strings.Contains(p, "**") {
			return nil, fmt.Errorf(".dockerignore %q: this test understands plain and leading-**/ patterns only", l)
		}
		if _, err := filepath.Match(p, ""); err != nil {
			return nil, fmt.Errorf(".dockerignore %q: %w", l, err)
		}
		ig = append(ig, l)
	}
	return ig, nil
}

func (ig dockerignore) excludes(file string) bool {
	parts := strings.Split(file, "/")
	for _, pat := range ig {
		p, anyDepth := strings.CutPrefix(strings.TrimPrefix(pat, "/"), "**/")
		for i := range parts {
			prefix := strings.Join(parts[:i+1], "/")
			if ok, _ := filepath.Match(p, prefix); ok {
				return true
			}
			if anyDepth {
				if ok, _ := filepath.Match(p, parts[i]); ok {
					return true
				}
			}
		}
	}
	return false
}

// TestImageBinaryIsStaticAndRunsAsNonRoot checks the binary the image
// would hold: an ELF executable with no interpreter and no shared
// libraries (so it runs on a distroless static base), stripped by -s -w,
// carrying the build's version, and working as uid 65532.
func TestImageBinaryIsStaticAndRunsAsNonRoot(t *testing.T) {
	bin := imageBinary(t)
	f, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close() //nolint:errcheck // read only
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP || p.Type == elf.PT_DYNAMIC {
			t.Errorf("binary has a %v program header: not static", p.Type)
		}
	}
	if libs, _ := f.ImportedLibraries(); len(libs) > 0 {
		t.Errorf("binary needs shared libraries %v", libs)
	}
	if f.Section(".symtab") != nil || f.Section(".debug_info") != nil {
		t.Error("binary has a symbol table or DWARF: -ldflags '-s -w' not applied")
	}

	for _, args := range [][]string{{"version"}, {"--help"}, {"stage", "--help"}} {
		cmd := exec.Command(bin, args...)
		cmd.Dir = "/"
		cmd.Env = []string{"HOME=/nonexistent"} // distroless's nonroot has no writable home either
		if os.Getuid() == 0 {
			cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nonRootUID, Gid: nonRootUID}}
		}
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("pace %s as uid %d: %v\n%s", strings.Join(args, " "), nonRootUID, err, out)
		}
		if args[0] == "version" && !strings.Contains(string(out), "pace v0.0.0-imagetest") {
			t.Errorf("pace version = %q, want the VERSION build argument", out)
		}
	}
}
