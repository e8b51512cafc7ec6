package main

// Planted defects: each check of apicheck is shown to fail on an object that breaks it, next to a control
// that passes (so no test passes because the check does nothing). The CRDs are the repo's stored ones
// (../../schemas).

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

const schemasDir = "../../schemas"

var storedCRDs crdSet

func crds(t *testing.T) crdSet {
	t.Helper()
	if storedCRDs == nil {
		s, err := loadSchemaCRDs(schemasDir)
		if err != nil {
			t.Fatalf("loading %s: %v", schemasDir, err)
		}
		storedCRDs = s
	}
	return storedCRDs
}

func gvkOf(t *testing.T, doc string) schema.GroupVersionKind {
	t.Helper()
	tm, err := typeMeta([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	gv, err := schema.ParseGroupVersion(tm.APIVersion)
	if err != nil {
		t.Fatal(err)
	}
	return gv.WithKind(tm.Kind)
}

func builtin(t *testing.T, doc string) []issue {
	t.Helper()
	_, is, _ := checkBuiltin([]byte(doc), gvkOf(t, doc))
	return is
}

func custom(t *testing.T, doc string) []issue {
	t.Helper()
	gvk := gvkOf(t, doc)
	src, ok := crds(t)[gvk.GroupKind()]
	if !ok {
		t.Fatalf("no stored CRD for %s", gvk)
	}
	h, err := newCRHandler(src.crd, gvk.Version)
	if err != nil {
		t.Fatal(err)
	}
	u, is, _ := h.checkCR([]byte(doc))
	if u == nil {
		return is
	}
	nis, _, _ := checkNested(gvk.GroupKind(), u.Object, u.GetName(), u.GetNamespace())
	return append(is, nis...)
}

// expectIssue fails unless one issue has exactly this path and a message containing msg.
func expectIssue(t *testing.T, is []issue, path, msg string) {
	t.Helper()
	for _, i := range is {
		if i.Path == path && strings.Contains(i.Msg, msg) {
			return
		}
	}
	t.Errorf("no issue at %q containing %q; got %d issue(s): %+v", path, msg, len(is), is)
}

func expectNone(t *testing.T, is []issue) {
	t.Helper()
	if len(is) > 0 {
		t.Errorf("expected no issue, got %d: %+v", len(is), is)
	}
}

const jobYAML = `apiVersion: batch/v1
kind: Job
metadata:
  name: train
  namespace: multinode
spec:
  completions: 2
  parallelism: 2
  completionMode: Indexed
  template:
    metadata:
      labels:
        app: train
    spec:
      restartPolicy: Never
      containers:
      - name: main
        image: nvcr.io/nvidia/pytorch:25.01-py3
        env:
        - name: NCCL_DEBUG
          value: INFO
        ports:
        - containerPort: 29500
        resources:
          limits:
            nvidia.com/gpu: "8"
`

func TestBuiltinControlPasses(t *testing.T) {
	expectNone(t, builtin(t, jobYAML))
}

func TestBuiltinUnknownField(t *testing.T) {
	bad := strings.Replace(jobYAML, "        image: nvcr", "        imagePullPolcy: Always\n        image: nvcr", 1)
	expectIssue(t, builtin(t, bad), "spec.template.spec.containers[0].imagePullPolcy", `unknown field "spec.template.spec.containers[0].imagePullPolcy"`)
}

func TestBuiltinDuplicateField(t *testing.T) {
	bad := strings.Replace(jobYAML, "  parallelism: 2\n", "  parallelism: 2\n  parallelism: 3\n", 1)
	expectIssue(t, builtin(t, bad), "parallelism", `line 9: key "parallelism" already set in map`)
}

func TestPodRefusedByValidation(t *testing.T) {
	bad := strings.Replace(jobYAML, "- name: NCCL_DEBUG", "- name: 'NCCL DEBUG='", 1)
	bad = strings.Replace(bad, "containerPort: 29500", "containerPort: 70000", 1)
	is := builtin(t, bad)
	expectIssue(t, is, "spec.template.spec.containers[0].env[0].name", "Invalid value")
	expectIssue(t, is, "spec.template.spec.containers[0].ports[0].containerPort", "must be between 1 and 65535")
}

func TestJobRestartPolicyAlways(t *testing.T) {
	// A Job-only rule (a PodTemplate would accept it): the batch strategy's validation is the one running.
	bad := strings.Replace(jobYAML, "restartPolicy: Never", "restartPolicy: Always", 1)
	expectIssue(t, builtin(t, bad), "spec.template.spec.restartPolicy", `valid values: "OnFailure", "Never"`)
}

const headless = `apiVersion: v1
kind: Service
metadata:
  name: train
  namespace: multinode
spec:
  clusterIP: None
  selector:
    app: train
  ports:
  - name: rdzv
    port: 29500
`

func TestServiceThroughRESTStorage(t *testing.T) {
	// clusterIP None without clusterIPs only passes because the Service storage's BeginCreate syncs them.
	expectNone(t, builtin(t, headless))
	bad := strings.Replace(headless, "port: 29500", "port: 0", 1)
	expectIssue(t, builtin(t, bad), "spec.ports[0].port", "must be between 1 and 65535")
}

func TestPrivilegedAllowed(t *testing.T) {
	priv := strings.Replace(jobYAML, "        ports:", "        securityContext:\n          privileged: true\n        ports:", 1)
	expectNone(t, builtin(t, priv))
}

const lws = `apiVersion: leaderworkerset.x-k8s.io/v1
kind: LeaderWorkerSet
metadata:
  name: llama
  namespace: multinode
spec:
  replicas: 1
  leaderWorkerTemplate:
    size: 2
    leaderTemplate:
      metadata:
        labels:
          role: leader
      spec:
        containers:
        - name: main
          image: nvcr.io/nim/meta/llama:1.0
    workerTemplate:
      metadata:
        labels:
          role: worker
      spec:
        containers:
        - name: main
          image: nvcr.io/nim/meta/llama:1.0
          ports:
          - containerPort: 8000
`

func TestCustomResourceControlPasses(t *testing.T) {
	expectNone(t, custom(t, lws))
}

func TestCustomResourceUnknownFieldPruned(t *testing.T) {
	bad := strings.Replace(lws, "  replicas: 1\n", "  replicas: 1\n  replicaz: 2\n", 1)
	expectIssue(t, custom(t, bad), "spec.replicaz", "prunes it")
}

func TestCustomResourceOpenAPIValidation(t *testing.T) {
	bad := strings.Replace(lws, "size: 2", "size: two", 1)
	expectIssue(t, custom(t, bad), "spec.leaderWorkerTemplate.size", "Invalid value")
}

func TestNestedPodTemplateInvalid(t *testing.T) {
	bad := strings.Replace(lws, "containerPort: 8000", "containerPort: 70000", 1)
	expectIssue(t, custom(t, bad), "spec.leaderWorkerTemplate.workerTemplate.spec.containers[0].ports[0].containerPort", "must be between 1 and 65535")
	bad = strings.Replace(lws, "        - name: main\n          image: nvcr.io/nim/meta/llama:1.0\n    workerTemplate", "        - name: Main_Container\n          image: nvcr.io/nim/meta/llama:1.0\n    workerTemplate", 1)
	expectIssue(t, custom(t, bad), "spec.leaderWorkerTemplate.leaderTemplate.spec.containers[0].name", "Invalid value")
}

const hypernode = `apiVersion: topology.volcano.sh/v1alpha1
kind: HyperNode
metadata:
  name: gpu-tier1
spec:
  tier: 1
  members:
  - type: Node
    selector:
      labelMatch:
        matchLabels:
          multinode.dev/node-pool: gpu
`

func TestCRDCELRule(t *testing.T) {
	expectNone(t, custom(t, hypernode))
	// Volcano v1.15.1's HyperNode CRD: x-kubernetes-validations on members[].selector
	// "Only one of ExactMatch, RegexMatch, or LabelMatch can be specified".
	bad := strings.Replace(hypernode, "      labelMatch:", "      exactMatch:\n        name: node-a\n      labelMatch:", 1)
	expectIssue(t, custom(t, bad), "spec.members[0].selector", "Only one of ExactMatch, RegexMatch, or LabelMatch")
}

const pcs = `apiVersion: grove.io/v1alpha1
kind: PodCliqueSet
metadata:
  name: r1
  namespace: multinode
spec:
  replicas: 1
  template:
    cliques:
    - name: prefill
      spec:
        roleName: prefill
        replicas: 2
        podSpec:
          containers:
          - name: main
            image: nvcr.io/nvidia/ai-dynamo/sglang-runtime:1.5.0
`

func TestNestedPodSpecInGrove(t *testing.T) {
	expectNone(t, custom(t, pcs))
	bad := strings.Replace(pcs, "          - name: main\n", "          - name: main\n            env:\n            - name: ''\n              value: x\n", 1)
	expectIssue(t, custom(t, bad), "spec.template.cliques[0].spec.podSpec.containers[0].env[0].name", "Required value")
}

// A stack folder end to end: the verdict file gets one line per finding and the summary, and the cut CRD
// is checked as the stored file (a cut CRD alone has no schema and would be refused).
func TestStackVerdict(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "mystack")
	if err := os.MkdirAll(filepath.Join(dir, "k8s"), 0o755); err != nil {
		t.Fatal(err)
	}
	cutCRD := `# spec cut to group/names/scope/versions; the full spec (sha256 0) is the upstream file
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: leaderworkersets.leaderworkerset.x-k8s.io
  annotations:
    multinode.dev/crd-source: lws@0.10.0
spec:
  group: leaderworkerset.x-k8s.io
  names: {kind: LeaderWorkerSet, listKind: LeaderWorkerSetList, plural: leaderworkersets, singular: leaderworkerset}
  scope: Namespaced
  versions:
  - {name: v1, served: true, storage: true}
`
	secret := "apiVersion: v1\nkind: Secret\nmetadata: {name: s, namespace: multinode}\ndata:\n  token: '[secret]'\n"
	files := map[string]string{
		"001-CustomResourceDefinition-lws.yaml": cutCRD,
		"002-Secret-s.yaml":                     secret,
		"003-Job-train.yaml":                    strings.Replace(jobYAML, "containerPort: 29500", "containerPort: 70000", 1),
		"004-LeaderWorkerSet-llama.yaml":        strings.Replace(lws, "  replicas: 1\n", "  replicas: 1\n  replicaz: 2\n", 1),
		"005-IPPool-x.yaml":                     "apiVersion: nv-ipam.nvidia.com/v1alpha1\nkind: IPPool\nmetadata: {name: x}\n",
	}
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(dir, "k8s", name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	res, err := checkStack(dir, crds(t))
	if err != nil {
		t.Fatal(err)
	}
	if len(res.findings) != 2 || res.expanded != 1 || res.placeholders != 1 || len(res.notChecked) != 1 || res.nested != 2 {
		t.Fatalf("findings %d (want 2: the port, the pruned field), expanded %d, placeholders %d, not checked %d, nested %d: %+v",
			len(res.findings), res.expanded, res.placeholders, len(res.notChecked), res.nested, res.findings)
	}
	var sb strings.Builder
	if err := writeVerdict(res, "apiserver.txt", &sb); err != nil {
		t.Fatal(err)
	}
	text, err := os.ReadFile(filepath.Join(dir, "engines", "apiserver.txt"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"mystack/k8s/003-Job-train.yaml\tJob multinode/train\tspec.template.spec.containers[0].ports[0].containerPort\t",
		"mystack/k8s/004-LeaderWorkerSet-llama.yaml\tLeaderWorkerSet multinode/llama\tspec.replicaz\t",
		"# apiserver mystack: 2 finding(s)",
		"# not checked: IPPool.nv-ipam.nvidia.com",
	} {
		if !strings.Contains(string(text), want) {
			t.Errorf("verdict lacks %q:\n%s", want, text)
		}
	}
}

// A cut CRD whose versions disagree with the stored file is a finding.
func TestCutCRDDisagrees(t *testing.T) {
	cut := `# spec cut to group/names/scope/versions
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: leaderworkersets.leaderworkerset.x-k8s.io}
spec:
  group: leaderworkerset.x-k8s.io
  names: {kind: LeaderWorkerSet, plural: leaderworkersets}
  scope: Namespaced
  versions:
  - {name: v2, served: true, storage: true}
`
	_, is, err := expandCutCRD([]byte(cut), crds(t))
	if err != nil {
		t.Fatal(err)
	}
	expectIssue(t, is, "spec.versions[0]", "differs from the stored")
}

func TestCustomResourceDuplicateField(t *testing.T) {
	bad := strings.Replace(lws, "  replicas: 1\n", "  replicas: 1\n  replicas: 1\n", 1)
	expectIssue(t, custom(t, bad), "replicas", `key "replicas" already set in map`)
}

// A built-in kind with no strategy wired is a finding, never skipped in silence.
func TestBuiltinKindWithoutStrategy(t *testing.T) {
	quota := "apiVersion: v1\nkind: ResourceQuota\nmetadata: {name: q, namespace: multinode}\nspec:\n  hard: {pods: \"10\"}\n"
	expectIssue(t, builtin(t, quota), "", "no CREATE strategy wired for ResourceQuota")
}

// The API server's create warnings are collected (and are not findings).
func TestCreateWarnings(t *testing.T) {
	dep := strings.Replace(jobYAML, "      restartPolicy: Never\n", "      restartPolicy: Never\n      nodeSelector:\n        beta.kubernetes.io/arch: amd64\n", 1)
	_, is, ws := checkBuiltin([]byte(dep), gvkOf(t, dep))
	expectNone(t, is)
	if len(ws) != 1 || !strings.Contains(ws[0], "beta.kubernetes.io/arch") {
		t.Errorf("want one deprecation warning for beta.kubernetes.io/arch, got %q", ws)
	}
}

// Nested templates are also sent as the Pod their controller creates (pod-only create rules), without
// repeating what the template check already said.
func TestNestedAsPod(t *testing.T) {
	bad := strings.Replace(lws, "          ports:\n", "          ports:\n          - containerPort: 70000\n", 1)
	n := 0
	for _, i := range custom(t, bad) {
		if strings.Contains(i.Msg, "70000") {
			n++
		}
	}
	if n != 1 {
		t.Errorf("the bad port is reported %d times, want once", n)
	}
	eph := strings.Replace(lws, "          ports:\n", "          ports:\n          - containerPort: 8001\n", 1) +
		"        ephemeralContainers:\n        - name: debug\n          image: busybox\n"
	expectIssue(t, custom(t, eph), "spec.leaderWorkerTemplate.workerTemplate.spec.ephemeralContainers", "cannot be set on create")
}
