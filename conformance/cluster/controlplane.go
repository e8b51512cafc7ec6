package main

// The control plane on loopback, in this process: embedded etcd, kube-apiserver, kube-controller-manager and
// kube-scheduler, each started through its own options package the way its cobra command does
// (k8s.io/kubernetes@v1.33.13 cmd/kube-apiserver/app/server.go:97-122, cmd/kube-controller-manager/app/
// controllermanager.go:120-147, cmd/kube-scheduler/app/server.go:138-165), without the cobra commands: each of
// those installs a process-wide signal handler that may only be set up once (SetupSignalContext).

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	goflag "flag"
	"fmt"
	mrand "math/rand/v2"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/spf13/pflag"
	"go.etcd.io/etcd/server/v3/embed"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	apiapp "k8s.io/kubernetes/cmd/kube-apiserver/app"
	apiopts "k8s.io/kubernetes/cmd/kube-apiserver/app/options"
	kcmapp "k8s.io/kubernetes/cmd/kube-controller-manager/app"
	kcmopts "k8s.io/kubernetes/cmd/kube-controller-manager/app/options"
	schedapp "k8s.io/kubernetes/cmd/kube-scheduler/app"
	schedopts "k8s.io/kubernetes/cmd/kube-scheduler/app/options"
)

// Box is one running control plane.
type Box struct {
	Dir        string // per-run temp dir: etcd data, certs, keys, kubeconfig
	Kubeconfig string
	Config     *rest.Config
	Client     kubernetes.Interface
	etcd       *embed.Etcd
	errs       chan error
}

// freePort returns a port free on 127.0.0.1 now, taken below the kernel's ephemeral range
// (net.ipv4.ip_local_port_range) when it can: a port that ":0" hands out lies in that range, and between our
// Close and the component's Listen any outgoing connection (the API server's own etcd clients among them) may
// be given it as its source port. Seen in CI: the box stopped 2 s after etcd was ready (exit 3). StartBox is
// also retried on a bind failure (main.go), since another process may still take a port first.
func freePort() (int, error) {
	portsMu.Lock()
	defer portsMu.Unlock()
	if low := ephemeralLow(); low > 12000 {
		for range 200 {
			p := 10000 + mrand.IntN(low-10000)
			if portsGiven[p] {
				continue
			}
			if l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p)); err == nil {
				l.Close()
				portsGiven[p] = true
				return p, nil
			}
		}
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	p := l.Addr().(*net.TCPAddr).Port
	portsGiven[p] = true
	return p, nil
}

var (
	portsMu    sync.Mutex
	portsGiven = map[int]bool{} // never hand out one port twice in a process (a component may not listen yet)
)

// ephemeralLow is the first port of the kernel's ephemeral range, 0 when it cannot be read.
func ephemeralLow() int {
	data, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(data))
	if len(f) != 2 {
		return 0
	}
	low, err := strconv.Atoi(f[0])
	if err != nil {
		return 0
	}
	return low
}

// bindFailure says whether a start-up error is a port already taken (worth one more try on other ports).
func bindFailure(err error) bool {
	return err != nil && (strings.Contains(err.Error(), "address already in use") || strings.Contains(err.Error(), "bind:"))
}

func randomToken() (string, error) {
	b := make([]byte, 24)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return hex.EncodeToString(b), nil
}

// writeSigningKey writes a fresh ECDSA P-256 key (PEM): the service-account token signer of this run.
func writeSigningKey(path string) error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return err
	}
	return os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}), 0o600)
}

func parseInto(name string, sets map[string]*pflag.FlagSet, args []string) error {
	fs := pflag.NewFlagSet(name, pflag.ContinueOnError)
	for _, s := range sets {
		fs.AddFlagSet(s)
	}
	if err := fs.Parse(args); err != nil {
		return fmt.Errorf("%s flags: %w", name, err)
	}
	return nil
}

func (b *Box) goRun(name string, f func() error) {
	go func() {
		err := f()
		if err != nil {
			b.errs <- fmt.Errorf("%s stopped: %w", name, err)
		}
	}()
}

// StartBox starts etcd and the three control-plane components on 127.0.0.1 and waits (bounded) until the
// API server is ready. ctx ends them all.
func StartBox(ctx context.Context, dir string, logf func(string, ...any)) (*Box, error) {
	b := &Box{Dir: dir, errs: make(chan error, 8)}
	ports := make([]int, 5)
	for i := range ports {
		p, err := freePort()
		if err != nil {
			return nil, err
		}
		ports[i] = p
	}
	etcdClient, etcdPeer, apiPort, kcmPort, schedPort := ports[0], ports[1], ports[2], ports[3], ports[4]

	// etcd (go.etcd.io/etcd/server/v3@v3.5.21 embed/config.go:208-234,404)
	cfg := embed.NewConfig()
	cfg.Name = "box"
	cfg.Dir = filepath.Join(dir, "etcd")
	cu, _ := url.Parse(fmt.Sprintf("http://127.0.0.1:%d", etcdClient))
	pu, _ := url.Parse(fmt.Sprintf("http://127.0.0.1:%d", etcdPeer))
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{*cu}, []url.URL{*cu}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{*pu}, []url.URL{*pu}
	cfg.InitialCluster = "box=" + pu.String()
	cfg.LogLevel = "error"
	cfg.UnsafeNoFsync = true // a throw-away store: fsync only slows the box
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return nil, fmt.Errorf("etcd: %w", err)
	}
	b.etcd = e
	select {
	case <-e.Server.ReadyNotify():
	case <-time.After(60 * time.Second):
		e.Close()
		return nil, fmt.Errorf("etcd not ready within 60s")
	}
	logf("etcd ready on %s", cu)

	token, err := randomToken()
	if err != nil {
		return nil, err
	}
	tokenFile := filepath.Join(dir, "tokens.csv")
	// token,user,uid,"group": the box's only user, in system:masters (all rights under RBAC).
	if err := os.WriteFile(tokenFile, []byte(token+`,box-admin,box-admin,"system:masters"`+"\n"), 0o600); err != nil {
		return nil, err
	}
	saKey := filepath.Join(dir, "sa.key")
	if err := writeSigningKey(saKey); err != nil {
		return nil, err
	}
	certDir := filepath.Join(dir, "certs")

	// kube-apiserver: the flags its test harness sets (cmd/kube-apiserver/app/testing/testserver.go:217-221,
	// 340,395-405 at v1.33.13), with token auth and RBAC instead of the harness's cert auth.
	// The not-ready / unreachable tolerations the DefaultTolerationSeconds admission plugin adds to every pod that
	// has none (300 s by default): Go flags of the plugin's package (k8s.io/kubernetes@v1.33.13
	// plugin/pkg/admission/defaulttolerationseconds/admission.go:34-41), read at admission, so set here before any
	// pod exists. Shortened in the box for daytwo.go's node failure; compare.py accepts tolerations admission adds.
	for _, f := range []string{"default-not-ready-toleration-seconds", "default-unreachable-toleration-seconds"} {
		if err := goflag.Set(f, fmt.Sprint(int(defaultTolerationSeconds.Seconds()))); err != nil {
			return nil, fmt.Errorf("kube-apiserver %s: %w", f, err)
		}
	}
	s := apiopts.NewServerRunOptions()
	apiArgs := []string{
		"--etcd-servers=" + cu.String(),
		"--bind-address=127.0.0.1",
		fmt.Sprintf("--secure-port=%d", apiPort),
		"--cert-dir=" + certDir,
		"--token-auth-file=" + tokenFile,
		"--authorization-mode=Node,RBAC",
		"--anonymous-auth=false",
		"--service-account-issuer=https://kubernetes.default.svc",
		"--service-account-signing-key-file=" + saKey,
		"--service-account-key-file=" + saKey,
		"--service-cluster-ip-range=10.96.0.0/16",
		"--advertise-address=127.0.0.1",
		"--endpoint-reconciler-type=none",
		"--enable-priority-and-fairness=false",
		"--profiling=false",
		// Managed clusters allow privileged pods (device-plugin and driver DaemonSets need them); kubeadm sets the
		// same (k8s.io/kubernetes@v1.33.13 cmd/kubeadm/app/phases/controlplane/manifests.go: "allow-privileged": "true").
		"--allow-privileged=true",
	}
	if err := parseInto("kube-apiserver", s.Flags().FlagSets, apiArgs); err != nil {
		return nil, err
	}
	if err := s.GenericServerRunOptions.ComponentGlobalsRegistry.Set(); err != nil {
		return nil, err
	}
	completed, err := s.Complete(ctx)
	if err != nil {
		return nil, fmt.Errorf("kube-apiserver options: %w", err)
	}
	if errs := completed.Validate(); len(errs) != 0 {
		return nil, fmt.Errorf("kube-apiserver options: %v", errs)
	}
	b.goRun("kube-apiserver", func() error { return apiapp.Run(ctx, completed) })

	// The serving certificate the API server generates in --cert-dir (self-signed CA + cert, one bundle).
	caFile := filepath.Join(certDir, "apiserver.crt")
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := os.Stat(caFile); err == nil {
			break
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("kube-apiserver wrote no %s within 30s", caFile)
		}
		time.Sleep(200 * time.Millisecond)
	}
	server := fmt.Sprintf("https://127.0.0.1:%d", apiPort)
	kc := clientcmdapi.NewConfig()
	kc.Clusters["box"] = &clientcmdapi.Cluster{Server: server, CertificateAuthority: caFile}
	kc.AuthInfos["box-admin"] = &clientcmdapi.AuthInfo{Token: token}
	kc.Contexts["box"] = &clientcmdapi.Context{Cluster: "box", AuthInfo: "box-admin"}
	kc.CurrentContext = "box"
	b.Kubeconfig = filepath.Join(dir, "kubeconfig")
	if err := clientcmd.WriteToFile(*kc, b.Kubeconfig); err != nil {
		return nil, err
	}
	rc, err := clientcmd.BuildConfigFromFlags("", b.Kubeconfig)
	if err != nil {
		return nil, err
	}
	rc.QPS, rc.Burst = 200, 400
	b.Config = rc
	b.Client = kubernetes.NewForConfigOrDie(rc)
	if err := b.waitReady(ctx, 120*time.Second); err != nil {
		return nil, err
	}
	logf("kube-apiserver ready on %s", server)

	// kube-controller-manager: every default controller, one client (no per-controller service accounts).
	ko, err := kcmopts.NewKubeControllerManagerOptions()
	if err != nil {
		return nil, err
	}
	nfs := ko.Flags(kcmapp.KnownControllers(), kcmapp.ControllersDisabledByDefault(), kcmapp.ControllerAliases())
	ko.ParsedFlags = &nfs
	kcmArgs := []string{
		"--kubeconfig=" + b.Kubeconfig,
		"--authentication-kubeconfig=" + b.Kubeconfig,
		"--authorization-kubeconfig=" + b.Kubeconfig,
		"--leader-elect=false",
		"--bind-address=127.0.0.1",
		fmt.Sprintf("--secure-port=%d", kcmPort),
		"--cert-dir=" + filepath.Join(dir, "kcm-certs"),
		"--service-account-private-key-file=" + saKey,
		"--root-ca-file=" + caFile,
		"--use-service-account-credentials=false",
		"--controllers=*",
		// How long a node may miss heartbeats before the node lifecycle controller marks it Unknown and taints it
		// node.kubernetes.io/unreachable:NoExecute (default 50s in v1.33, cmd/kube-controller-manager/app/options/
		// nodelifecyclecontroller.go); the box's is shorter so that the node failure of daytwo.go is seen in
		// seconds; the fake kubelet heartbeats every heartbeatEvery (a quarter of it). --node-monitor-period (default
		// 5s) is how often the controller looks.
		fmt.Sprintf("--node-monitor-grace-period=%s", nodeMonitorGrace),
		"--node-monitor-period=2s",
		// The PV binder acts on its periodic sync (default 15s); the box binds the stack's static PV/PVC at once.
		"--pvclaimbinder-sync-period=1s",
	}
	if err := parseInto("kube-controller-manager", nfs.FlagSets, kcmArgs); err != nil {
		return nil, err
	}
	if err := ko.ComponentGlobalsRegistry.Set(); err != nil {
		return nil, err
	}
	kcfg, err := ko.Config(kcmapp.KnownControllers(), kcmapp.ControllersDisabledByDefault(), kcmapp.ControllerAliases())
	if err != nil {
		return nil, fmt.Errorf("kube-controller-manager options: %w", err)
	}
	b.goRun("kube-controller-manager", func() error { return kcmapp.Run(ctx, kcfg.Complete()) })
	logf("kube-controller-manager started")

	// kube-scheduler: the default profile (default-scheduler), no leader election.
	so := schedopts.NewOptions()
	schedArgs := []string{
		"--kubeconfig=" + b.Kubeconfig,
		"--authentication-kubeconfig=" + b.Kubeconfig,
		"--authorization-kubeconfig=" + b.Kubeconfig,
		"--leader-elect=false",
		"--bind-address=127.0.0.1",
		fmt.Sprintf("--secure-port=%d", schedPort),
	}
	if err := parseInto("kube-scheduler", so.Flags.FlagSets, schedArgs); err != nil {
		return nil, err
	}
	if err := so.ComponentGlobalsRegistry.Set(); err != nil {
		return nil, err
	}
	cc, sched, err := schedapp.Setup(ctx, so)
	if err != nil {
		return nil, fmt.Errorf("kube-scheduler setup: %w", err)
	}
	b.goRun("kube-scheduler", func() error { return schedapp.Run(ctx, cc, sched) })
	logf("kube-scheduler started")
	return b, nil
}

func (b *Box) waitReady(ctx context.Context, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	var last error
	for time.Now().Before(deadline) {
		select {
		case err := <-b.errs:
			return err
		default:
		}
		res := b.Client.Discovery().RESTClient().Get().AbsPath("/readyz").Do(ctx)
		if last = res.Error(); last == nil {
			return nil
		}
		time.Sleep(500 * time.Millisecond)
	}
	return fmt.Errorf("kube-apiserver not ready within %s: %v", limit, last)
}

// Failure returns a component's error if one has stopped.
func (b *Box) Failure() error {
	select {
	case err := <-b.errs:
		return err
	default:
		return nil
	}
}

func (b *Box) Close() {
	if b.etcd != nil {
		b.etcd.Close()
	}
}
