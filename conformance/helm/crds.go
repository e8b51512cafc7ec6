package main

// Which custom kinds have a CRD: the chart's own (crds/ or templates), another release of the stack, the
// stack's own objects (build/<stack>/k8s), the add-ons the stack marks `provided` (their CRDs in schemas/), or a
// dependency left out of the scratch copy whose CRDs the project stores (droppedDepCRDs).

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/yaml"
)

type objMeta struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name      string `json:"name"`
		Namespace string `json:"namespace"`
	} `json:"metadata"`
}

// builtinGroup: a group the API server serves itself. client-go's scheme registers every built-in group of
// its Kubernetes minor (k8s.io/client-go v0.33.3 kubernetes/scheme/register.go); apiextensions.k8s.io (CRDs)
// and apiregistration.k8s.io (APIServices) are served by kube-apiserver's other two servers.
func builtinGroup(g string) bool {
	if g == "apiextensions.k8s.io" || g == "apiregistration.k8s.io" {
		return true
	}
	return scheme.Scheme.IsGroupRegistered(g)
}

// crdInfo: one CRD known to the stack, the versions it serves and where it comes from.
type crdInfo struct {
	Versions map[string]bool
	Origin   string
	Cluster  bool // spec.scope Cluster
}

type crdIndex map[schema.GroupKind]crdInfo

func (ix crdIndex) addDoc(body, origin string) bool {
	var crd struct {
		Kind string `json:"kind"`
		Spec struct {
			Group string `json:"group"`
			Scope string `json:"scope"`
			Names struct {
				Kind string `json:"kind"`
			} `json:"names"`
			Versions []struct {
				Name   string `json:"name"`
				Served *bool  `json:"served"`
			} `json:"versions"`
		} `json:"spec"`
	}
	if yaml.Unmarshal([]byte(body), &crd) != nil || crd.Kind != "CustomResourceDefinition" {
		return false
	}
	gk := schema.GroupKind{Group: crd.Spec.Group, Kind: crd.Spec.Names.Kind}
	info, ok := ix[gk]
	if !ok {
		info = crdInfo{Versions: map[string]bool{}, Origin: origin, Cluster: crd.Spec.Scope == "Cluster"}
	}
	for _, v := range crd.Spec.Versions {
		if v.Served == nil || *v.Served {
			info.Versions[v.Name] = true
		}
	}
	ix[gk] = info
	return true
}

// addFiles adds every CRD document of the files matching a glob.
func (ix crdIndex) addFiles(glob, origin string) error {
	files, err := filepath.Glob(glob)
	if err != nil {
		return err
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		for _, d := range splitDocs(string(b)) {
			ix.addDoc(d, fmt.Sprintf("%s (%s)", origin, filepath.Base(f)))
		}
	}
	return nil
}

// missingCRD returns "" when the object's kind is built in or has a CRD serving its version, else the finding.
func (ix crdIndex) missingCRD(m objMeta) string {
	gv, err := schema.ParseGroupVersion(m.APIVersion)
	if err != nil || m.Kind == "" {
		return fmt.Sprintf("no valid apiVersion/kind (%q, %q)", m.APIVersion, m.Kind)
	}
	if builtinGroup(gv.Group) {
		return ""
	}
	info, ok := ix[schema.GroupKind{Group: gv.Group, Kind: m.Kind}]
	if !ok {
		return fmt.Sprintf("kind %s (%s) has no CRD: neither the chart nor the stack installs one (the API server refuses it: no matches for kind %q in version %q)", m.Kind, m.APIVersion, m.Kind, m.APIVersion)
	}
	if !info.Versions[gv.Version] {
		vs := make([]string, 0, len(info.Versions))
		for v := range info.Versions {
			vs = append(vs, v)
		}
		sort.Strings(vs)
		return fmt.Sprintf("kind %s: its CRD (%s) serves version(s) %s, not %s", m.Kind, info.Origin, strings.Join(vs, ", "), gv.Version)
	}
	return ""
}

// providedSchemas: the schemas/ folder of each add-on key of `multinode:addons` (multinode/config.py Addons).
var providedSchemas = map[string]string{
	"kyverno":         "kyverno",
	"lws":             "lws",
	"volcano":         "volcano",
	"grove":           "grove",
	"kai":             "kai-scheduler",
	"dynamo":          "dynamo",
	"trainer":         "training-operator/v2.3.0",
	"networkOperator": "network-operator",
	"gpuOperator":     "gpu-operator",
}

// providedAddons reads the stack's config file (Pulumi.<stack>.yaml) for `multinode:addons.<name>.provided: true`.
func providedAddons(configFile string) ([]string, error) {
	b, err := os.ReadFile(configFile)
	if err != nil {
		return nil, err
	}
	var doc struct {
		Config map[string]interface{} `json:"config"`
	}
	if err := yaml.Unmarshal(b, &doc); err != nil {
		return nil, fmt.Errorf("%s: %w", configFile, err)
	}
	addons, _ := doc.Config["multinode:addons"].(map[string]interface{})
	var out []string
	for name, v := range addons {
		if m, ok := v.(map[string]interface{}); ok && m["provided"] == true {
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out, nil
}
