package main

// Two things `multinode plan` writes differently from what `pulumi up` sends, undone here so the API server
// sees what it would get:
//   - CRDs are cut to group/names/scope/versions in build/<stack>/k8s/ (multinode/plan.py _crd_digest, to
//     keep the files small); the object the program applies is the stored upstream file with annotations
//     of ours (multinode/manifests/crds.py: crd_objects). We check that full object: the stored CRD of the
//     same name, with the cut one's metadata, and report where the cut spec disagrees with it. The sha256
//     in the header comment is of Python's json.dumps of the spec and is not re-computed here.
//   - Secret values are recorded as "[secret]" (multinode/recording.py; SECRET_PLACEHOLDER in
//     multinode/config.py): in `stringData` that is a valid string, in `data` it is not base64 and the
//     API server would refuse it, so each such `data` value gets a base64 placeholder.

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"
)

const crdSourceAnnotation = "multinode.dev/crd-source" // multinode/manifests/crds.py SOURCE_ANNOTATION
// The header comment multinode/plan.py (_written) puts on every CRD whose spec it cut.
const cutHeader = "# spec cut to group/names/scope/versions"
const secretPlaceholder = "[secret]" // multinode/config.py SECRET_PLACEHOLDER

// expandCutCRD returns the full CRD (JSON) for a cut one, nil for a CRD that is not cut.
func expandCutCRD(doc []byte, base crdSet) ([]byte, []issue, error) {
	cut := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.Unmarshal(doc, cut); err != nil {
		return nil, nil, err
	}
	_, annotated := cut.Annotations[crdSourceAnnotation]
	if !annotated && !bytes.Contains(doc, []byte(cutHeader)) {
		return nil, nil, nil
	}
	var stored *crdSource
	for _, src := range base {
		if src.crd.Name == cut.Name {
			s := src
			stored = &s
		}
	}
	if stored == nil {
		return nil, nil, fmt.Errorf("cut CRD (%s=%q) has no stored CRD in schemas/ named %s", crdSourceAnnotation, cut.Annotations[crdSourceAnnotation], cut.Name)
	}
	full := stored.crd.DeepCopy()
	full.ObjectMeta = *cut.ObjectMeta.DeepCopy()
	full.APIVersion, full.Kind = "apiextensions.k8s.io/v1", "CustomResourceDefinition"
	var issues []issue
	if cut.Spec.Group != full.Spec.Group || cut.Spec.Scope != full.Spec.Scope || cut.Spec.Names.Kind != full.Spec.Names.Kind || cut.Spec.Names.Plural != full.Spec.Names.Plural {
		issues = append(issues, issue{Path: "spec", Msg: fmt.Sprintf("cut CRD disagrees with the stored %s on group/scope/names", stored.origin)})
	}
	if len(cut.Spec.Versions) != len(full.Spec.Versions) {
		issues = append(issues, issue{Path: "spec.versions", Msg: fmt.Sprintf("cut CRD has %d versions, the stored %s has %d", len(cut.Spec.Versions), stored.origin, len(full.Spec.Versions))})
	} else {
		for i, v := range cut.Spec.Versions {
			f := full.Spec.Versions[i]
			if v.Name != f.Name || v.Served != f.Served || v.Storage != f.Storage {
				issues = append(issues, issue{Path: fmt.Sprintf("spec.versions[%d]", i), Msg: fmt.Sprintf("cut CRD version %s (served %v, storage %v) differs from the stored %s", v.Name, v.Served, v.Storage, stored.origin)})
			}
		}
	}
	out, err := json.Marshal(full)
	return out, issues, err
}

// fillSecretPlaceholders replaces "[secret]" values of a Secret's data by base64("[secret]").
func fillSecretPlaceholders(doc []byte) ([]byte, int) {
	var m map[string]interface{}
	if err := yaml.Unmarshal(doc, &m); err != nil {
		return doc, 0
	}
	data, ok := m["data"].(map[string]interface{})
	if !ok {
		return doc, 0
	}
	n := 0
	for k, v := range data {
		if v == secretPlaceholder {
			data[k] = base64.StdEncoding.EncodeToString([]byte(secretPlaceholder))
			n++
		}
	}
	if n == 0 {
		return doc, 0
	}
	out, err := json.Marshal(m)
	if err != nil {
		return doc, 0
	}
	return out, n
}
