package main

import (
	"reflect"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// nim-lws-options names an existing Secret (ngcApiSecret ngc-api, key NGC_API_KEY) the stack does not render: the
// box makes it for the real kubelets (which refuse a container whose Secret is missing); a Secret the stack
// renders (the hf-token) and an optional reference are left alone.
func TestSecretRefsOfTheStackNotRendered(t *testing.T) {
	lws := &unstructured.Unstructured{Object: map[string]any{"kind": "LeaderWorkerSet",
		"metadata": map[string]any{"name": "llama", "namespace": "multinode"},
		"spec": map[string]any{"leaderWorkerTemplate": map[string]any{"leaderTemplate": map[string]any{"spec": map[string]any{
			"containers": []any{map[string]any{"name": "nim",
				"env": []any{
					map[string]any{"name": "NGC_API_KEY", "valueFrom": map[string]any{"secretKeyRef": map[string]any{"name": "ngc-api", "key": "NGC_API_KEY"}}},
					map[string]any{"name": "HF_TOKEN", "valueFrom": map[string]any{"secretKeyRef": map[string]any{"name": "llama-hf-token", "key": "token"}}},
					map[string]any{"name": "X", "valueFrom": map[string]any{"secretKeyRef": map[string]any{"name": "maybe", "key": "x", "optional": true}}}},
				"envFrom": []any{map[string]any{"secretRef": map[string]any{"name": "extra-env"}}}}},
			"volumes": []any{map[string]any{"name": "certs", "secret": map[string]any{"secretName": "tls",
				"items": []any{map[string]any{"key": "ca.crt", "path": "ca.crt"}}}}}}}}}}}
	secret := &unstructured.Unstructured{Object: map[string]any{"kind": "Secret",
		"metadata": map[string]any{"name": "llama-hf-token", "namespace": "multinode"}}}
	refs, rendered := secretRefs([]Object{{U: lws}, {U: secret}})
	want := map[string]map[string]bool{
		"multinode/ngc-api":        {"NGC_API_KEY": true},
		"multinode/llama-hf-token": {"token": true},
		"multinode/extra-env":      {},
		"multinode/tls":            {"ca.crt": true},
	}
	if !reflect.DeepEqual(refs, want) {
		t.Fatalf("secretRefs = %v, want %v", refs, want)
	}
	if !rendered["multinode/llama-hf-token"] || len(rendered) != 1 {
		t.Fatalf("rendered = %v", rendered)
	}
}

// nim-lws-options names an existing image pull Secret (imagePullSecrets ngc-secret) on both LWS templates: the box
// makes it (the kubelet warns FailedToRetrieveImagePullSecret without it); a ServiceAccount's pull Secret counts.
func TestPullSecretRefsOfPodsAndServiceAccounts(t *testing.T) {
	tmpl := func() map[string]any {
		return map[string]any{"spec": map[string]any{"imagePullSecrets": []any{map[string]any{"name": "ngc-secret"}},
			"containers": []any{map[string]any{"name": "nim"}}}}
	}
	lws := &unstructured.Unstructured{Object: map[string]any{"kind": "LeaderWorkerSet",
		"metadata": map[string]any{"name": "llama", "namespace": "multinode"},
		"spec":     map[string]any{"leaderWorkerTemplate": map[string]any{"leaderTemplate": tmpl(), "workerTemplate": tmpl()}}}}
	sa := &unstructured.Unstructured{Object: map[string]any{"kind": "ServiceAccount",
		"metadata": map[string]any{"name": "puller"}, "imagePullSecrets": []any{map[string]any{"name": "mirror"}}}}
	got := pullSecretRefs([]Object{{U: lws}, {U: sa}})
	want := map[string]bool{"multinode/ngc-secret": true, "default/mirror": true}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("pullSecretRefs = %v, want %v", got, want)
	}
	if refs, _ := secretRefs([]Object{{U: lws}}); len(refs) != 0 {
		t.Fatalf("a pull Secret is not a key reference: %v", refs)
	}
}
