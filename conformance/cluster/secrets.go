package main

// Secrets a stack names and does not render (issue 42, real nodes): an existing Secret the stack's config points
// at (nim-lws-options' ngcApiSecret `ngc-api`, key NGC_API_KEY), which a real cluster has before `pulumi up`. A
// fake kubelet never reads it; a real one refuses to start the container without it (CreateContainerConfigError,
// "secret not found"). The box makes each such Secret with the keys the pods ask for and a value that says what
// it is, and lists it as a stand-in (compare.py: not checked), as it does the PersistentVolumes of claims.
//
// The same for an existing image pull Secret (nim-lws-options' imagePullSecrets `ngc-secret`): the kubelet looks
// every one up before it pulls or starts the pod's containers and, missing, warns FailedToRetrieveImagePullSecret
// (k8s.io/kubernetes@v1.33.13 pkg/kubelet/kubelet_pods.go:1007-1028 getPullSecretsForPod). The box makes it of type
// kubernetes.io/dockerconfigjson with a `.dockerconfigjson` that holds no credential (`{"auths":{}}`: the box's
// registry asks for none) and says what it is in an annotation.

import (
	"context"
	"fmt"
	"sort"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

const standInSecretValue = "multinode-box-stand-in: the stack names this Secret as existing; the box made it"

// standInDockerConfig: a .dockerconfigjson with no registry in it (the kubelet parses it and finds no credential
// for any image; the box's registry serves without one).
const standInDockerConfig = `{"auths":{}}`

// pullSecretRefs: the Secrets the objects name in imagePullSecrets (pod specs, ServiceAccounts), by namespace/name.
func pullSecretRefs(objects []Object) map[string]bool {
	out := map[string]bool{}
	for _, o := range objects {
		ns := o.U.GetNamespace()
		if ns == "" {
			ns = "default"
		}
		eachMap([]Object{o}, func(m map[string]any) {
			list, _ := m["imagePullSecrets"].([]any)
			for _, it := range list {
				if r, ok := it.(map[string]any); ok {
					if name, _ := r["name"].(string); name != "" {
						out[ns+"/"+name] = true
					}
				}
			}
		})
	}
	return out
}

// secretRefs: the Secrets the objects' pod templates name, not optional, by namespace/name, with the keys asked
// (env valueFrom.secretKeyRef, envFrom secretRef, secret volumes and their items); rendered: the Secrets the
// objects are.
func secretRefs(objects []Object) (refs map[string]map[string]bool, rendered map[string]bool) {
	refs, rendered = map[string]map[string]bool{}, map[string]bool{}
	for _, o := range objects {
		ns := o.U.GetNamespace()
		if ns == "" {
			ns = "default"
		}
		if o.U.GetKind() == "Secret" {
			rendered[ns+"/"+o.U.GetName()] = true
			continue
		}
		add := func(name, key string) {
			k := ns + "/" + name
			if refs[k] == nil {
				refs[k] = map[string]bool{}
			}
			if key != "" {
				refs[k][key] = true
			}
		}
		eachMap([]Object{o}, func(m map[string]any) {
			if r, ok := m["secretKeyRef"].(map[string]any); ok && r["optional"] != true {
				if name, _ := r["name"].(string); name != "" {
					key, _ := r["key"].(string)
					add(name, key)
				}
			}
			if r, ok := m["secretRef"].(map[string]any); ok && r["optional"] != true {
				if name, _ := r["name"].(string); name != "" {
					add(name, "")
				}
			}
			if v, ok := m["secret"].(map[string]any); ok && v["optional"] != true {
				if name, _ := v["secretName"].(string); name != "" {
					add(name, "")
					items, _ := v["items"].([]any)
					for _, it := range items {
						if im, ok := it.(map[string]any); ok {
							key, _ := im["key"].(string)
							add(name, key)
						}
					}
				}
			}
		})
	}
	return refs, rendered
}

// standInSecrets makes, on a box with real nodes, every Secret the objects name and do not render (secretRefs),
// unless it exists already; it returns one line per Secret made (or that could not be).
func standInSecrets(ctx context.Context, box *Box, objects []Object) []string {
	if len(realNodeNames) == 0 {
		return nil
	}
	refs, rendered := secretRefs(objects)
	pull := pullSecretRefs(objects)
	for k := range pull {
		if refs[k] == nil {
			refs[k] = map[string]bool{}
		}
	}
	var names []string
	for k := range refs {
		if !rendered[k] {
			names = append(names, k)
		}
	}
	sort.Strings(names)
	var out []string
	for _, k := range names {
		ns, name := splitKey(k)
		if _, err := box.Client.CoreV1().Secrets(ns).Get(ctx, name, metav1.GetOptions{}); err == nil {
			continue
		}
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name,
			Labels: map[string]string{"box.multinode.dev/stand-in": "true"}}, Data: map[string][]byte{}}
		var keys []string
		for key := range refs[k] {
			s.Data[key] = []byte(standInSecretValue)
			keys = append(keys, key)
		}
		kind := ""
		if pull[k] {
			s.Type = corev1.SecretTypeDockerConfigJson
			s.Data[corev1.DockerConfigJsonKey] = []byte(standInDockerConfig)
			s.Annotations = map[string]string{"box.multinode.dev/stand-in": standInSecretValue}
			keys = append(keys, corev1.DockerConfigJsonKey)
			kind = "image pull "
		}
		sort.Strings(keys)
		if _, err := box.Client.CoreV1().Secrets(ns).Create(ctx, s, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			out = append(out, fmt.Sprintf("Secret %s named by the stack as existing: the box could not make it: %v", k, err))
			continue
		}
		out = append(out, fmt.Sprintf("%sSecret %s named by the stack as existing (not rendered): made by the box for the real nodes, keys %v", kind, k, keys))
	}
	return out
}

func splitKey(k string) (string, string) {
	for i := 0; i < len(k); i++ {
		if k[i] == '/' {
			return k[:i], k[i+1:]
		}
	}
	return "", k
}
