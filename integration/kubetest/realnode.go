package kubetest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/pace-platform/pace/integration/kubetest/ociarchive"
)

// The real node's fixed places: one node per machine, as the kubelet's
// sysctls and iptables chains and containerd's shim sockets
// (/run/containerd/s) are the machine's.
const (
	// NodeDir holds the node's state: containerd's root and state, the
	// kubelet's root, CNI configuration and IPAM, logs and HostRecord.
	NodeDir = "/var/lib/pace-node"
	// NodeName is the real node's name.
	NodeName = "pace-node"
	// Gateway is the bridge's address on the host, where pods reach the
	// host's listeners (pace up's NATS and Redis front).
	Gateway = "10.88.0.1"
	// PauseImage is the sandbox image, built from the kubelet module's
	// pause.c (integration/kubetools/build.sh).
	PauseImage = "pace.local/pause:3.10"

	bridgeName = "pace0"
	subnet     = "10.88.0.0/24"
	lockFile   = "/var/lib/pace-node.lock"
	recordFile = "host.json"
)

// sysctls are the host settings the kubelet and the bridge plugin change
// and nothing resets; the node restores them.
var sysctls = []string{"kernel/panic", "kernel/panic_on_oops", "vm/overcommit_memory",
	"kernel/keys/root_maxkeys", "kernel/keys/root_maxbytes", "net/ipv4/ip_forward", "net/ipv6/conf/all/forwarding"}

// fixedPaths are the places outside NodeDir that the kubelet, containerd and
// the CNI plugins write whatever their configuration says: the kubelet's
// device-plugin socket, its /var/log/containers links, containerd's shim
// sockets, libcni's result cache, the pods' network namespaces. Those that
// did not exist before the node are removed with it.
var fixedPaths = []string{"/var/lib/kubelet", "/var/log/containers", "/run/containerd", "/var/lib/cni", "/run/netns"}

// iptablesTables are the tables the kubelet adds chains to, with their
// built-in chains (restored empty when the table had no rules before).
var iptablesTables = map[string][]string{
	"filter": {"INPUT", "FORWARD", "OUTPUT"},
	"nat":    {"PREROUTING", "INPUT", "OUTPUT", "POSTROUTING"},
	"mangle": {"PREROUTING", "INPUT", "FORWARD", "OUTPUT", "POSTROUTING"},
}

// HostRecord is the host state as it was before the node started, and the
// processes it started; it is written to NodeDir, so that the next start
// after a killed run stops those processes and restores that state.
type HostRecord struct {
	Sysctls  map[string]string `json:"sysctls"`
	IPTables map[string]string `json:"iptables"` // command (iptables, ip6tables) → save output
	Netns    []string          `json:"netns"`    // /run/netns entries that existed
	Created  []string          `json:"created"`  // fixedPaths that did not exist
	Procs    []Proc            `json:"procs"`
}

// Proc is a process by its pid and its start time (clock ticks after boot,
// /proc/PID/stat field 22), which tells it from a later one with the same
// pid.
type Proc struct {
	PID   int    `json:"pid"`
	Start uint64 `json:"start"`
}

// Node is a real kubelet, containerd and runc on this machine, registered
// with a ControlPlane: pods run as containers on a bridge network.
type Node struct {
	Dir     string
	Socket  string // containerd's
	Ready   time.Duration
	cp      *ControlPlane
	rec     HostRecord
	lock    *os.File
	procs   []*exec.Cmd // containerd, kubelet
	log     *slog.Logger
	stopped bool
}

// StartRealNode starts kube-controller-manager and kube-scheduler, then
// containerd and a kubelet (binDir holds kubelet and pause) that register
// the node NodeName, and returns once the node is Ready. It waits for
// another node on this machine to stop, and first cleans what a killed run
// left. Stop tears it down and restores the host.
func (cp *ControlPlane) StartRealNode(binDir string, log *slog.Logger) (n *Node, err error) {
	t0 := time.Now()
	n = &Node{Dir: NodeDir, Socket: filepath.Join(NodeDir, "containerd.sock"), cp: cp, log: log}
	if n.lock, err = lockNode(5 * time.Minute); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			n.Stop()
			err = fmt.Errorf("real node: %w (logs in %s)", err, NodeDir)
		}
	}()
	if err := CleanNode(log); err != nil {
		return n, fmt.Errorf("clean a previous run's node: %w", err)
	}
	if n.rec, err = recordHost(); err != nil {
		return n, err
	}
	if err := os.MkdirAll(NodeDir, 0o700); err != nil {
		return n, err
	}
	if err := n.save(); err != nil {
		return n, err
	}
	if err := cp.startControllers(binDir, "*,-nodeipam"); err != nil {
		return n, err
	}
	if err := n.network(); err != nil {
		return n, err
	}
	if err := n.startContainerd(); err != nil {
		return n, err
	}
	pause, err := ociarchive.BinaryFile("/pause", filepath.Join(binDir, "pause"))
	if err != nil {
		return n, err
	}
	if err := n.Import(ociarchive.Image{Name: PauseImage, Files: []ociarchive.File{pause}, Entrypoint: []string{"/pause"}}); err != nil {
		return n, err
	}
	if err := n.startKubelet(binDir); err != nil {
		return n, err
	}
	if err := n.waitReady(2 * time.Minute); err != nil {
		return n, err
	}
	n.Ready = time.Since(t0)
	return n, nil
}

// lockNode takes the machine's node lock, which its holder's death
// releases.
func lockNode(wait time.Duration) (*os.File, error) {
	f, err := os.OpenFile(lockFile, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, err
	}
	deadline := time.Now().Add(wait)
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return f, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) || time.Now().After(deadline) {
			_ = f.Close()
			return nil, fmt.Errorf("lock %s (another real node runs on this machine?): %w", lockFile, err)
		}
		time.Sleep(time.Second)
	}
}

func (n *Node) save() error {
	data, err := json.MarshalIndent(n.rec, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(NodeDir, recordFile), data, 0o600)
}

func recordHost() (HostRecord, error) {
	rec := HostRecord{Sysctls: map[string]string{}, IPTables: map[string]string{}}
	for _, s := range sysctls {
		v, err := os.ReadFile(filepath.Join("/proc/sys", s))
		if err != nil {
			continue // absent on this kernel: nothing to restore
		}
		rec.Sysctls[s] = strings.TrimSpace(string(v))
	}
	for _, cmd := range []string{"iptables", "ip6tables"} {
		out, err := exec.Command(cmd + "-save").Output()
		if err != nil {
			return rec, fmt.Errorf("%s-save: %w", cmd, err)
		}
		rec.IPTables[cmd] = string(out)
	}
	entries, _ := os.ReadDir("/run/netns")
	for _, e := range entries {
		rec.Netns = append(rec.Netns, e.Name())
	}
	for _, p := range fixedPaths {
		if _, err := os.Lstat(p); errors.Is(err, os.ErrNotExist) {
			rec.Created = append(rec.Created, p)
		}
	}
	return rec, nil
}

// network creates the bridge with the gateway's address, so that host
// listeners can bind it before the first pod, and the CNI configuration.
func (n *Node) network() error {
	for _, args := range [][]string{
		{"link", "add", bridgeName, "type", "bridge"},
		{"addr", "add", Gateway + "/24", "dev", bridgeName},
		{"link", "set", bridgeName, "up"},
	} {
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			return fmt.Errorf("ip %s: %w: %s", strings.Join(args, " "), err, out)
		}
	}
	// A bridge whose address was never set takes its lowest port's: a pod
	// leaving would change the gateway's MAC under the other pods' ARP
	// caches, and cut them off the host for as long as those last.
	mac, err := os.ReadFile(filepath.Join("/sys/class/net", bridgeName, "address"))
	if err != nil {
		return err
	}
	if out, err := exec.Command("ip", "link", "set", bridgeName, "address", strings.TrimSpace(string(mac))).CombinedOutput(); err != nil {
		return fmt.Errorf("fix the bridge's address: %w: %s", err, out)
	}
	conf := fmt.Sprintf(`{"cniVersion": "0.4.0", "name": "pace", "plugins": [
  {"type": "bridge", "bridge": %q, "isGateway": true, "ipMasq": false,
   "ipam": {"type": "host-local", "dataDir": %q, "ranges": [[{"subnet": %q, "gateway": %q}]], "routes": [{"dst": "0.0.0.0/0"}]}},
  {"type": "loopback"}]}
`, bridgeName, filepath.Join(NodeDir, "cni-ipam"), subnet, Gateway)
	dir := filepath.Join(NodeDir, "cni")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "10-pace.conflist"), []byte(conf), 0o600)
}

func (n *Node) startContainerd() error {
	conf := fmt.Sprintf(`version = 2
root = %[1]q
state = %[2]q
disabled_plugins = ["io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.aufs"]
[grpc]
  address = %[3]q
[plugins."io.containerd.internal.v1.opt"]
  path = %[4]q
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = %[5]q
  restrict_oom_score_adj = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        Root = %[6]q
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = %[7]q
`, filepath.Join(NodeDir, "containerd", "root"), filepath.Join(NodeDir, "containerd", "state"), n.Socket,
		filepath.Join(NodeDir, "containerd", "opt"), PauseImage, filepath.Join(NodeDir, "runc"), filepath.Join(NodeDir, "cni"))
	path := filepath.Join(NodeDir, "containerd.toml")
	if err := os.WriteFile(path, []byte(conf), 0o600); err != nil {
		return err
	}
	c, err := n.start("containerd.log", "containerd", "--config", path)
	if err != nil {
		return err
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		if err := exec.Command("ctr", "--address", n.Socket, "version").Run(); err == nil {
			return nil
		}
		if c.ProcessState != nil || time.Now().After(deadline) {
			return errors.New("containerd did not answer on its socket")
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// start starts a node process and records its pid before anything else.
func (n *Node) start(log, name string, args ...string) (*exec.Cmd, error) {
	c, err := start(NodeDir, log, name, args...)
	if err != nil {
		return nil, err
	}
	n.procs = append(n.procs, c)
	p, err := procOf(c.Process.Pid)
	if err != nil {
		return c, err
	}
	n.rec.Procs = append(n.rec.Procs, p)
	return c, n.save()
}

// Import loads img into the node's containerd, where pods find it with
// imagePullPolicy IfNotPresent or Never.
func (n *Node) Import(img ociarchive.Image) error {
	f, err := os.CreateTemp(NodeDir, "image-*.tar")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name()) //nolint:errcheck // a temporary file
	if err := ociarchive.Write(f, img); err != nil {
		_ = f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if out, err := exec.Command("ctr", "--address", n.Socket, "-n", "k8s.io", "images", "import", f.Name()).CombinedOutput(); err != nil {
		return fmt.Errorf("import %s: %w: %s", img.Name, err, out)
	}
	return nil
}

func (n *Node) startKubelet(binDir string) error {
	kubeconfig, err := n.cp.Kubeconfig()
	if err != nil {
		return err
	}
	conf := fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
cgroupDriver: cgroupfs
failSwapOn: false
failCgroupV1: false
oomScoreAdj: 0
containerRuntimeEndpoint: unix://%s
address: %s
port: %d
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: %d
podLogsDir: %q
authentication: {anonymous: {enabled: false}, webhook: {enabled: false}, x509: {clientCAFile: %q}}
authorization: {mode: AlwaysAllow}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard: {memory.available: "1%%", nodefs.available: "1%%", imagefs.available: "1%%", nodefs.inodesFree: "1%%"}
serializeImagePulls: false
`, n.Socket, Gateway, freePort(), freePort(), filepath.Join(NodeDir, "pod-logs"), filepath.Join(n.cp.Dir, "kubelet-ca.crt"))
	path := filepath.Join(NodeDir, "kubelet.yaml")
	if err := os.WriteFile(path, []byte(conf), 0o600); err != nil {
		return err
	}
	_, err = n.start("kubelet.log", filepath.Join(binDir, "kubelet"), "--config="+path, "--kubeconfig="+kubeconfig,
		"--root-dir="+filepath.Join(NodeDir, "kubelet"), "--cert-dir="+filepath.Join(NodeDir, "kubelet", "pki"), "--hostname-override="+NodeName, "--node-ip="+Gateway, "--v=1")
	return err
}

func (n *Node) waitReady(wait time.Duration) error {
	cs, err := kubernetes.NewForConfig(n.cp.Admin)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	for {
		node, err := cs.CoreV1().Nodes().Get(ctx, NodeName, metav1.GetOptions{})
		if err == nil && len(node.Spec.Taints) == 0 {
			for _, c := range node.Status.Conditions {
				if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
					return nil
				}
			}
		}
		for _, c := range n.procs {
			if c.ProcessState != nil {
				return fmt.Errorf("%s exited", c.Path)
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("node %s not ready and untainted: %w (last: %w)", NodeName, ctx.Err(), err)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// Stop stops the kubelet, the pods' processes, containerd and its shims,
// copies their logs to the control plane's directory, removes the node's
// mounts, cgroups, bridge and directory, restores the host's sysctls and
// iptables, and releases the machine's node lock.
func (n *Node) Stop() {
	if n == nil || n.stopped {
		return
	}
	n.stopped = true
	if len(n.procs) > 1 {
		stop(n.procs[1]) // the kubelet
	}
	killPods(n.log)
	if len(n.procs) > 0 {
		stop(n.procs[0]) // containerd
	}
	for _, log := range []string{"containerd.log", "kubelet.log"} { // kept with the control plane's
		if data, err := os.ReadFile(filepath.Join(NodeDir, log)); err == nil {
			_ = os.WriteFile(filepath.Join(n.cp.Dir, log), data, 0o600)
		}
	}
	if n.rec.Sysctls != nil {
		teardown(n.rec, n.log)
	}
	if n.lock != nil {
		_ = n.lock.Close()
	}
}

// CleanNode tears down what a killed run left, by NodeDir's HostRecord:
// its processes, if still the same, are killed, and the host is restored
// to the state it recorded. Without a record it does nothing.
func CleanNode(log *slog.Logger) error {
	data, err := os.ReadFile(filepath.Join(NodeDir, recordFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	var rec HostRecord
	if err := json.Unmarshal(data, &rec); err != nil {
		return fmt.Errorf("%s: %w", recordFile, err)
	}
	log.Info("cleaning a previous real node's leftovers", "dir", NodeDir, "procs", len(rec.Procs))
	for i := len(rec.Procs) - 1; i >= 0; i-- {
		p := rec.Procs[i]
		if now, err := procOf(p.PID); err == nil && now.Start == p.Start {
			_ = syscall.Kill(p.PID, syscall.SIGKILL)
			waitGone(p.PID, 10*time.Second)
		}
	}
	killPods(log)
	teardown(rec, log)
	return nil
}

// teardown removes what the node made outside its processes and restores
// rec's host state; each step is attempted whatever the others did.
func teardown(rec HostRecord, log *slog.Logger) {
	killShims(log)
	unmountUnder(NodeDir, log)
	known := map[string]bool{}
	for _, ns := range rec.Netns {
		known[ns] = true
	}
	entries, _ := os.ReadDir("/run/netns")
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), "cni-") && !known[e.Name()] {
			p := filepath.Join("/run/netns", e.Name())
			_ = syscall.Unmount(p, syscall.MNT_DETACH)
			_ = os.Remove(p)
		}
	}
	removeCgroups(log)
	for _, p := range rec.Created {
		if err := os.RemoveAll(p); err != nil {
			log.Warn("not removed", "path", p, "err", err)
		}
	}
	if links, err := os.ReadDir("/var/log/containers"); err == nil { // when it was there before
		for _, l := range links {
			p := filepath.Join("/var/log/containers", l.Name())
			if target, err := os.Readlink(p); err == nil && strings.HasPrefix(target, NodeDir+"/") {
				_ = os.Remove(p)
			}
		}
	}
	if err := exec.Command("ip", "link", "del", bridgeName).Run(); err != nil {
		log.Debug("no bridge to delete", "bridge", bridgeName, "err", err)
	}
	for s, v := range rec.Sysctls {
		if err := os.WriteFile(filepath.Join("/proc/sys", s), []byte(v), 0o644); err != nil {
			log.Warn("sysctl not restored", "sysctl", s, "value", v, "err", err)
		}
	}
	for cmd, saved := range rec.IPTables {
		if err := restoreIPTables(cmd, saved); err != nil {
			log.Warn("iptables not restored", "cmd", cmd, "err", err)
		}
	}
	if err := os.RemoveAll(NodeDir); err != nil {
		log.Warn("node directory not removed", "dir", NodeDir, "err", err)
	}
}

// restoreIPTables puts back saved, each table the kubelet touches included:
// one absent from saved is restored empty with accepting built-in chains,
// as a table without rules filters nothing.
func restoreIPTables(cmd, saved string) error {
	var in bytes.Buffer
	in.WriteString(saved)
	for table, chains := range iptablesTables {
		if strings.Contains(saved, "\n*"+table+"\n") || strings.HasPrefix(saved, "*"+table+"\n") {
			continue
		}
		fmt.Fprintf(&in, "*%s\n", table)
		for _, c := range chains {
			fmt.Fprintf(&in, ":%s ACCEPT [0:0]\n", c)
		}
		in.WriteString("COMMIT\n")
	}
	c := exec.Command(cmd + "-restore")
	c.Stdin = &in
	if out, err := c.CombinedOutput(); err != nil {
		return fmt.Errorf("%w: %s", err, out)
	}
	return nil
}

// killPods kills every process in the kubelet's pod cgroups (kubepods in
// each cgroup v1 hierarchy) and waits until each is gone.
func killPods(log *slog.Logger) {
	seen := map[int]bool{}
	for _, root := range kubepodsCgroups() {
		_ = filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() || d.Name() != "cgroup.procs" {
				return nil
			}
			data, _ := os.ReadFile(p)
			for _, f := range strings.Fields(string(data)) {
				if pid, err := strconv.Atoi(f); err == nil && !seen[pid] {
					seen[pid] = true
					_ = syscall.Kill(pid, syscall.SIGKILL)
				}
			}
			return nil
		})
	}
	for pid := range seen {
		waitGone(pid, 10*time.Second)
	}
	if len(seen) > 0 {
		log.Debug("killed pod processes", "n", len(seen))
	}
}

// killShims kills the containerd shims serving the node's containerd: those
// whose command line names its socket.
func killShims(log *slog.Logger) {
	sock := filepath.Join(NodeDir, "containerd.sock")
	procs, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range procs {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmdline, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if bytes.Contains(cmdline, []byte("\x00-address\x00"+sock+"\x00")) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
			pids = append(pids, pid)
		}
	}
	for _, pid := range pids {
		waitGone(pid, 10*time.Second)
	}
	if len(pids) > 0 {
		log.Debug("killed containerd shims", "n", len(pids))
	}
}

func kubepodsCgroups() []string {
	hierarchies, _ := os.ReadDir("/sys/fs/cgroup")
	var roots []string
	for _, h := range hierarchies {
		p := filepath.Join("/sys/fs/cgroup", h.Name(), "kubepods")
		if _, err := os.Stat(p); err == nil {
			roots = append(roots, p)
		}
	}
	return roots
}

// removeCgroups removes the kubepods cgroups, deepest first.
func removeCgroups(log *slog.Logger) {
	for _, root := range kubepodsCgroups() {
		var dirs []string
		_ = filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, p)
			}
			return nil
		})
		for i := len(dirs) - 1; i >= 0; i-- {
			if err := syscall.Rmdir(dirs[i]); err != nil {
				log.Warn("cgroup not removed", "cgroup", dirs[i], "err", err)
			}
		}
	}
}

// unmountUnder detaches every mount below dir, deepest first.
func unmountUnder(dir string, log *slog.Logger) {
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return
	}
	var points []string
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) > 4 && strings.HasPrefix(f[4], dir+"/") {
			points = append(points, f[4])
		}
	}
	for i := len(points) - 1; i >= 0; i-- {
		if err := syscall.Unmount(points[i], syscall.MNT_DETACH); err != nil && !errors.Is(err, syscall.EINVAL) {
			log.Warn("not unmounted", "mount", points[i], "err", err)
		}
	}
}

// procOf reads pid's start time.
func procOf(pid int) (Proc, error) {
	data, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return Proc{}, err
	}
	// The command (field 2) may hold spaces; fields after its ')' count from 3.
	rest := string(data[bytes.LastIndexByte(data, ')')+1:])
	f := strings.Fields(rest)
	if len(f) < 20 {
		return Proc{}, fmt.Errorf("/proc/%d/stat: short", pid)
	}
	start, err := strconv.ParseUint(f[19], 10, 64)
	return Proc{PID: pid, Start: start}, err
}

// waitGone waits until pid has exited: gone from /proc, or a zombie (PID 1
// may reap orphans late).
func waitGone(pid int, wait time.Duration) {
	deadline := time.Now().Add(wait)
	for time.Now().Before(deadline) {
		status, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "status"))
		if err != nil || bytes.Contains(status, []byte("\nState:\tZ")) {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}
