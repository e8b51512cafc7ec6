// Command chartcheck renders every Helm release that `multinode plan` wrote (build/<stack>/helm/*.yaml) with
// Helm's own library against the upstream chart folders, and reports render errors, custom kinds whose CRD
// nobody installs, values keys the chart never reads, and (through conformance/apiserver's apicheck) every
// rendered object the API server would refuse. See README.md.
//
// Usage: chartcheck -charts DIR [-schemas DIR] [-configs DIR,DIR] [-scratch DIR] [-apicheck BIN] build/<stack> ...
// Writes build/<stack>/engines/helm.txt and the rendered objects to build/<stack>/helm-objects/k8s/.
// Exit 0: no finding; 1: a finding in some stack; 2: usage or I/O error. A release whose chart is not stored
// is listed as NOT CHECKED: it is neither a finding nor a pass.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"helm.sh/helm/v3/pkg/chart/loader"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"
)

type finding struct {
	File, Release, Class, Where, Msg string
}

func (f finding) String() string {
	return strings.Join([]string{f.File, f.Release, f.Class, f.Where, f.Msg}, "\t")
}

const (
	classRender  = "render-error"
	classNoCRD   = "kind-without-crd"
	classUnread  = "unread-values-key"
	classAPI     = "apiserver"
	hookNoteTmpl = " (hook %s)"
)

// releaseResult is the part of a release's check that depends only on chart, name, namespace and values
// (shared by every stack that installs the same release the same way).
type releaseResult struct {
	src      chartSource
	base     rendered
	unstable []string
	keys     []keyVerdict
	dropped  []string // removed dependencies the release would install
	crdOf    []string // CRD glob (schemas/) of a removed dependency
}

type checker struct {
	charts  *chartResolver
	schemas string
	configs []string
	apichk  string
	cache   map[string]*releaseResult
	log     io.Writer
}

type stackCounts struct {
	render, noCRD, unread, api, checked, notChecked int
}

func main() {
	chartsDir := flag.String("charts", "", "folder of upstream chart folders <chart>-<version> (../shared/charts)")
	schemasDir := flag.String("schemas", "schemas", "the repo's schemas/ (CRDs of provided add-ons, given to apicheck)")
	configs := flag.String("configs", "stacks,tests/guides", "comma-separated folders holding Pulumi.<stack>.yaml")
	scratch := flag.String("scratch", "build/.chart-scratch", "where scratch copies of charts with unstored dependencies go")
	apichk := flag.String("apicheck", "", "conformance/apiserver's apicheck binary (empty: the API server step is skipped and said so)")
	flag.Parse()
	if *chartsDir == "" || flag.NArg() == 0 {
		fmt.Fprintln(os.Stderr, "usage: chartcheck -charts DIR [-schemas DIR] [-configs DIR,DIR] [-scratch DIR] [-apicheck BIN] build/<stack>...")
		os.Exit(2)
	}
	c := &checker{charts: newChartResolver(*chartsDir, *scratch), schemas: *schemasDir, apichk: *apichk,
		cache: map[string]*releaseResult{}, log: os.Stdout}
	for _, d := range strings.Split(*configs, ",") {
		if d = strings.TrimSpace(d); d != "" {
			c.configs = append(c.configs, d)
		}
	}
	total, notChecked := 0, 0
	for _, dir := range flag.Args() {
		if !isStackDir(dir) {
			fmt.Printf("chartcheck: %s has neither helm/ nor k8s/: not a stack folder of multinode plan, skipped\n", dir)
			continue
		}
		n, err := c.checkStack(filepath.Clean(dir))
		if err != nil {
			fmt.Fprintln(os.Stderr, "chartcheck:", err)
			os.Exit(2)
		}
		total += n.render + n.noCRD + n.unread + n.api
		notChecked += n.notChecked
	}
	fmt.Printf("chartcheck: %d finding(s) in %d stack(s); %d release(s) NOT CHECKED (chart not stored)\n", total, flag.NArg(), notChecked)
	if total > 0 {
		os.Exit(1)
	}
}

func readReleases(dir string) ([]releaseSpec, error) {
	files, err := filepath.Glob(filepath.Join(dir, "helm", "*.yaml"))
	if err != nil {
		return nil, err
	}
	sort.Strings(files)
	var out []releaseSpec
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		var r releaseSpec
		if err := yaml.Unmarshal(b, &r); err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		if r.Values == nil {
			r.Values = map[string]interface{}{}
		}
		r.File = filepath.Join(filepath.Base(dir), "helm", filepath.Base(f))
		out = append(out, r)
	}
	return out, nil
}

// check renders one release and judges its keys (cached across stacks).
func (c *checker) check(r releaseSpec) *releaseResult {
	vj, _ := json.Marshal(r.Values)
	src := c.charts.resolve(r)
	key := strings.Join([]string{src.Folder, r.Name, r.Namespace, fmt.Sprint(r.SkipCrds), string(vj)}, "\x00")
	if res, ok := c.cache[key]; ok {
		return res
	}
	res := &releaseResult{src: src}
	c.cache[key] = res
	if src.NotChecked != "" {
		return res
	}
	render := func(v map[string]interface{}) rendered { return renderRelease(src.Dir, r, v) }
	res.base = render(r.Values)
	if res.base.Err != nil {
		return res
	}
	// two renders of the same values: templates whose output differs (generated certificates, random
	// strings) cannot show whether a key is read, and are left out of the comparison
	again := render(r.Values)
	unstable := map[string]bool{}
	bySrc := func(rr rendered) map[string]string {
		m := map[string]string{}
		for _, d := range rr.Docs {
			m[d.Source] += d.Body
		}
		return m
	}
	a, b := bySrc(res.base), bySrc(again)
	for s := range a {
		if a[s] != b[s] {
			unstable[s] = true
		}
	}
	for s := range unstable {
		res.unstable = append(res.unstable, s)
	}
	sort.Strings(res.unstable)

	notJudged, helmRead := map[string]string{}, map[string]string{}
	if len(src.Dropped) > 0 {
		ch, err := loader.LoadDir(src.Dir)
		if err == nil {
			on, err := droppedEnabled(ch, r.Values, src.Dropped)
			if err == nil {
				for _, d := range on {
					res.dropped = append(res.dropped, fmt.Sprintf("%s %s (%s)", d.Name, d.Version, d.Repository))
					if g, ok := droppedDepCRDs[d.Name]; ok {
						res.crdOf = append(res.crdOf, g)
					}
				}
			}
		}
		for _, d := range src.Dropped {
			notJudged[depKey(d)] = fmt.Sprintf("values of the dependency %s %s, which is not stored (left out of the scratch copy)", d.Name, d.Version)
			for _, cnd := range strings.Split(d.Condition, ",") {
				if cnd = strings.TrimSpace(cnd); cnd != "" {
					helmRead[cnd] = fmt.Sprintf("condition of the dependency %s (read by Helm, not by a template)", d.Name)
				}
			}
		}
	}
	res.keys = judgeKeys(render, r.Values, res.base, unstable, notJudged, helmRead)
	return res
}

func (c *checker) configFile(stack string) string {
	for _, d := range c.configs {
		p := filepath.Join(d, "Pulumi."+stack+".yaml")
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	return ""
}

var unsafeName = regexp.MustCompile(`[^A-Za-z0-9._-]+`)

func (c *checker) checkStack(dir string) (stackCounts, error) {
	var n stackCounts
	stack := filepath.Base(dir)
	rels, err := readReleases(dir)
	if err != nil {
		return n, err
	}
	var findings []finding
	var notes []string

	// the CRDs the stack has: its own objects, provided add-ons, then each release's
	ix := crdIndex{}
	if err := ix.addFiles(filepath.Join(dir, "k8s", "*.yaml"), "the stack's k8s/"); err != nil {
		return n, err
	}
	if cf := c.configFile(stack); cf != "" {
		prov, err := providedAddons(cf)
		if err != nil {
			return n, err
		}
		for _, a := range prov {
			if s, ok := providedSchemas[a]; ok {
				if err := ix.addFiles(filepath.Join(c.schemas, s, "*.yaml"), "addons."+a+".provided (schemas/"+s+")"); err != nil {
					return n, err
				}
				notes = append(notes, fmt.Sprintf("addons.%s.provided: its CRDs are taken from schemas/%s (the cluster is expected to have them)", a, s))
			}
		}
	} else {
		notes = append(notes, "no Pulumi."+stack+".yaml in "+strings.Join(c.configs, ", ")+": add-ons marked provided not read")
	}
	results := make([]*releaseResult, len(rels))
	for i, r := range rels {
		res := c.check(r)
		results[i] = res
		for _, d := range res.base.Docs {
			ix.addDoc(d.Body, "release "+r.Name+" ("+d.Source+")")
		}
		for _, g := range res.crdOf {
			if err := ix.addFiles(filepath.Join(c.schemas, g), "schemas/ for the dependency left out of "+res.src.Folder); err != nil {
				return n, err
			}
		}
	}

	objDir := filepath.Join(dir, "helm-objects")
	if err := os.RemoveAll(objDir); err != nil {
		return n, err
	}
	if err := os.MkdirAll(filepath.Join(objDir, "k8s"), 0o755); err != nil {
		return n, err
	}
	type out struct{ name, body string }
	var crdFiles, objFiles []out

	for i, r := range rels {
		res := results[i]
		label := fmt.Sprintf("%s %s %s", r.Name, r.chartName(), r.Version)
		if res.src.NotChecked != "" {
			n.notChecked++
			notes = append(notes, fmt.Sprintf("NOT CHECKED: release %s (%s): %s", r.Name, r.File, res.src.NotChecked))
			continue
		}
		n.checked++
		if res.src.StandIn != "" {
			notes = append(notes, fmt.Sprintf("stand-in: release %s: chart %s %s rendered with the folder %s: %s", r.Name, r.chartName(), r.Version, res.src.Folder, res.src.StandIn))
		}
		for _, d := range res.dropped {
			notes = append(notes, fmt.Sprintf("not rendered: release %s: dependency %s is enabled but not stored; its objects are not checked", r.Name, d))
		}
		if res.base.Err != nil {
			n.render++
			findings = append(findings, finding{r.File, label, classRender, "-", oneLine(res.base.Err.Error())})
			continue
		}
		for _, s := range res.unstable {
			notes = append(notes, fmt.Sprintf("unstable: release %s: %s differs between two renders of the same values; left out of the values-key comparison", r.Name, s))
		}
		for j, d := range res.base.Docs {
			var m objMeta
			if err := yaml.Unmarshal([]byte(d.Body), &m); err != nil {
				n.render++
				findings = append(findings, finding{r.File, label, classRender, d.Source, "rendered document is not YAML: " + oneLine(err.Error())})
				continue
			}
			where := d.Source
			if d.Hook != "" {
				where += fmt.Sprintf(hookNoteTmpl, d.Hook)
			}
			if msg := ix.missingCRD(m); msg != "" {
				n.noCRD++
				findings = append(findings, finding{r.File, label, classNoCRD, where, fmt.Sprintf("%s %s: %s", m.Kind, m.Metadata.Name, msg)})
			}
			name := fmt.Sprintf("%s-%03d-%s-%s.yaml", unsafeName.ReplaceAllString(r.Name, "_"), j, m.Kind, unsafeName.ReplaceAllString(m.Metadata.Name, "_"))
			body := d.Body
			if m.Metadata.Namespace == "" && !clusterScoped(m, ix) {
				body = setNamespace(body, r.Namespace)
			}
			if m.Kind == "CustomResourceDefinition" {
				crdFiles = append(crdFiles, out{name, body})
			} else {
				objFiles = append(objFiles, out{name, body})
			}
		}
		var read []string
		for _, k := range res.keys {
			if k.Read {
				read = append(read, k.Key+" ("+k.How+")")
			}
		}
		if len(read) > 0 {
			notes = append(notes, fmt.Sprintf("read: release %s: %d values key(s): %s", r.Name, len(read), strings.Join(read, "; ")))
		}
		for _, k := range res.keys {
			switch {
			case !k.Judged:
				notes = append(notes, fmt.Sprintf("not judged: release %s: values key %s: %s", r.Name, k.Key, k.How))
			case !k.Read:
				n.unread++
				findings = append(findings, finding{r.File, label, classUnread, "values." + k.Key,
					"the chart does not read this key with these values: setting it to another value or removing it leaves every rendered object byte-identical (misspelt, misplaced, or read only under a setting the values turn off); fix or remove it in addons.<name>.values"})
			}
		}
	}
	// CRDs first, then everything else, numbered in that order (apicheck reads k8s/*.yaml sorted)
	all := append(crdFiles, objFiles...)
	for i, o := range all {
		if err := os.WriteFile(filepath.Join(objDir, "k8s", fmt.Sprintf("%04d-%s", i+1, o.name)), []byte(o.body), 0o644); err != nil {
			return n, err
		}
	}
	apiLines, apiSummary, err := c.runAPICheck(objDir, len(all))
	if err != nil {
		return n, err
	}
	for _, l := range apiLines {
		n.api++
		findings = append(findings, finding{filepath.Join(stack, "helm-objects"), "-", classAPI, "-", l})
	}
	notes = append(notes, apiSummary)

	var b strings.Builder
	for _, f := range findings {
		b.WriteString(f.String() + "\n")
	}
	summary := fmt.Sprintf("helm %s: %d finding(s): %d render error(s), %d kind(s) without a CRD, %d unread values key(s), %d API server finding(s); %d release(s) rendered, %d NOT CHECKED; %d object(s) in %s",
		stack, n.render+n.noCRD+n.unread+n.api, n.render, n.noCRD, n.unread, n.api, n.checked, n.notChecked, len(all), filepath.Join(stack, "helm-objects", "k8s"))
	b.WriteString("# " + summary + "\n")
	for _, s := range notes {
		b.WriteString("# " + s + "\n")
	}
	if err := os.MkdirAll(filepath.Join(dir, "engines"), 0o755); err != nil {
		return n, err
	}
	vf := filepath.Join(dir, "engines", "helm.txt")
	if err := os.WriteFile(vf, []byte(b.String()), 0o644); err != nil {
		return n, err
	}
	for _, f := range findings {
		fmt.Fprintln(c.log, f.String())
	}
	for _, s := range notes {
		if strings.HasPrefix(s, "NOT CHECKED") {
			fmt.Fprintln(c.log, s)
		}
	}
	fmt.Fprintln(c.log, summary, "->", vf)
	return n, nil
}

// runAPICheck sends the rendered objects through conformance/apiserver's apicheck; its finding lines come back.
func (c *checker) runAPICheck(objDir string, count int) ([]string, string, error) {
	if c.apichk == "" {
		return nil, "API server check not run (no -apicheck binary given)", nil
	}
	if count == 0 {
		return nil, "API server check: no rendered objects", nil
	}
	cmd := exec.Command(c.apichk, "-schemas", c.schemas, "-out", "apiserver.txt", objDir)
	outp, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); ok && ee.ExitCode() == 1 {
		err = nil
	}
	if err != nil {
		return nil, "", fmt.Errorf("%s: %v\n%s", c.apichk, err, outp)
	}
	verdict, err := os.ReadFile(filepath.Join(objDir, "engines", "apiserver.txt"))
	if err != nil {
		return nil, "", err
	}
	var lines []string
	summary := "API server check: see " + filepath.Join(objDir, "engines", "apiserver.txt")
	for _, l := range strings.Split(string(verdict), "\n") {
		switch {
		case l == "":
		case strings.HasPrefix(l, "# apiserver "):
			summary = "API server check (conformance/apiserver apicheck): " + strings.TrimPrefix(l, "# apiserver ")
		case strings.HasPrefix(l, "#"):
		default:
			lines = append(lines, l)
		}
	}
	return lines, summary, nil
}

// clusterScoped: built-in cluster-scoped kinds (client-go's RESTMapper is not available offline; the list is
// kube-apiserver's cluster-scoped resources of the groups charts render) or a CRD with scope Cluster.
func clusterScoped(m objMeta, ix crdIndex) bool {
	switch m.Kind {
	case "Namespace", "Node", "PersistentVolume", "ClusterRole", "ClusterRoleBinding", "CustomResourceDefinition",
		"StorageClass", "CSIDriver", "PriorityClass", "RuntimeClass", "IngressClass", "APIService",
		"MutatingWebhookConfiguration", "ValidatingWebhookConfiguration", "ValidatingAdmissionPolicy",
		"ValidatingAdmissionPolicyBinding", "MutatingAdmissionPolicy", "MutatingAdmissionPolicyBinding",
		"FlowSchema", "PriorityLevelConfiguration", "VolumeAttachment", "CertificateSigningRequest":
		return true
	}
	if gv, err := schema.ParseGroupVersion(m.APIVersion); err == nil {
		return ix[schema.GroupKind{Group: gv.Group, Kind: m.Kind}].Cluster
	}
	return false
}

// setNamespace puts the release namespace into a namespaced object that has none (what Helm's kube client does
// on install: helm/helm@v3.18.6 pkg/kube/client.go Build with the release namespace).
func setNamespace(body, ns string) string {
	var obj map[string]interface{}
	if yaml.Unmarshal([]byte(body), &obj) != nil {
		return body
	}
	md, _ := obj["metadata"].(map[string]interface{})
	if md == nil {
		md = map[string]interface{}{}
		obj["metadata"] = md
	}
	md["namespace"] = ns
	b, err := yaml.Marshal(obj)
	if err != nil {
		return body
	}
	return string(b)
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

func isStackDir(dir string) bool {
	for _, sub := range []string{"helm", "k8s"} {
		if fi, err := os.Stat(filepath.Join(dir, sub)); err == nil && fi.IsDir() {
			return true
		}
	}
	return false
}
