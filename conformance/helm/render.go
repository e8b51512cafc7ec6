package main

// Rendering one release with Helm's own install action in client-only dry-run mode: the code path of
// `helm template --include-crds --kube-version 1.33.0` (helm/helm@v3.18.6 cmd/helm/template.go:67-93) and of the
// install the kubernetes provider runs for a helm.v3.Release (pulumi/pulumi-kubernetes@v4.25.0
// provider/pkg/provider/helm_release.go: action.NewInstall), which is the same Helm module at the same version.

import (
	"bytes"
	"fmt"
	"io"
	"regexp"
	"sort"
	"strings"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/release"
	"sigs.k8s.io/yaml"
)

// kubeVersion: the Kubernetes minor the project targets (conformance/apiserver pins k8s.io/kubernetes v1.33.13).
const kubeVersion = "v1.33.13"

// doc is one rendered YAML document with the template it came from.
type doc struct {
	Source string // chart-relative template or crds/ file
	Body   string
	Hook   string // the hook events for a hook, "" for a plain manifest
}

type rendered struct {
	Docs []doc
	Err  error
}

// renderRelease renders a release from a chart folder. The chart is loaded fresh each time: Helm's dependency
// processing (chartutil.ProcessDependenciesWithMerge) edits the loaded chart in place.
func renderRelease(dir string, r releaseSpec, vals map[string]interface{}) rendered {
	ch, err := loader.LoadDir(dir)
	if err != nil {
		return rendered{Err: fmt.Errorf("loading the chart: %w", err)}
	}
	return renderChart(ch, r, vals)
}

func renderChart(ch *chart.Chart, r releaseSpec, vals map[string]interface{}) rendered {
	kv, err := chartutil.ParseKubeVersion(kubeVersion)
	if err != nil {
		return rendered{Err: err}
	}
	cfg := &action.Configuration{Log: func(string, ...interface{}) {}}
	inst := action.NewInstall(cfg)
	inst.DryRun = true
	inst.DryRunOption = "client"
	inst.ClientOnly = true
	inst.Replace = true
	inst.ReleaseName = r.Name
	inst.Namespace = r.Namespace
	inst.KubeVersion = kv
	// What a real install adds to the capabilities: the chart's own crds/ are installed before Helm reads
	// the cluster's API versions (helm/helm@v3.18.6 pkg/action/install.go:260-266, then getCapabilities).
	inst.APIVersions = crdGroupVersions(ch)
	inst.IncludeCRDs = !r.SkipCrds
	// deep copy: Helm coalesces into the map it is given
	rel, err := inst.Run(ch, deepCopy(vals).(map[string]interface{}))
	if err != nil {
		return rendered{Err: err}
	}
	return rendered{Docs: splitRelease(rel)}
}

func crdGroupVersions(ch *chart.Chart) []string {
	seen := map[string]bool{}
	for _, f := range ch.CRDObjects() {
		for _, d := range splitDocs(string(f.File.Data)) {
			var crd struct {
				Spec struct {
					Group    string `json:"group"`
					Versions []struct {
						Name string `json:"name"`
					} `json:"versions"`
				} `json:"spec"`
			}
			if yaml.Unmarshal([]byte(d), &crd) != nil {
				continue
			}
			for _, v := range crd.Spec.Versions {
				seen[crd.Spec.Group+"/"+v.Name] = true
			}
		}
	}
	out := make([]string, 0, len(seen))
	for k := range seen {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

var sourceLine = regexp.MustCompile(`(?m)^# Source: (.*)$`)

// splitRelease: the manifest (CRDs first, as IncludeCRDs prints them, then templates) and the hooks, except
// `helm test` hooks, which an install never runs (`helm template --skip-tests` leaves them out the same way).
func splitRelease(rel *release.Release) []doc {
	var out []doc
	add := func(text, source, hook string) {
		for _, d := range splitDocs(text) {
			src := source
			if m := sourceLine.FindStringSubmatch(d); m != nil {
				src = m[1]
			}
			out = append(out, doc{Source: src, Body: d, Hook: hook})
		}
	}
	add(rel.Manifest, "", "")
	for _, h := range rel.Hooks {
		test := false
		var ev []string
		for _, e := range h.Events {
			if e == release.HookTest {
				test = true
			}
			ev = append(ev, string(e))
		}
		if test {
			continue
		}
		add(h.Manifest, h.Path, strings.Join(ev, ","))
	}
	return out
}

// splitDocs splits a YAML stream on `---` lines and drops documents with nothing but comments.
func splitDocs(s string) []string {
	var out []string
	for _, part := range regexp.MustCompile(`(?m)^---[ \t]*$`).Split(s, -1) {
		if hasContent(part) {
			out = append(out, strings.TrimSpace(part)+"\n")
		}
	}
	return out
}

func hasContent(s string) bool {
	for _, l := range strings.Split(s, "\n") {
		t := strings.TrimSpace(l)
		if t != "" && !strings.HasPrefix(t, "#") {
			return true
		}
	}
	return false
}

func deepCopy(v interface{}) interface{} {
	switch t := v.(type) {
	case map[string]interface{}:
		m := make(map[string]interface{}, len(t))
		for k, x := range t {
			m[k] = deepCopy(x)
		}
		return m
	case []interface{}:
		l := make([]interface{}, len(t))
		for i, x := range t {
			l[i] = deepCopy(x)
		}
		return l
	default:
		return v
	}
}

// text is the rendered output as one string, documents in order, with the documents of the templates in
// unstable (output that differs between two renders of the same values: generated certificates, random
// strings) reduced to their source name.
func (r rendered) text(unstable map[string]bool) string {
	var b bytes.Buffer
	for _, d := range r.Docs {
		if unstable[d.Source] {
			fmt.Fprintf(&b, "---\n# unstable %s\n", d.Source)
			continue
		}
		b.WriteString("---\n")
		_, _ = io.WriteString(&b, d.Body)
	}
	return b.String()
}
