package main

// Kyverno's admission controller (its own command, built by conformance/kyverno's module) run outside the
// cluster on loopback, as its debug recipe runs it: kyverno/kyverno@v1.19.0 .vscode/launch.json:9-25 (flags
// --kubeconfig, --serverIP, the service-account names, the TLS secret names; env KYVERNO_NAMESPACE,
// KYVERNO_SERVICEACCOUNT_NAME, KYVERNO_DEPLOYMENT, KYVERNO_POD_NAME, INIT_CONFIG, METRICS_CONFIG). With
// --serverIP its webhook configurations name https://<serverIP><path> (pkg/controllers/webhook/utils.go:165-178);
// --webhookServerHost/--webhookServerPort bind the server to loopback (cmd/kyverno/main.go:412-413).

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"os"
	"os/exec"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

const kyvernoNS = "kyverno"

type Kyverno struct {
	cmd *exec.Cmd
	URL string
}

func StartKyverno(ctx context.Context, b *Box, bin, logPath string, logf func(string, ...any)) (*Kyverno, error) {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: kyvernoNS}}
	if _, err := b.Client.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, err
	}
	// INIT_CONFIG and METRICS_CONFIG name ConfigMaps Kyverno reads in its namespace; empty ones leave its defaults.
	for _, name := range []string{"kyverno", "kyverno-metrics"} {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: kyvernoNS}}
		if _, err := b.Client.CoreV1().ConfigMaps(kyvernoNS).Create(ctx, cm, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return nil, err
		}
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	metricsPort, err := freePort()
	if err != nil {
		return nil, err
	}
	log, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin,
		"--kubeconfig="+b.Kubeconfig,
		fmt.Sprintf("--serverIP=127.0.0.1:%d", port),
		"--webhookServerHost=127.0.0.1",
		fmt.Sprintf("--webhookServerPort=%d", port),
		"--metricsHost=127.0.0.1",
		fmt.Sprintf("--metricsPort=%d", metricsPort),
		"--disableMetrics=true",
		// controller-runtime's metrics server would bind :8080 on every interface (cmd/kyverno/main.go:426,731)
		"--controllerRuntimeMetricsAddress=0",
		"--admissionReports=false",
		"--backgroundServiceAccountName=system:serviceaccount:kyverno:kyverno-background-controller",
		"--reportsServiceAccountName=system:serviceaccount:kyverno:kyverno-reports-controller",
		"--caSecretName=kyverno-svc.kyverno.svc.kyverno-tls-ca",
		"--tlsSecretName=kyverno-svc.kyverno.svc.kyverno-tls-pair",
		// One replica and no flag to turn leader election off: Kyverno renews its lease within 5 retry periods and
		// stops when a renewal runs out (kyverno@v1.19.1 pkg/leaderelection/leaderelection.go:73-77; the default
		// period 2 s, cmd/internal/flag.go:172). On a box at load average ~24 a renewal took over 10 s, Kyverno
		// stopped serving, and every pod create failed closed at its webhook; 10 s gives the renewal 50 s. Nobody
		// else is waiting to take over, so a longer lease delays nothing.
		"--leaderElectionRetryPeriod=10s",
		"-v=2",
	)
	cmd.Env = append(os.Environ(), "KYVERNO_NAMESPACE="+kyvernoNS, "KYVERNO_SERVICEACCOUNT_NAME=kyverno-admission-controller",
		"KYVERNO_DEPLOYMENT=dummy", "KYVERNO_POD_NAME=dummy", "INIT_CONFIG=kyverno", "METRICS_CONFIG=kyverno-metrics")
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	k := &Kyverno{cmd: cmd, URL: fmt.Sprintf("https://127.0.0.1:%d", port)}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	deadline := time.Now().Add(180 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case err := <-exited:
			return nil, fmt.Errorf("kyverno exited: %v (log %s)", err, logPath)
		default:
		}
		// ready when the TLS handshake completes (the port listens before Kyverno has its serving certificate:
		// the API server then got "tls: internal error")
		d := &net.Dialer{Timeout: time.Second}
		if c, err := tls.DialWithDialer(d, "tcp", fmt.Sprintf("127.0.0.1:%d", port), &tls.Config{InsecureSkipVerify: true}); err == nil { //nolint:gosec // a readiness probe of our own loopback child
			c.Close()
			logf("kyverno admission controller serving on 127.0.0.1:%d (log %s)", port, logPath)
			return k, nil
		}
		time.Sleep(time.Second)
	}
	k.Stop()
	return nil, fmt.Errorf("kyverno's webhook server not listening within 180s (log %s)", logPath)
}

func (k *Kyverno) Stop() {
	if k == nil || k.cmd.Process == nil {
		return
	}
	_ = syscall.Kill(-k.cmd.Process.Pid, syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _, _ = k.cmd.Process.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = syscall.Kill(-k.cmd.Process.Pid, syscall.SIGKILL)
	}
}
