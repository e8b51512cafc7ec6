package main

// The apiextensions-apiserver's CREATE path for custom resources, as a library
// (k8s.io/apiextensions-apiserver at the version in go.mod).
//
// Per CRD version the server builds (pkg/apiserver/customresource_handler.go:648-680, 763-842 at v0.33.13):
//   - the structural schema: v1 validation → internal (Convert_v1_CustomResourceValidation_To_…),
//     structuralschema.NewStructural, then structuraldefaulting.PruneDefaults on a deep copy;
//   - the OpenAPI schema validator: apiservervalidation.NewSchemaValidator(internal OpenAPIV3Schema),
//     and the status one when the status subresource is on;
//   - the REST strategy: customresource.NewStrategy(typer, namespaced, kind, validator, statusValidator,
//     structural, status, scale, selectableFields), whose Validate runs the OpenAPI validation, the
//     embedded-resource ObjectMeta checks, list-type map/set checks and the x-kubernetes-validations CEL
//     rules (cel.NewValidator(structural, true, PerCallLimit)).
// A create request body then goes through (same file, 1122-1133 and 1258-1400):
//   the strict JSON/YAML serializer into an Unstructured (duplicate fields are strict errors), the
//   unstructuredSchemaCoercer (ObjectMeta coercion; structural pruning, which under Strict returns every
//   pruned path as `unknown field "…"`; removal of non-nullable nulls), then unstructuredDefaulter
//   (structuraldefaulting.Default), then Store.Create → FillObjectMetaSystemFields → rest.BeforeCreate.
// The handler's types are unexported, so this file makes the same calls in the same order.

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"k8s.io/apiextensions-apiserver/pkg/apihelpers"
	apiextensionsinternal "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	structuraldefaulting "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/defaulting"
	schemaobjectmeta "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/objectmeta"
	structuralpruning "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/pruning"
	apiservervalidation "k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	"k8s.io/apiextensions-apiserver/pkg/crdserverscheme"
	"k8s.io/apiextensions-apiserver/pkg/registry/customresource"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer/json"
	"k8s.io/apimachinery/pkg/util/validation/field"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/apiserver/pkg/registry/rest"
)

// crdSource is one CRD and where it came from (a schemas/ file or the stack's own k8s/ file).
type crdSource struct {
	crd    *apiextensionsv1.CustomResourceDefinition
	origin string
}

// crdSet holds the CRDs known for one stack, by group/kind. The stack's own rendered CRDs win over
// schemas/ (they are what the cluster will serve).
type crdSet map[schema.GroupKind]crdSource

func (c crdSet) clone() crdSet {
	out := crdSet{}
	for k, v := range c {
		out[k] = v
	}
	return out
}

// add decodes a CRD document (v1 only) and registers it.
func (c crdSet) add(doc []byte, origin string) error {
	obj, _, err := serializerForCRDs().Decode(doc, nil, &apiextensionsv1.CustomResourceDefinition{})
	if err != nil {
		return fmt.Errorf("%s: %w", origin, err)
	}
	crd := obj.(*apiextensionsv1.CustomResourceDefinition)
	apiextensionsScheme.Default(crd)
	c[schema.GroupKind{Group: crd.Spec.Group, Kind: crd.Spec.Names.Kind}] = crdSource{crd: crd, origin: origin}
	return nil
}

func serializerForCRDs() *json.Serializer {
	return json.NewSerializerWithOptions(json.DefaultMetaFactory, apiextensionsScheme, apiextensionsScheme, json.SerializerOptions{Yaml: true})
}

// loadSchemaCRDs reads every CustomResourceDefinition document under dir (the repo's schemas/).
func loadSchemaCRDs(dir string) (crdSet, error) {
	set := crdSet{}
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() || !(strings.HasSuffix(path, ".yaml") || strings.HasSuffix(path, ".yml")) {
			return nil
		}
		docs, err := splitYAML(path)
		if err != nil {
			return err
		}
		for _, doc := range docs {
			tm, err := typeMeta(doc)
			if err != nil || tm.Kind != "CustomResourceDefinition" || !strings.HasPrefix(tm.APIVersion, "apiextensions.k8s.io/") {
				continue
			}
			rel, _ := filepath.Rel(filepath.Dir(dir), path)
			if err := set.add(doc, rel); err != nil {
				return err
			}
		}
		return nil
	})
	return set, err
}

// crHandler is what the server builds for one served version of one CRD.
type crHandler struct {
	gvk        schema.GroupVersionKind
	structural *structuralschema.Structural
	strategy   rest.RESTCreateStrategy
	preserve   bool // spec.preserveUnknownFields (v1 forbids true; kept for fidelity)
}

func newCRHandler(crd *apiextensionsv1.CustomResourceDefinition, version string) (*crHandler, error) {
	if !apihelpers.HasServedCRDVersion(crd, version) {
		return nil, fmt.Errorf("version %q is not served by CRD %s", version, crd.Name)
	}
	val, err := apihelpers.GetSchemaForVersion(crd, version)
	if err != nil {
		return nil, err
	}
	var internalSchema *apiextensionsinternal.JSONSchemaProps
	var structural *structuralschema.Structural
	if val != nil {
		internalValidation := &apiextensionsinternal.CustomResourceValidation{}
		if err := apiextensionsv1.Convert_v1_CustomResourceValidation_To_apiextensions_CustomResourceValidation(val, internalValidation, nil); err != nil {
			return nil, fmt.Errorf("converting CRD validation to internal: %w", err)
		}
		internalSchema = internalValidation.OpenAPIV3Schema
		s, err := structuralschema.NewStructural(internalSchema)
		if err != nil {
			return nil, fmt.Errorf("CRD %s version %s has no structural schema: %w", crd.Name, version, err)
		}
		s = s.DeepCopy()
		if err := structuraldefaulting.PruneDefaults(s); err != nil {
			return nil, fmt.Errorf("pruning defaults of CRD %s: %w", crd.Name, err)
		}
		structural = s
	}
	validator, _, err := apiservervalidation.NewSchemaValidator(internalSchema)
	if err != nil {
		return nil, err
	}
	subresources, err := apihelpers.GetSubresourcesForVersion(crd, version)
	if err != nil {
		return nil, err
	}
	var statusSpec *apiextensionsinternal.CustomResourceSubresourceStatus
	var statusValidator apiservervalidation.SchemaValidator
	if subresources != nil && subresources.Status != nil {
		statusSpec = &apiextensionsinternal.CustomResourceSubresourceStatus{}
		if err := apiextensionsv1.Convert_v1_CustomResourceSubresourceStatus_To_apiextensions_CustomResourceSubresourceStatus(subresources.Status, statusSpec, nil); err != nil {
			return nil, err
		}
		if internalSchema != nil && internalSchema.Properties != nil {
			if statusSchema, ok := internalSchema.Properties["status"]; ok {
				if statusValidator, _, err = apiservervalidation.NewSchemaValidator(&statusSchema); err != nil {
					return nil, err
				}
			}
		}
	}
	var scaleSpec *apiextensionsinternal.CustomResourceSubresourceScale
	if subresources != nil && subresources.Scale != nil {
		scaleSpec = &apiextensionsinternal.CustomResourceSubresourceScale{}
		if err := apiextensionsv1.Convert_v1_CustomResourceSubresourceScale_To_apiextensions_CustomResourceSubresourceScale(subresources.Scale, scaleSpec, nil); err != nil {
			return nil, err
		}
	}
	var selectable []apiextensionsv1.SelectableField
	for _, v := range crd.Spec.Versions {
		if v.Name == version {
			selectable = v.SelectableFields
		}
	}
	gvk := schema.GroupVersionKind{Group: crd.Spec.Group, Version: version, Kind: crd.Spec.Names.Kind}
	typer := crdserverscheme.NewUnstructuredObjectTyper()
	strategy := customresource.NewStrategy(typer, crd.Spec.Scope == apiextensionsv1.NamespaceScoped, gvk,
		validator, statusValidator, structural, statusSpec, scaleSpec, selectable)
	return &crHandler{gvk: gvk, structural: structural, strategy: strategy, preserve: crd.Spec.PreserveUnknownFields}, nil
}

// checkCR runs one custom resource through the handler's decode (strict), coercion and pruning (pruned
// paths are findings), defaulting, then BeforeCreate with the customresource strategy. It returns the
// object as it would be stored (for the nested pod-template checks).
func (h *crHandler) checkCR(doc []byte) (*unstructured.Unstructured, []issue, []string) {
	var issues []issue
	dec := json.NewSerializerWithOptions(json.DefaultMetaFactory, unstructuredCreator{}, crdserverscheme.NewUnstructuredObjectTyper(),
		json.SerializerOptions{Yaml: true, Strict: true})
	u := &unstructured.Unstructured{}
	_, _, err := dec.Decode(doc, nil, u)
	if err != nil {
		strictErr, ok := runtime.AsStrictDecodingError(err)
		if !ok {
			return nil, []issue{{Msg: "decode: " + err.Error()}}, nil
		}
		for _, e := range strictErr.Errors() {
			issues = append(issues, strictIssue(e))
		}
	}
	// unstructuredSchemaCoercer.apply with returnUnknownFieldPaths=true (a Strict request).
	kind, apiVersion := u.GetKind(), u.GetAPIVersion()
	objectMeta, foundMeta, metaUnknown, err := schemaobjectmeta.GetObjectMetaWithOptions(u.Object, schemaobjectmeta.ObjectMetaOptions{ReturnUnknownFieldPaths: true})
	if err != nil {
		return nil, append(issues, issue{Path: "metadata", Msg: err.Error()}), nil
	}
	unknown := append([]string{}, metaUnknown...)
	if !h.preserve && h.structural != nil {
		unknown = append(unknown, structuralpruning.PruneWithOptions(u.Object, h.structural, true, structuralschema.UnknownFieldPathOptions{TrackUnknownFieldPaths: true})...)
		structuraldefaulting.PruneNonNullableNullsWithoutDefaults(u.Object, h.structural)
	}
	if h.structural != nil {
		ferr, paths := schemaobjectmeta.CoerceWithOptions(nil, u.Object, h.structural, false, schemaobjectmeta.CoerceOptions{ReturnUnknownFieldPaths: true})
		if ferr != nil {
			issues = append(issues, fieldIssues(field.ErrorList{ferr})...)
		}
		unknown = append(unknown, paths...)
	}
	u.SetKind(kind)
	u.SetAPIVersion(apiVersion)
	if foundMeta {
		if err := schemaobjectmeta.SetObjectMeta(u.Object, objectMeta); err != nil {
			issues = append(issues, issue{Path: "metadata", Msg: err.Error()})
		}
	}
	sort.Strings(unknown)
	for _, p := range unknown {
		issues = append(issues, issue{Path: p, Msg: fmt.Sprintf(`unknown field "%s": the CRD's structural schema prunes it (fieldValidation=Strict refuses it; a default create drops it in silence)`, p)})
	}
	// Under Strict the request stops at the issues above; under the default (Warn) it goes on with the
	// pruned object. We go on too, so that one run shows every problem.
	if h.structural != nil {
		structuraldefaulting.Default(u.Object, h.structural)
	}
	verrs, warnings := beforeCreate(h.strategy, u)
	return u, append(issues, verrs...), warnings
}

type unstructuredCreator struct{}

func (unstructuredCreator) New(kind schema.GroupVersionKind) (runtime.Object, error) {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(kind)
	return u, nil
}

// splitYAML returns the non-empty documents of a YAML file.
func splitYAML(path string) ([][]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return splitYAMLReader(f)
}

func splitYAMLReader(r io.Reader) ([][]byte, error) {
	reader := utilyaml.NewYAMLReader(bufio.NewReader(r))
	var docs [][]byte
	for {
		doc, err := reader.Read()
		if err != nil {
			if errors.Is(err, io.EOF) {
				return docs, nil
			}
			return docs, err
		}
		if strings.TrimSpace(stripComments(string(doc))) != "" {
			docs = append(docs, doc)
		}
	}
}

func stripComments(s string) string {
	var b strings.Builder
	for _, line := range strings.Split(s, "\n") {
		t := strings.TrimSpace(line)
		if strings.HasPrefix(t, "#") || t == "---" {
			continue
		}
		b.WriteString(line)
		b.WriteByte('\n')
	}
	return b.String()
}
