package main

import (
	"errors"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

func TestTransientServerErrorIsOnlyATimeout(t *testing.T) {
	gr := schema.GroupResource{Group: "policies.kyverno.io", Resource: "validatingpolicies"}
	for _, err := range []error{
		errors.New("etcdserver: request timed out"),
		apierrors.NewServerTimeout(gr, "create", 1),
		apierrors.NewTimeoutError("timeout", 1),
	} {
		if !transientServerError(err) {
			t.Errorf("%v: want transient", err)
		}
	}
	for _, err := range []error{
		apierrors.NewBadRequest("spec.rules: Invalid value"),
		apierrors.NewForbidden(gr, "x", errors.New("denied by policy")),
		apierrors.NewInvalid(schema.GroupKind{Kind: "Pod"}, "p", nil),
	} {
		if transientServerError(err) {
			t.Errorf("%v: a refusal is not transient", err)
		}
	}
}
