package main

// Pod templates nested in custom resources. The apiextensions path checks them only against the CRD's
// OpenAPI schema (and many CRDs keep pod specs loose); the controllers later create Pods or Jobs from
// them, and only then does the API server's core validation see them. Here each nested template is cut
// out of the custom resource (after pruning and defaulting, as the controller reads it) and sent through
// the built-in CREATE path as the object the controller will make of it:
//   - template: a core/v1 PodTemplate (pkg/registry/core/podtemplate: ValidatePodTemplate with the
//     options podutil.GetValidationOptionsFromPodTemplate picks);
//   - podSpec:  a bare PodSpec, wrapped as the spec of a PodTemplate's template;
//   - jobTemplate: a batch/v1 JobTemplateSpec, sent as a batch/v1 Job (pkg/registry/batch/job: the Job
//     rules, e.g. restartPolicy Never/OnFailure, and the pod template inside).
// The controllers add labels, env, volumes and owner references of their own before they create a Pod;
// we validate what we wrote, not what they add.

import (
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

type templateShape int

const (
	shapeTemplate templateShape = iota
	shapePodSpec
	shapeJobTemplate
)

type templatePath struct {
	path  string // dotted; `[*]` after a segment: every list item; `*`: every map value
	shape templateShape
}

// podTemplatePaths lists, per custom kind, where it nests pod templates. Paths are read from the stored
// CRDs (schemas/) and from what the stacks render.
var podTemplatePaths = map[schema.GroupKind][]templatePath{
	{Group: "leaderworkerset.x-k8s.io", Kind: "LeaderWorkerSet"}: {
		{"spec.leaderWorkerTemplate.leaderTemplate", shapeTemplate},
		{"spec.leaderWorkerTemplate.workerTemplate", shapeTemplate},
	},
	{Group: "batch.volcano.sh", Kind: "Job"}:                        {{"spec.tasks[*].template", shapeTemplate}},
	{Group: "kubeflow.org", Kind: "MPIJob"}:                         {{"spec.mpiReplicaSpecs.*.template", shapeTemplate}},
	{Group: "kubeflow.org", Kind: "PyTorchJob"}:                     {{"spec.pytorchReplicaSpecs.*.template", shapeTemplate}},
	{Group: "trainer.kubeflow.org", Kind: "ClusterTrainingRuntime"}: {{"spec.template.spec.replicatedJobs[*].template", shapeJobTemplate}},
	{Group: "trainer.kubeflow.org", Kind: "TrainingRuntime"}:        {{"spec.template.spec.replicatedJobs[*].template", shapeJobTemplate}},
	{Group: "grove.io", Kind: "PodCliqueSet"}:                       {{"spec.template.cliques[*].spec.podSpec", shapePodSpec}},
	{Group: "grove.io", Kind: "PodClique"}:                          {{"spec.podSpec", shapePodSpec}},
	{Group: "nvidia.com", Kind: "DynamoGraphDeployment"}:            {{"spec.components[*].podTemplate", shapeTemplate}},
}

type nested struct {
	path  string // concrete, e.g. spec.tasks[1].template
	value map[string]interface{}
	shape templateShape
}

// findNested walks obj along one templatePath.
func findNested(obj map[string]interface{}, tp templatePath) []nested {
	type cursor struct {
		path string
		v    interface{}
	}
	cur := []cursor{{"", obj}}
	for _, seg := range strings.Split(tp.path, ".") {
		list := strings.HasSuffix(seg, "[*]")
		name := strings.TrimSuffix(seg, "[*]")
		var next []cursor
		for _, c := range cur {
			m, ok := c.v.(map[string]interface{})
			if !ok {
				continue
			}
			join := func(p, k string) string {
				if p == "" {
					return k
				}
				return p + "." + k
			}
			if name == "*" {
				keys := make([]string, 0, len(m))
				for k := range m {
					keys = append(keys, k)
				}
				sort.Strings(keys)
				for _, k := range keys {
					next = append(next, cursor{join(c.path, k), m[k]})
				}
				continue
			}
			v, ok := m[name]
			if !ok {
				continue
			}
			if list {
				items, ok := v.([]interface{})
				if !ok {
					continue
				}
				for i, it := range items {
					next = append(next, cursor{join(c.path, name) + "[" + strconv.Itoa(i) + "]", it})
				}
				continue
			}
			next = append(next, cursor{join(c.path, name), v})
		}
		cur = next
	}
	var out []nested
	for _, c := range cur {
		if m, ok := c.v.(map[string]interface{}); ok {
			out = append(out, nested{path: c.path, value: m, shape: tp.shape})
		}
	}
	return out
}

// checkNested validates every nested pod template of one custom resource. It returns the issues (field
// paths rewritten into the custom resource) and the number of templates checked.
func checkNested(gk schema.GroupKind, obj map[string]interface{}, name, namespace string) ([]issue, int, []string) {
	var issues []issue
	var warnings []string
	count := 0
	for _, tp := range podTemplatePaths[gk] {
		for _, n := range findNested(obj, tp) {
			count++
			doc, gvk, prefix := wrapTemplate(n, name, namespace)
			raw, err := json.Marshal(doc)
			if err != nil {
				issues = append(issues, issue{Path: n.path, Msg: err.Error()})
				continue
			}
			_, is, ws := checkBuiltin(raw, gvk)
			seen := map[issue]bool{}
			for _, i := range is {
				i.Path = rewritePath(i.Path, prefix, n.path)
				seen[i] = true
				i.Msg = fmt.Sprintf("%s (as a %s, the object its controller creates)", i.Msg, gvk.Kind)
				issues = append(issues, i)
			}
			for _, w := range ws {
				warnings = append(warnings, n.path+": "+w)
			}
			// The Pod its controller creates from the template: pod.Strategy adds the Pod-only create rules
			// (ValidatePodCreate). Issues the template check already reported are not repeated.
			pod, podPath := podOf(n, name, namespace)
			if pod == nil {
				continue
			}
			raw, err = json.Marshal(pod)
			if err != nil {
				continue
			}
			_, is, _ = checkBuiltin(raw, schema.GroupVersionKind{Version: "v1", Kind: "Pod"})
			for _, i := range is {
				i.Path = rewritePath(i.Path, "spec", podPath)
				if seen[i] {
					continue
				}
				i.Msg = fmt.Sprintf("%s (as the Pod its controller creates)", i.Msg)
				issues = append(issues, i)
			}
		}
	}
	return issues, count, warnings
}

// podOf builds the Pod a controller makes of one nested template (metadata and spec as written), and the
// path of that spec inside the custom resource.
func podOf(n nested, name, namespace string) (map[string]interface{}, string) {
	var tmpl map[string]interface{}
	var specPath string
	switch n.shape {
	case shapePodSpec:
		tmpl, specPath = map[string]interface{}{"spec": n.value}, n.path
	case shapeJobTemplate:
		spec, _ := n.value["spec"].(map[string]interface{})
		t, ok := spec["template"].(map[string]interface{})
		if !ok {
			return nil, ""
		}
		tmpl, specPath = t, n.path+".spec.template.spec"
	default:
		tmpl, specPath = n.value, n.path+".spec"
	}
	meta := map[string]interface{}{}
	if m, ok := tmpl["metadata"].(map[string]interface{}); ok {
		for _, k := range []string{"labels", "annotations"} {
			if v, ok := m[k]; ok {
				meta[k] = v
			}
		}
	}
	meta["name"] = name
	if namespace != "" {
		meta["namespace"] = namespace
	}
	spec, ok := tmpl["spec"]
	if !ok {
		return nil, ""
	}
	return map[string]interface{}{"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}, specPath
}

// wrapTemplate builds the built-in object for one nested template and the path prefix under which its
// fields appear in that object.
func wrapTemplate(n nested, name, namespace string) (map[string]interface{}, schema.GroupVersionKind, string) {
	meta := map[string]interface{}{"name": name}
	if namespace != "" {
		meta["namespace"] = namespace
	}
	switch n.shape {
	case shapePodSpec:
		return map[string]interface{}{"apiVersion": "v1", "kind": "PodTemplate", "metadata": meta,
				"template": map[string]interface{}{"spec": n.value}},
			schema.GroupVersionKind{Version: "v1", Kind: "PodTemplate"}, "template.spec"
	case shapeJobTemplate:
		if tm, ok := n.value["metadata"].(map[string]interface{}); ok {
			for _, k := range []string{"labels", "annotations"} {
				if v, ok := tm[k]; ok {
					meta[k] = v
				}
			}
		}
		job := map[string]interface{}{"apiVersion": "batch/v1", "kind": "Job", "metadata": meta}
		if spec, ok := n.value["spec"]; ok {
			job["spec"] = spec
		}
		return job, schema.GroupVersionKind{Group: "batch", Version: "v1", Kind: "Job"}, ""
	default:
		return map[string]interface{}{"apiVersion": "v1", "kind": "PodTemplate", "metadata": meta, "template": n.value},
			schema.GroupVersionKind{Version: "v1", Kind: "PodTemplate"}, "template"
	}
}

// rewritePath maps a field path of the wrapper object back into the custom resource.
func rewritePath(p, prefix, at string) string {
	if prefix == "" {
		if strings.HasPrefix(p, "metadata") {
			return at + "." + p // the Job's metadata comes from the template's
		}
		return at + "." + p
	}
	if p == prefix {
		return at
	}
	if strings.HasPrefix(p, prefix+".") || strings.HasPrefix(p, prefix+"[") {
		return at + p[len(prefix):]
	}
	return at + " (wrapper " + p + ")"
}
