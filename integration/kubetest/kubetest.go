// Package kubetest starts a real etcd and kube-apiserver on loopback for
// integration tests. The binaries are built from the Go module proxy by
// integration/kubetools/build.sh (once per machine; later runs relink from
// the build cache), or taken from $KUBE_BIN. StartNodes adds a
// controller-manager, a scheduler and kwok, so that Jobs get pods that
// become Running on a fake node (no code runs in them).
package kubetest

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"k8s.io/client-go/rest"

	"github.com/pace-platform/pace/internal/localtest"
)

// Tokens of the static users: an admin (system:masters, exempt from APF)
// and alice (group dev, no rights until bound; APF classifies her normally).
const (
	AdminToken = "admin-token"
	UserToken  = "user-token"
	User       = "alice"
)

// ControlPlane is a running etcd + kube-apiserver.
type ControlPlane struct {
	Dir   string       // state: certificates, logs, etcd data
	URL   string       // https://127.0.0.1:PORT
	Admin *rest.Config // system:masters
	User  *rest.Config // alice, group dev
	CA    []byte       // the serving certificate's CA, PEM
	// PodLog is the file kwok serves as the log of every container
	// (StartNodes); AppendPodLog writes to it.
	PodLog string

	etcd, apiserver *exec.Cmd
	extra           []*exec.Cmd // controller-manager, scheduler, kwok (StartNodes)
}

// Binaries returns the directory holding kube-apiserver and etcd: $KUBE_BIN,
// or the output of integration/kubetools/build.sh.
func Binaries() (string, error) {
	if dir := os.Getenv("KUBE_BIN"); dir != "" {
		return dir, nil
	}
	root, err := localtest.Root()
	if err != nil {
		return "", err
	}
	script := filepath.Join(root, "integration", "kubetools", "build.sh")
	out, err := exec.Command(script).Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return "", fmt.Errorf("build kube-apiserver and etcd: %w\n%s", err, ee.Stderr)
		}
		return "", fmt.Errorf("build kube-apiserver and etcd: %w", err)
	}
	return strings.TrimSpace(string(out)), nil
}

// Start launches etcd and kube-apiserver from binDir with state in dir,
// adding apiserverFlags to kube-apiserver's. Call Stop when done; the
// servers also die with the test process.
func Start(binDir, dir string, apiserverFlags ...string) (cp *ControlPlane, err error) {
	cp = &ControlPlane{Dir: dir}
	defer func() {
		if err != nil {
			cp.Stop()
			err = fmt.Errorf("%w (logs in %s)", err, dir)
		}
	}()
	if err := writeCredentials(dir); err != nil {
		return cp, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()

	var eURL string
	cp.etcd, err = startOnFreePort(ctx, dir, "etcd.log", filepath.Join(binDir, "etcd"), func(ep int) (string, []string) {
		pURL := "http://127.0.0.1:" + strconv.Itoa(freePort())
		eURL = "http://127.0.0.1:" + strconv.Itoa(ep)
		return eURL + "/health", []string{"--name=pace", "--data-dir=" + filepath.Join(dir, "etcd"), "--unsafe-no-fsync", "--log-level=warn",
			"--listen-client-urls=" + eURL, "--advertise-client-urls=" + eURL,
			"--listen-peer-urls=" + pURL, "--initial-advertise-peer-urls=" + pURL, "--initial-cluster=pace=" + pURL}
	})
	if err != nil {
		return cp, err
	}
	certs := filepath.Join(dir, "certs")
	args := []string{"--etcd-servers=" + eURL,
		"--bind-address=127.0.0.1", "--advertise-address=127.0.0.1",
		"--endpoint-reconciler-type=none", // a loopback advertise address is refused otherwise
		"--cert-dir=" + certs,
		"--service-account-issuer=https://kubernetes.default.svc",
		"--service-account-key-file=" + filepath.Join(dir, "sa.pub"),
		"--service-account-signing-key-file=" + filepath.Join(dir, "sa.key"),
		"--token-auth-file=" + filepath.Join(dir, "tokens.csv"),
		"--authorization-mode=RBAC",
		"--allow-privileged=true", // as clusters run it: privileged pods are then Pod Security's to refuse
		"--service-cluster-ip-range=10.0.0.0/24",
		"--disable-admission-plugins=ServiceAccount",
		"--kubelet-preferred-address-types=InternalIP", // kwok's node answers pods/log on loopback
		// A real node's kubelet admits only clients with a certificate of
		// its CA (StartRealNode): the apiserver, not the node's pods.
		"--kubelet-client-certificate=" + filepath.Join(dir, "kubelet-client.crt"),
		"--kubelet-client-key=" + filepath.Join(dir, "kubelet-client.key"),
	}
	cp.apiserver, err = startOnFreePort(ctx, dir, "apiserver.log", filepath.Join(binDir, "kube-apiserver"), func(ap int) (string, []string) {
		cp.URL = "https://127.0.0.1:" + strconv.Itoa(ap)
		return cp.URL + "/readyz", append(append(args, "--secure-port="+strconv.Itoa(ap)), apiserverFlags...)
	})
	if err != nil {
		return cp, err
	}
	if cp.CA, err = os.ReadFile(filepath.Join(certs, "apiserver.crt")); err != nil {
		return cp, err
	}
	cp.Admin, cp.User = cp.config(AdminToken), cp.config(UserToken)
	return cp, nil
}

func (cp *ControlPlane) config(token string) *rest.Config {
	return &rest.Config{Host: cp.URL, BearerToken: token, TLSClientConfig: rest.TLSClientConfig{CAData: cp.CA}, QPS: 100, Burst: 200}
}

// Stop terminates the node stack, kube-apiserver, then etcd.
func (cp *ControlPlane) Stop() {
	for _, c := range cp.extra {
		stop(c)
	}
	stop(cp.apiserver)
	stop(cp.etcd)
}

func writeCredentials(dir string) error {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return err
	}
	pub, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		return err
	}
	ca, client, clientKey, err := kubeletClientCert()
	if err != nil {
		return err
	}
	files := map[string][]byte{
		"kubelet-ca.crt": ca, "kubelet-client.crt": client, "kubelet-client.key": clientKey,
		"sa.key":     pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}),
		"sa.pub":     pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub}),
		"tokens.csv": []byte(AdminToken + ",admin,admin-uid,\"system:masters\"\n" + UserToken + "," + User + ",alice-uid,\"dev\"\n"),
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			return err
		}
	}
	return nil
}

// kubeletClientCert returns a CA and the apiserver's client certificate and
// key for kubelets, PEM.
func kubeletClientCert() (ca, cert, key []byte, err error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, nil, err
	}
	now := time.Now()
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "pace-kubelet-client-ca"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(30 * 24 * time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, nil, nil, err
	}
	clientKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, nil, err
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "kube-apiserver", Organization: []string{"system:masters"}},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(30 * 24 * time.Hour), KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caTmpl, &clientKey.PublicKey, caKey)
	if err != nil {
		return nil, nil, nil, err
	}
	keyDER, err := x509.MarshalECPrivateKey(clientKey)
	if err != nil {
		return nil, nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), nil
}

func freePort() int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err) // loopback without free ports: nothing can run
	}
	defer l.Close() //nolint:errcheck // a probe
	return l.Addr().(*net.TCPAddr).Port
}

func start(dir, log, name string, args ...string) (*exec.Cmd, error) {
	f, err := os.Create(filepath.Join(dir, log))
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(name, args...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	return cmd, nil
}

func stop(c *exec.Cmd) {
	if c == nil || c.Process == nil {
		return
	}
	_ = c.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _ = c.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = c.Process.Kill()
		<-done
	}
}

// startOnFreePort starts name with the arguments setup gives for a free
// port and waits until the URL setup gives for it answers 200. A port
// freePort found free can be taken before the server binds it (by any
// process on the machine): a server that ends saying so is started again
// on another port, three times at most.
func startOnFreePort(ctx context.Context, dir, log, name string, setup func(port int) (url string, args []string)) (*exec.Cmd, error) {
	for attempt := 1; ; attempt++ {
		url, args := setup(freePort())
		c, err := start(dir, log, name, args...)
		if err != nil {
			return nil, err
		}
		err = waitOK(ctx, url, c)
		if err == nil {
			return c, nil
		}
		stop(c)
		if b, _ := os.ReadFile(filepath.Join(dir, log)); attempt < 3 && strings.Contains(string(b), "address already in use") {
			continue
		}
		return nil, err
	}
}

// ended reports whether c's process has ended: it stays a zombie until
// stop reaps it, so it is read from /proc rather than c.ProcessState.
func ended(c *exec.Cmd) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(c.Process.Pid) + "/stat")
	if err != nil {
		return true
	}
	i := strings.LastIndexByte(string(b), ')') // the state follows the command's name
	return i < 0 || i+2 >= len(b) || b[i+2] == 'Z'
}

func waitOK(ctx context.Context, url string, c *exec.Cmd) error {
	cl := &http.Client{Timeout: time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // probing our own self-signed server
	var last error
	for {
		resp, err := cl.Get(url)
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			err = fmt.Errorf("status %s", resp.Status)
		}
		last = err
		if ended(c) {
			return fmt.Errorf("%s exited (last: %w)", c.Path, last)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s: %w (last: %w)", url, ctx.Err(), last)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// Kubeconfig writes and returns the path of a kubeconfig file for the
// cluster's admin (system:masters).
func (cp *ControlPlane) Kubeconfig() (string, error) { return cp.KubeconfigFor("admin", AdminToken) }

// KubeconfigFor writes and returns the path of a kubeconfig file, named for
// user, that presents token to the cluster.
func (cp *ControlPlane) KubeconfigFor(user, token string) (string, error) {
	path := filepath.Join(cp.Dir, user+".kubeconfig")
	cfg := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: test, cluster: {server: %q, certificate-authority: %q}}]
users: [{name: %q, user: {token: %q}}]
contexts: [{name: test, context: {cluster: test, user: %q}}]
current-context: test
`, cp.URL, filepath.Join(cp.Dir, "certs", "apiserver.crt"), user, token, user)
	return path, os.WriteFile(path, []byte(cfg), 0o600)
}
