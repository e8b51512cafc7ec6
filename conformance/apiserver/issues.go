package main

import (
	"errors"
	"fmt"
	"regexp"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// issue is one finding inside one object: a field path (dotted, as the API server prints it) and a message.
type issue struct {
	Path string
	Msg  string
}

// finding is an issue placed in a file and an object, as written to apiserver.txt.
type finding struct {
	File   string
	Object string
	issue
}

func (f finding) String() string {
	p := f.Path
	if p == "" {
		p = "<object>"
	}
	return fmt.Sprintf("%s\t%s\t%s\t%s", f.File, f.Object, p, oneLine(f.Msg))
}

var (
	strictFieldRE = regexp.MustCompile(`^(unknown|duplicate) field "([^"]*)"`)
	yamlDupRE     = regexp.MustCompile(`key "([^"]*)" already set in map`)
	spaceRE       = regexp.MustCompile(`\s+`)
)

// oneLine folds a message onto one line (the verdict has one line per finding).
func oneLine(s string) string { return strings.TrimSpace(spaceRE.ReplaceAllString(s, " ")) }

// strictIssue turns one strict-decoding error (`unknown field "spec.foo"`, `duplicate field "x"`, or the
// YAML duplicate-key error) into an issue with the field path split out.
func strictIssue(err error) issue {
	msg := oneLine(err.Error())
	if m := strictFieldRE.FindStringSubmatch(msg); m != nil {
		return issue{Path: m[2], Msg: msg + " (strict decoding: fieldValidation=Strict refuses it)"}
	}
	if m := yamlDupRE.FindStringSubmatch(msg); m != nil {
		// the YAML decoder names the key and its line, not the full path
		return issue{Path: m[1], Msg: msg + " (strict decoding: fieldValidation=Strict refuses it)"}
	}
	return issue{Msg: msg + " (strict decoding)"}
}

// statusIssues spreads an API error into its field causes (an Invalid status carries one cause per
// field.Error; other errors become one issue).
func statusIssues(err error) []issue {
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		st := status.Status()
		if st.Details != nil && len(st.Details.Causes) > 0 {
			out := make([]issue, 0, len(st.Details.Causes))
			for _, c := range st.Details.Causes {
				out = append(out, issue{Path: c.Field, Msg: c.Message})
			}
			return out
		}
		return []issue{{Msg: strings.TrimSpace(st.Message)}}
	}
	return []issue{{Msg: err.Error()}}
}

// fieldIssues converts a field.ErrorList.
func fieldIssues(errs field.ErrorList) []issue {
	out := make([]issue, 0, len(errs))
	for _, e := range errs {
		out = append(out, issue{Path: e.Field, Msg: e.ErrorBody()})
	}
	return out
}
