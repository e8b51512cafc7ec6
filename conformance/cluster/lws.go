package main

// The LeaderWorkerSet controller manager (sigs.k8s.io/lws, built by conformance/lws's module) run outside the
// cluster on loopback, a child process like Kyverno. What the chart would set up, done here by hand:
//   - its configuration (sigs.k8s.io/lws@v0.9.0 charts/lws/templates/manager/configmap.yaml): the stack's chart
//     values' gangSchedulingManagement (build/<stack>/helm/addons-lws.yaml) as the chart writes it; leader
//     election off (no pod, no namespace of its own); internalCertManagement off: the cert rotator
//     (pkg/cert/cert.go) writes a Secret and patches caBundle into configurations named for a Service, neither
//     of which exists here, so the box writes the serving pair into webhook.certDir itself
//     (api/config/v1alpha1/configuration_types.go ControllerWebhook; pkg/config/config.go AddWebhookSettingsTo);
//     metrics and health probes off ("0": controller-runtime v0.24.1 pkg/manager/manager.go:475,488);
//   - its webhook configurations (charts/lws/templates/webhook/webhook.yaml: the same names, rules and
//     objectSelectors) with clientConfig.url at the loopback server and the box's CA as caBundle.

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"debug/buildinfo"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"
)

// lwsNS is the chart's release namespace in our stacks (helm/addons-lws.yaml) and LWS's own default when it
// runs outside a pod (sigs.k8s.io/lws@v0.9.0 pkg/utils/utils.go:35 defaultNamespace).
const lwsNS = "lws-system"

type LWS struct {
	cmd    *exec.Cmd
	exited chan error // receives cmd.Wait's result once
	URL    string
}

// lwsHooks: path, name, resource group, operations, and whether the chart selects pods of an LWS only.
var lwsMutating = []lwsHook{
	{"/mutate-leaderworkerset-x-k8s-io-v1-leaderworkerset", "mleaderworkerset.kb.io", "leaderworkerset.x-k8s.io", "leaderworkersets", []admissionv1.OperationType{admissionv1.Create, admissionv1.Update}, false},
	{"/mutate--v1-pod", "mpod.kb.io", "", "pods", []admissionv1.OperationType{admissionv1.Create}, true},
}
var lwsValidating = []lwsHook{
	{"/validate-leaderworkerset-x-k8s-io-v1-leaderworkerset", "vleaderworkerset.kb.io", "leaderworkerset.x-k8s.io", "leaderworkersets", []admissionv1.OperationType{admissionv1.Create, admissionv1.Update}, false},
	{"/validate--v1-pod", "vpod.kb.io", "", "pods", []admissionv1.OperationType{admissionv1.Create, admissionv1.Update}, true},
}

type lwsHook struct {
	path, name, group, resource string
	ops                         []admissionv1.OperationType
	podsOfAnLWS                 bool
}

// LWSConfig is the Configuration the chart's ConfigMap holds, for the box: the values' gangSchedulingManagement.
func LWSConfig(helmValues map[string]any, port int, certDir string) ([]byte, error) {
	cfg := map[string]any{
		"apiVersion":             "config.lws.x-k8s.io/v1alpha1",
		"kind":                   "Configuration",
		"leaderElection":         map[string]any{"leaderElect": false},
		"internalCertManagement": map[string]any{"enable": false},
		"webhook":                map[string]any{"host": "127.0.0.1", "port": port, "certDir": certDir},
		"metrics":                map[string]any{"bindAddress": "0"},
		"health":                 map[string]any{"healthProbeBindAddress": "0"},
	}
	if g, ok := helmValues["gangSchedulingManagement"]; ok && g != nil {
		cfg["gangSchedulingManagement"] = g
	}
	return yaml.Marshal(cfg)
}

// ReadLWSValues reads the values of the stack's LWS Helm release (build/<stack>/helm/addons-lws.yaml); ok is
// false when the stack installs no LWS.
func ReadLWSValues(stackDir string) (map[string]any, bool, error) {
	data, err := os.ReadFile(filepath.Join(stackDir, "helm", "addons-lws.yaml"))
	if os.IsNotExist(err) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	var rel struct {
		Values map[string]any `json:"values"`
	}
	if err := yaml.Unmarshal(data, &rel); err != nil {
		return nil, false, fmt.Errorf("helm/addons-lws.yaml: %w", err)
	}
	if rel.Values == nil {
		rel.Values = map[string]any{}
	}
	return rel.Values, true, nil
}

// servingPair writes a fresh CA and a serving certificate for 127.0.0.1 signed by it (tls.crt/tls.key, the
// names controller-runtime's webhook server reads from its CertDir) and returns the CA in PEM.
func servingPair(dir string) ([]byte, error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "box-lws-ca"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, err
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour), IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return nil, err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, "tls.crt"), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, "tls.key"), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), nil
}

func lwsWebhookConfigs(url string, caPEM []byte) (*admissionv1.MutatingWebhookConfiguration, *admissionv1.ValidatingWebhookConfiguration) {
	common := func(h lwsHook) (admissionv1.WebhookClientConfig, []admissionv1.RuleWithOperations, *metav1.LabelSelector) {
		cc := admissionv1.WebhookClientConfig{URL: ptr.To(url + h.path), CABundle: caPEM}
		rules := []admissionv1.RuleWithOperations{{Operations: h.ops, Rule: admissionv1.Rule{
			APIGroups: []string{h.group}, APIVersions: []string{"v1"}, Resources: []string{h.resource}}}}
		var sel *metav1.LabelSelector
		if h.podsOfAnLWS {
			sel = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
				{Key: "leaderworkerset.sigs.k8s.io/name", Operator: metav1.LabelSelectorOpExists}}}
		}
		return cc, rules, sel
	}
	m := &admissionv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "lws-mutating-webhook-configuration"}}
	for _, h := range lwsMutating {
		cc, rules, sel := common(h)
		m.Webhooks = append(m.Webhooks, admissionv1.MutatingWebhook{Name: h.name, ClientConfig: cc, Rules: rules,
			ObjectSelector: sel, FailurePolicy: ptr.To(admissionv1.Fail), SideEffects: ptr.To(admissionv1.SideEffectClassNone),
			AdmissionReviewVersions: []string{"v1"}})
	}
	v := &admissionv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "lws-validating-webhook-configuration"}}
	for _, h := range lwsValidating {
		cc, rules, sel := common(h)
		v.Webhooks = append(v.Webhooks, admissionv1.ValidatingWebhook{Name: h.name, ClientConfig: cc, Rules: rules,
			ObjectSelector: sel, FailurePolicy: ptr.To(admissionv1.Fail), SideEffects: ptr.To(admissionv1.SideEffectClassNone),
			AdmissionReviewVersions: []string{"v1"}})
	}
	return m, v
}

// StartLWS starts the controller manager, waits until its webhook server serves every path the configurations
// name, then registers the configurations. The LWS CRDs (and Volcano's PodGroup CRD when the values name
// volcano) must be established before: its informers and its DisaggregatedSet controller need them.
func StartLWS(ctx context.Context, b *Box, bin string, values map[string]any, logPath string, logf func(string, ...any)) (*LWS, error) {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: lwsNS}}
	if _, err := b.Client.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, err
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(b.Dir, "lws")
	caPEM, err := servingPair(filepath.Join(dir, "certs"))
	if err != nil {
		return nil, err
	}
	cfg, err := LWSConfig(values, port, filepath.Join(dir, "certs"))
	if err != nil {
		return nil, err
	}
	cfgPath := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(cfgPath, cfg, 0o600); err != nil {
		return nil, err
	}
	log, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(log, "# configuration (%s):\n%s\n", cfgPath, cfg)
	cmd := exec.Command(bin, "--kubeconfig="+b.Kubeconfig, "--config="+cfgPath, "--zap-log-level=2")
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	l := &LWS{cmd: cmd, exited: make(chan error, 1), URL: fmt.Sprintf("https://127.0.0.1:%d", port)}
	go func() { l.exited <- cmd.Wait() }()
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	client := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	deadline := time.Now().Add(120 * time.Second)
	for {
		select {
		case err := <-l.exited:
			return nil, fmt.Errorf("lws exited: %v (log %s)", err, logPath)
		default:
		}
		if time.Now().After(deadline) {
			l.Stop()
			return nil, fmt.Errorf("lws's webhook server does not serve its paths within 120s (log %s)", logPath)
		}
		// The webhooks are registered after the manager starts (cmd/main.go setupControllers): an unregistered
		// path answers 404, a registered one answers an AdmissionReview (HTTP 200) even to an empty GET.
		served := 0
		for _, h := range append(append([]lwsHook{}, lwsMutating...), lwsValidating...) {
			resp, err := client.Get(l.URL + h.path)
			if err == nil {
				resp.Body.Close()
				if resp.StatusCode != http.StatusNotFound {
					served++
				}
			}
		}
		if served == len(lwsMutating)+len(lwsValidating) {
			break
		}
		time.Sleep(time.Second)
	}
	m, v := lwsWebhookConfigs(l.URL, caPEM)
	if _, err := b.Client.AdmissionregistrationV1().MutatingWebhookConfigurations().Create(ctx, m, metav1.CreateOptions{}); err != nil {
		l.Stop()
		return nil, fmt.Errorf("lws mutating webhook configuration: %w", err)
	}
	if _, err := b.Client.AdmissionregistrationV1().ValidatingWebhookConfigurations().Create(ctx, v, metav1.CreateOptions{}); err != nil {
		l.Stop()
		return nil, fmt.Errorf("lws validating webhook configuration: %w", err)
	}
	// The API server reads webhook configurations through an informer: give it a moment (as for Kyverno's).
	time.Sleep(3 * time.Second)
	logf("lws controller manager serving its webhooks on 127.0.0.1:%d (log %s)", port, logPath)
	return l, nil
}

func (l *LWS) Stop() {
	if l == nil || l.cmd.Process == nil {
		return
	}
	_ = syscall.Kill(-l.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-l.exited:
	case <-time.After(10 * time.Second):
		_ = syscall.Kill(-l.cmd.Process.Pid, syscall.SIGKILL)
		<-l.exited
	}
}

// LWSVersion: the sigs.k8s.io/lws module version the binary was built from (its Go build information).
func LWSVersion(bin string) string {
	info, err := buildinfo.ReadFile(bin)
	if err != nil {
		return bin + " (no build information: " + err.Error() + ")"
	}
	for _, d := range info.Deps {
		if d.Path == "sigs.k8s.io/lws" {
			return "sigs.k8s.io/lws " + d.Version
		}
	}
	if info.Main.Path == "sigs.k8s.io/lws" {
		return "sigs.k8s.io/lws " + info.Main.Version
	}
	return bin + " (sigs.k8s.io/lws not in its build information)"
}

var podGroupsGVR = schema.GroupVersionResource{Group: "scheduling.volcano.sh", Version: "v1beta1", Resource: "podgroups"}

// PodGroups lists Volcano's PodGroups (none when the kind is not served): the fields compare.py checks, with
// the object that owns each at the top (LWS: PodGroup <- leader pod <- StatefulSet <- LeaderWorkerSet).
func (a *Applier) PodGroups(ctx context.Context) []map[string]any {
	list, err := a.dyn.Resource(podGroupsGVR).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil
	}
	memo := map[string]string{}
	var out []map[string]any
	for _, g := range list.Items {
		spec, _, _ := unstructured.NestedMap(g.Object, "spec")
		status, _, _ := unstructured.NestedMap(g.Object, "status")
		out = append(out, map[string]any{
			"namespace": g.GetNamespace(), "name": g.GetName(),
			"owner":        a.TopOwner(ctx, g.GetNamespace(), g.GetOwnerReferences(), memo),
			"minMember":    spec["minMember"],
			"queue":        spec["queue"],
			"minResources": spec["minResources"],
			"phase":        status["phase"],
			"conditions":   status["conditions"],
			"labels":       g.GetLabels(),
		})
	}
	return out
}
