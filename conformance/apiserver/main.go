// Command apicheck sends every object that `multinode plan` rendered (build/<stack>/k8s/*.yaml) through
// the API server's own CREATE path, offline: k8s.io/kubernetes and k8s.io/apiextensions-apiserver used as
// libraries at the version pinned in go.mod. See README.md.
//
// Usage: apicheck [-schemas DIR] [-out NAME] build/<stack> ...
// Writes build/<stack>/engines/<NAME> (default apiserver.txt) per stack; exit 1 on any finding, 2 on a
// usage or I/O error.
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/multinode/conformance/k8sfiles"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"
)

type typeMetaDoc struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name      string `json:"name"`
		Namespace string `json:"namespace"`
	} `json:"metadata"`
}

func typeMeta(doc []byte) (typeMetaDoc, error) {
	var tm typeMetaDoc
	err := yaml.Unmarshal(doc, &tm)
	return tm, err
}

// notCheckedReasons: kinds the stacks render with no CRD stored in schemas/ (nor rendered in the stack),
// with why and where upstream keeps a definition. The lead decides whether to store them.
var notCheckedReasons = map[schema.GroupKind]string{
	{Group: "networking.gke.io", Kind: "Network"}:                   "no CRD stored in schemas/ (GKE installs it; upstream: GoogleCloudPlatform/gke-networking-api config/crds/networking.gke.io_networks.yaml)",
	{Group: "networking.gke.io", Kind: "GKENetworkParamSet"}:        "no CRD stored in schemas/ (GKE installs it; upstream: GoogleCloudPlatform/gke-networking-api config/crds/networking.gke.io_gkenetworkparamsets.yaml)",
	{Group: "k8s.cni.cncf.io", Kind: "NetworkAttachmentDefinition"}: "no CRD stored in schemas/ (Multus; upstream: k8snetworkplumbingwg/network-attachment-definition-client artifacts/networks-crd.yaml)",
	{Group: "nv-ipam.nvidia.com", Kind: "IPPool"}:                   "no CRD stored in schemas/ (NVIDIA IPAM; upstream: Mellanox/nvidia-k8s-ipam deploy/crds/nv-ipam.nvidia.com_ippools.yaml)",
	{Group: "cluster.karmada.io", Kind: "Cluster"}:                  "not a CRD: served by karmada-aggregated-apiserver (an aggregated API); its schema is only in schemas/karmada/swagger.json, with no structural schema or CEL rules to run",
}

type stackResult struct {
	dir        string
	findings   []finding
	warnings   []string
	notChecked []string
	builtin    int
	custom     int
	nested     int
	// cut CRDs replaced by their stored upstream file; Secret data placeholders filled
	expanded, placeholders int
}

func main() {
	schemasDir := flag.String("schemas", "schemas", "folder of stored upstream CRDs (the repo's schemas/)")
	outName := flag.String("out", "apiserver.txt", "verdict file name, written to <stack>/engines/")
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "usage: apicheck [-schemas DIR] [-out NAME] build/<stack>...\n")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() == 0 {
		flag.Usage()
		os.Exit(2)
	}
	base, err := loadSchemaCRDs(*schemasDir)
	if err != nil {
		fmt.Fprintln(os.Stderr, "apicheck: loading CRDs:", err)
		os.Exit(2)
	}
	total := 0
	for _, dir := range flag.Args() {
		res, err := checkStack(dir, base)
		if err != nil {
			fmt.Fprintln(os.Stderr, "apicheck:", err)
			os.Exit(2)
		}
		if err := writeVerdict(res, *outName, os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, "apicheck:", err)
			os.Exit(2)
		}
		total += len(res.findings)
	}
	if total > 0 {
		fmt.Printf("apicheck: %d finding(s) in %d stack(s)\n", total, flag.NArg())
		os.Exit(1)
	}
	fmt.Printf("apicheck: no findings in %d stack(s)\n", flag.NArg())
}

// checkStack checks every object of one build/<stack>/k8s/.
func checkStack(dir string, base crdSet) (*stackResult, error) {
	files, err := k8sfiles.OrderedYAMLFiles(filepath.Join(dir, "k8s")) // k8s/apply-order.txt's order
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("%s: no k8s/*.yaml (run `multinode plan` first)", dir)
	}
	res := &stackResult{dir: dir}
	type obj struct {
		file string
		doc  []byte
		tm   typeMetaDoc
	}
	var objs []obj
	crds := base.clone()
	for _, f := range files {
		docs, err := splitYAML(f)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		rel := filepath.Join(filepath.Base(dir), "k8s", filepath.Base(f))
		for _, d := range docs {
			tm, err := typeMeta(d)
			if err != nil {
				res.findings = append(res.findings, finding{File: rel, Object: "?", issue: issue{Msg: "not YAML: " + err.Error()}})
				continue
			}
			if tm.Kind == "CustomResourceDefinition" && strings.HasPrefix(tm.APIVersion, "apiextensions.k8s.io/") {
				full, is, err := expandCutCRD(d, base)
				for _, i := range is {
					res.findings = append(res.findings, finding{File: rel, Object: objectLabel(tm), issue: i})
				}
				if err != nil {
					res.findings = append(res.findings, finding{File: rel, Object: objectLabel(tm), issue: issue{Msg: err.Error()}})
				} else {
					if full != nil {
						d = full
						res.expanded++
					}
					if err := crds.add(d, rel); err != nil {
						res.findings = append(res.findings, finding{File: rel, Object: objectLabel(tm), issue: issue{Msg: err.Error()}})
					}
				}
			}
			if tm.Kind == "Secret" && tm.APIVersion == "v1" {
				var n int
				d, n = fillSecretPlaceholders(d)
				res.placeholders += n
			}
			objs = append(objs, obj{rel, d, tm})
		}
	}
	handlers := map[schema.GroupVersionKind]*crHandler{}
	notChecked := map[string][]string{}
	for _, o := range objs {
		gv, err := schema.ParseGroupVersion(o.tm.APIVersion)
		label := objectLabel(o.tm)
		if err != nil || o.tm.Kind == "" {
			res.findings = append(res.findings, finding{File: o.file, Object: label, issue: issue{Msg: "no valid apiVersion/kind"}})
			continue
		}
		gvk := gv.WithKind(o.tm.Kind)
		add := func(is []issue) {
			for _, i := range is {
				res.findings = append(res.findings, finding{File: o.file, Object: label, issue: i})
			}
		}
		if schemeFor(gvk) != nil {
			res.builtin++
			_, is, ws := checkBuiltin(o.doc, gvk)
			add(is)
			for _, w := range ws {
				res.warnings = append(res.warnings, fmt.Sprintf("%s\t%s\t%s", o.file, label, w))
			}
			continue
		}
		src, ok := crds[gvk.GroupKind()]
		if !ok {
			reason, known := notCheckedReasons[gvk.GroupKind()]
			if !known {
				reason = "no CRD in schemas/ nor in the stack"
			}
			key := gvk.GroupKind().String() + ": " + reason
			notChecked[key] = append(notChecked[key], o.file)
			continue
		}
		h, ok := handlers[gvk]
		if !ok {
			h, err = newCRHandler(src.crd, gvk.Version)
			if err != nil {
				add([]issue{{Path: "apiVersion", Msg: fmt.Sprintf("%v (CRD from %s)", err, src.origin)}})
				continue
			}
			handlers[gvk] = h
		}
		res.custom++
		u, is, ws := h.checkCR(o.doc)
		add(is)
		for _, w := range ws {
			res.warnings = append(res.warnings, fmt.Sprintf("%s\t%s\t%s", o.file, label, w))
		}
		if u != nil {
			nis, n, nws := checkNested(gvk.GroupKind(), u.Object, u.GetName(), u.GetNamespace())
			res.nested += n
			add(nis)
			for _, w := range nws {
				res.warnings = append(res.warnings, fmt.Sprintf("%s\t%s\t%s", o.file, label, w))
			}
		}
	}
	keys := make([]string, 0, len(notChecked))
	for k := range notChecked {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		res.notChecked = append(res.notChecked, fmt.Sprintf("%s (%d object(s): %s)", k, len(notChecked[k]), strings.Join(notChecked[k], ", ")))
	}
	return res, nil
}

func objectLabel(tm typeMetaDoc) string {
	name := tm.Metadata.Name
	if tm.Metadata.Namespace != "" {
		name = tm.Metadata.Namespace + "/" + name
	}
	return tm.Kind + " " + name
}

// writeVerdict writes build/<stack>/engines/<name> and echoes the findings and the summary to w.
func writeVerdict(res *stackResult, name string, w io.Writer) error {
	var b strings.Builder
	for _, f := range res.findings {
		b.WriteString(f.String())
		b.WriteByte('\n')
	}
	summary := fmt.Sprintf("apiserver %s: %d finding(s); %d objects checked (%d built-in, %d custom resources, %d nested pod templates); %d kind(s) not checked; %d cut CRDs checked as their stored upstream file; %d redacted Secret data values filled with a base64 placeholder",
		filepath.Base(res.dir), len(res.findings), res.builtin+res.custom, res.builtin, res.custom, res.nested, len(res.notChecked), res.expanded, res.placeholders)
	b.WriteString("# " + summary + "\n")
	for _, n := range res.notChecked {
		b.WriteString("# not checked: " + n + "\n")
	}
	for _, wn := range res.warnings {
		b.WriteString("# warning (API server warning on create, not a finding): " + wn + "\n")
	}
	out := filepath.Join(res.dir, "engines")
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(out, name), []byte(b.String()), 0o644); err != nil {
		return err
	}
	for _, f := range res.findings {
		fmt.Fprintln(w, f.String())
	}
	fmt.Fprintln(w, summary, "->", filepath.Join(out, name))
	return nil
}
