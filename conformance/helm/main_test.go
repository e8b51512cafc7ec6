package main

// Planted defects against the real chart folders of ../shared/charts (CHARTS_DIR overrides the path), each
// next to a control that passes. The API server step (apicheck) is not run here: conformance/apiserver has
// its own planted-defect tests, and `make chart-check` runs it on every stack.

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func chartsDir(t *testing.T) string {
	t.Helper()
	d := os.Getenv("CHARTS_DIR")
	if d == "" {
		d = filepath.Join("..", "..", "..", "shared", "charts")
	}
	if _, err := os.Stat(filepath.Join(d, "nvsentinel-v1.19.0", "Chart.yaml")); err != nil {
		t.Fatalf("the upstream chart folders are needed (set CHARTS_DIR to ../shared/charts): %v", err)
	}
	return d
}

// nvsentinelValues: the values `multinode plan` renders for NVSentinel on aws-dev (build/aws-dev/helm/
// addons-nvsentinel.yaml), with podMonitor off as NVSentinel's README says for clusters without Prometheus.
const nvsentinelValues = `
  gpu-health-monitor:
    runtimeClassName: nvidia
  podMonitor:
    enabled: false
  global:
    nicHealthMonitor:
      enabled: false
    dcgm:
      embedded:
        endpoint: localhost
        port: 5555
      mode: embedded-mode
`

func nvsentinel(values string) string {
	return "name: nvsentinel\nnamespace: nvsentinel\nchart: oci://ghcr.io/nvidia/nvsentinel\nversion: v1.19.0\nvalues:" + values
}

const lwsRelease = `name: lws
namespace: lws-system
chart: oci://registry.k8s.io/lws/charts/lws
version: 0.10.0
values:
  gangSchedulingManagement:
    schedulerProvider: volcano
`

// run writes a stack folder with the given release files and k8s/ objects, checks it and returns helm.txt.
func run(t *testing.T, charts string, releases map[string]string, k8s map[string]string) (string, stackCounts) {
	t.Helper()
	root := t.TempDir()
	stack := filepath.Join(root, "build", "planted")
	for dir, files := range map[string]map[string]string{"helm": releases, "k8s": k8s} {
		if err := os.MkdirAll(filepath.Join(stack, dir), 0o755); err != nil {
			t.Fatal(err)
		}
		for name, body := range files {
			if err := os.WriteFile(filepath.Join(stack, dir, name), []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	var log bytes.Buffer
	c := &checker{charts: newChartResolver(charts, filepath.Join(root, "scratch")), schemas: filepath.Join("..", "..", "schemas"),
		cache: map[string]*releaseResult{}, log: &log}
	n, err := c.checkStack(stack)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(stack, "engines", "helm.txt"))
	if err != nil {
		t.Fatal(err)
	}
	return string(b), n
}

func findingLines(verdict, class string) []string {
	var out []string
	for _, l := range strings.Split(verdict, "\n") {
		if !strings.HasPrefix(l, "#") && strings.Contains(l, "\t"+class+"\t") {
			out = append(out, l)
		}
	}
	return out
}

func TestMisspeltNVSentinelKeyIsUnread(t *testing.T) {
	charts := chartsDir(t)
	// control: the values as plan renders them (podMonitor off): no finding, every key read
	v, n := run(t, charts, map[string]string{"nvsentinel.yaml": nvsentinel(nvsentinelValues)}, nil)
	if n.render+n.noCRD+n.unread != 0 {
		t.Fatalf("control has findings:\n%s", v)
	}
	if !strings.Contains(v, "global.dcgm.embedded.port (") || !strings.Contains(v, "podMonitor.enabled (") {
		t.Fatalf("control: the keys the chart reads are not listed as read:\n%s", v)
	}
	// planted: `embeded` for `embedded`
	planted := strings.Replace(nvsentinelValues, "      embedded:\n        endpoint: localhost\n        port: 5555",
		"      embedded:\n        endpoint: localhost\n      embeded:\n        port: 5555", 1)
	if planted == nvsentinelValues {
		t.Fatal("plant failed")
	}
	v, n = run(t, charts, map[string]string{"nvsentinel.yaml": nvsentinel(planted)}, nil)
	got := findingLines(v, classUnread)
	if n.unread != 1 || len(got) != 1 || !strings.Contains(got[0], "\tvalues.global.dcgm.embeded.port\t") {
		t.Fatalf("want one unread key values.global.dcgm.embeded.port, got %d:\n%s", n.unread, v)
	}
}

func TestPodMonitorLeftOnHasNoCRD(t *testing.T) {
	charts := chartsDir(t)
	on := strings.Replace(nvsentinelValues, "enabled: false\n  global", "enabled: true\n  global", 1)
	if on == nvsentinelValues {
		t.Fatal("plant failed")
	}
	v, n := run(t, charts, map[string]string{"nvsentinel.yaml": nvsentinel(on)}, nil)
	got := findingLines(v, classNoCRD)
	if n.noCRD != 1 || len(got) != 1 || !strings.Contains(got[0], "PodMonitor") || !strings.Contains(got[0], "monitoring.coreos.com/v1") {
		t.Fatalf("want one PodMonitor without a CRD, got %d:\n%s", n.noCRD, v)
	}
	// control: the stack installs the CRD (as the Prometheus Operator would): no finding
	crd := func(version string) string {
		return `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: podmonitors.monitoring.coreos.com}
spec:
  group: monitoring.coreos.com
  scope: Namespaced
  names: {kind: PodMonitor, plural: podmonitors}
  versions: [{name: ` + version + `, served: true, storage: true}]
`
	}
	v, n = run(t, charts, map[string]string{"nvsentinel.yaml": nvsentinel(on)}, map[string]string{"001-crd.yaml": crd("v1")})
	if n.noCRD != 0 {
		t.Fatalf("a CRD in the stack's k8s/ is not seen:\n%s", v)
	}
	// a CRD that does not serve the version the chart renders is no CRD for it
	v, n = run(t, charts, map[string]string{"nvsentinel.yaml": nvsentinel(on)}, map[string]string{"001-crd.yaml": crd("v1alpha1")})
	if got := findingLines(v, classNoCRD); n.noCRD != 1 || len(got) != 1 || !strings.Contains(got[0], "serves version(s) v1alpha1, not v1") {
		t.Fatalf("want a finding for the unserved version, got:\n%s", v)
	}
}

func TestUnknownKeyInAnotherChart(t *testing.T) {
	charts := chartsDir(t)
	v, n := run(t, charts, map[string]string{"lws.yaml": lwsRelease}, nil)
	if n.render+n.noCRD+n.unread != 0 || !strings.Contains(v, "gangSchedulingManagement.schedulerProvider (") {
		t.Fatalf("control (LWS as the stacks render it) is not clean:\n%s", v)
	}
	planted := strings.Replace(lwsRelease, "gangSchedulingManagement:", "gangSchedulingManagment:", 1)
	v, n = run(t, charts, map[string]string{"lws.yaml": planted}, nil)
	got := findingLines(v, classUnread)
	if n.unread != 1 || len(got) != 1 || !strings.Contains(got[0], "values.gangSchedulingManagment.schedulerProvider") {
		t.Fatalf("want the misspelt LWS key reported, got:\n%s", v)
	}
	// the method's limit (README.md): LWS copies the whole gangSchedulingManagement map into its config file
	// (kubernetes-sigs/lws@v0.10.0 charts/lws/templates/manager/configmap.yaml:17-19), so a misspelt key
	// inside it changes the output and counts as read; only the controller reading that file can refuse it
	inside := strings.Replace(lwsRelease, "schedulerProvider:", "schedulerProvidr:", 1)
	v, n = run(t, charts, map[string]string{"lws.yaml": inside}, nil)
	if n.unread != 0 || !strings.Contains(v, "gangSchedulingManagement.schedulerProvidr (") {
		t.Fatalf("a key inside a map the chart copies whole is read (limit), got:\n%s", v)
	}
	// a key the Kyverno chart (a scratch copy: its remote dependencies are not stored) has no use for
	kyv := "name: kyverno\nnamespace: kyverno\nchart: kyverno\nversion: 3.9.0\nvalues:\n  admissionController:\n    replicas: 3\n  admissionControler:\n    replicas: 3\n"
	v, n = run(t, charts, map[string]string{"kyverno.yaml": kyv}, nil)
	got = findingLines(v, classUnread)
	if n.unread != 1 || len(got) != 1 || !strings.Contains(got[0], "values.admissionControler.replicas") {
		t.Fatalf("want the misspelt Kyverno key reported and the right one read, got:\n%s", v)
	}
	if !strings.Contains(v, "dependency kyverno-api") {
		t.Fatalf("the left-out kyverno-api dependency is not said:\n%s", v)
	}
}

func TestRenderError(t *testing.T) {
	charts := chartsDir(t)
	bad := strings.Replace(nvsentinelValues, "mode: embedded-mode", "mode: no-such-mode", 1)
	v, n := run(t, charts, map[string]string{"nvsentinel.yaml": nvsentinel(bad)}, nil)
	if got := findingLines(v, classRender); n.render != 1 || len(got) != 1 || !strings.Contains(got[0], "no-such-mode") {
		t.Fatalf("want one render error naming the value, got:\n%s", v)
	}
}

func TestMissingChartIsNotCheckedNeverPassed(t *testing.T) {
	charts := chartsDir(t)
	bumped := strings.Replace(lwsRelease, "version: 0.10.0", "version: 0.10.9", 1)
	v, n := run(t, charts, map[string]string{"lws.yaml": bumped}, nil)
	if n.notChecked != 1 || n.checked != 0 {
		t.Fatalf("want 1 not checked and 0 rendered, got %+v:\n%s", n, v)
	}
	if !strings.Contains(v, "# NOT CHECKED: release lws") || !strings.Contains(v, "chart lws 0.10.9 has no folder lws-0.10.9") {
		t.Fatalf("the not-checked line does not name the chart and version:\n%s", v)
	}
	// a required dependency that is not stored (Karmada's Bitnami common) is not checked either
	kar := "name: karmada\nnamespace: karmada-system\nchart: karmada\nversion: v1.18.2\nvalues: {}\n"
	v, n = run(t, charts, map[string]string{"karmada.yaml": kar}, nil)
	if n.notChecked != 1 || !strings.Contains(v, "dependency common 2.31.4") {
		t.Fatalf("karmada without Bitnami common must be NOT CHECKED naming it:\n%s", v)
	}
}

// A chart of our own: a key read only under a condition the values turn off is reported (the method's
// limit, README.md), and a template whose output is random every time does not make every key look read.
func TestUnstableOutputAndConditionalKey(t *testing.T) {
	charts := t.TempDir()
	ch := filepath.Join(charts, "tiny-0.1.0")
	files := map[string]string{
		"Chart.yaml":               "apiVersion: v2\nname: tiny\nversion: 0.1.0\n",
		"values.yaml":              "a: 1\nwithExtra: false\nextra: {}\n",
		"templates/cm.yaml":        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cm}\ndata:\n  a: {{ .Values.a | quote }}\n{{- if .Values.withExtra }}\n  x: {{ .Values.extra.x | quote }}\n{{- end }}\n",
		"templates/secret.yaml":    "apiVersion: v1\nkind: Secret\nmetadata: {name: s}\nstringData:\n  p: {{ randAlphaNum 16 | quote }}\n",
		"templates/unrelated.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: u}\n",
	}
	for p, b := range files {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(ch, p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(ch, p), []byte(b), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	rel := "name: t\nnamespace: t\nchart: tiny\nversion: 0.1.0\nvalues:\n  a: 2\n  b: 3\n  extra:\n    x: y\n"
	v, n := run(t, charts, map[string]string{"t.yaml": rel}, nil)
	got := findingLines(v, classUnread)
	if n.unread != 2 || len(got) != 2 || !strings.Contains(v, "\tvalues.b\t") || !strings.Contains(v, "\tvalues.extra.x\t") {
		t.Fatalf("want b and extra.x unread (a read), got:\n%s", v)
	}
	if !strings.Contains(v, "unstable: release t: tiny/templates/secret.yaml") {
		t.Fatalf("the random Secret is not set aside:\n%s", v)
	}
	// with the condition on (withExtra), extra.x is read
	v, n = run(t, charts, map[string]string{"t.yaml": strings.Replace(rel, "  b: 3\n", "  withExtra: true\n", 1)}, nil)
	if n.unread != 0 {
		t.Fatalf("with on: true every key is read:\n%s", v)
	}
}

func TestLeavesAndSentinels(t *testing.T) {
	vals := map[string]interface{}{"a": map[string]interface{}{"b": true, "c": map[string]interface{}{}}, "l": []interface{}{1.0}, "n": nil, "s": ""}
	var keys []string
	for _, l := range leaves(vals, nil) {
		keys = append(keys, l.String())
		if s, ok := sentinelFor(l.Value); ok && reflect.DeepEqual(s, l.Value) {
			t.Fatalf("sentinel of %s equals its value", l)
		}
	}
	if strings.Join(keys, ",") != "a.b,a.c,l,n,s" {
		t.Fatalf("leaves: %v", keys)
	}
	if _, ok := sentinelFor(nil); ok {
		t.Fatal("null has no sentinel: only removal judges it")
	}
}

// Every rendered object goes through conformance/apiserver's apicheck (APICHECK: its binary; `make test` builds
// it and sets it): a ConfigMap with a field the API server does not know is an `apiserver` finding.
func TestRenderedObjectsThroughAPIServer(t *testing.T) {
	bin := os.Getenv("APICHECK")
	if bin == "" {
		t.Skip("APICHECK (conformance/bin/apicheck) not set: make -C conformance/helm test sets it")
	}
	charts := t.TempDir()
	ch := filepath.Join(charts, "tiny-0.1.0")
	for p, b := range map[string]string{
		"Chart.yaml":        "apiVersion: v2\nname: tiny\nversion: 0.1.0\n",
		"templates/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cm}\n{{ .Values.field }}: {a: b}\n",
	} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(ch, p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(ch, p), []byte(b), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	root := t.TempDir()
	check := func(field string) (string, stackCounts) {
		stack := filepath.Join(root, field)
		if err := os.MkdirAll(filepath.Join(stack, "helm"), 0o755); err != nil {
			t.Fatal(err)
		}
		rel := "name: t\nnamespace: t\nchart: tiny\nversion: 0.1.0\nvalues:\n  field: " + field + "\n"
		if err := os.WriteFile(filepath.Join(stack, "helm", "t.yaml"), []byte(rel), 0o644); err != nil {
			t.Fatal(err)
		}
		var log bytes.Buffer
		c := &checker{charts: newChartResolver(charts, filepath.Join(root, "scratch")), schemas: filepath.Join("..", "..", "schemas"),
			apichk: bin, cache: map[string]*releaseResult{}, log: &log}
		n, err := c.checkStack(stack)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := os.ReadFile(filepath.Join(stack, "engines", "helm.txt"))
		return string(b), n
	}
	if v, n := check("data"); n.api != 0 || !strings.Contains(v, "API server check (conformance/apiserver apicheck)") {
		t.Fatalf("control (a valid ConfigMap) is not clean or apicheck did not run:\n%s", v)
	}
	v, n := check("spec")
	if got := findingLines(v, classAPI); n.api != 1 || len(got) != 1 || !strings.Contains(got[0], `unknown field "spec"`) {
		t.Fatalf("want one apiserver finding for the unknown field, got:\n%s", v)
	}
}

// A custom kind whose CRD comes from an add-on the stack marks `provided` (the cluster runs it) is not a
// finding: its CRDs are taken from schemas/<addon>/. Without `provided` it is.
func TestProvidedAddonCRDs(t *testing.T) {
	charts := t.TempDir()
	ch := filepath.Join(charts, "tiny-0.1.0")
	for p, b := range map[string]string{
		"Chart.yaml":        "apiVersion: v2\nname: tiny\nversion: 0.1.0\n",
		"templates/cp.yaml": "apiVersion: kyverno.io/v1\nkind: ClusterPolicy\nmetadata: {name: p}\nspec: {rules: []}\n",
	} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(ch, p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(ch, p), []byte(b), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, provided := range []bool{false, true} {
		root := t.TempDir()
		stack := filepath.Join(root, "build", "planted")
		if err := os.MkdirAll(filepath.Join(stack, "helm"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(stack, "helm", "t.yaml"), []byte("name: t\nnamespace: t\nchart: tiny\nversion: 0.1.0\nvalues: {}\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		cfg := fmt.Sprintf("config:\n  multinode:addons:\n    kyverno: {provided: %v}\n", provided)
		if err := os.WriteFile(filepath.Join(root, "Pulumi.planted.yaml"), []byte(cfg), 0o644); err != nil {
			t.Fatal(err)
		}
		var log bytes.Buffer
		c := &checker{charts: newChartResolver(charts, filepath.Join(root, "scratch")), schemas: filepath.Join("..", "..", "schemas"),
			configs: []string{root}, cache: map[string]*releaseResult{}, log: &log}
		n, err := c.checkStack(stack)
		if err != nil {
			t.Fatal(err)
		}
		if want := map[bool]int{false: 1, true: 0}[provided]; n.noCRD != want {
			b, _ := os.ReadFile(filepath.Join(stack, "engines", "helm.txt"))
			t.Fatalf("provided=%v: want %d kind(s) without a CRD, got %d:\n%s", provided, want, n.noCRD, b)
		}
	}
}
