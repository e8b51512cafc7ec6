package main

// Values keys the chart never reads (README.md "Unread values keys"): for each leaf key path the stack sets,
// the release is rendered again with that key changed to a sentinel of the same type, and, when that changes
// nothing, with the key removed. A key whose change and removal both leave the output byte-identical (apart
// from templates whose output differs between two renders of the same values) is reported: the chart does
// not read it with these values.

import (
	"fmt"
	"sort"
	"strings"
)

// leafPath is one key path the stack sets, with its value.
type leafPath struct {
	Path  []string
	Value interface{}
}

func (l leafPath) String() string { return strings.Join(l.Path, ".") }

// leaves lists the leaf key paths of a values map: a scalar, a list, null, or an empty map ends a path.
func leaves(v map[string]interface{}, prefix []string) []leafPath {
	keys := make([]string, 0, len(v))
	for k := range v {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var out []leafPath
	for _, k := range keys {
		p := append(append([]string{}, prefix...), k)
		if m, ok := v[k].(map[string]interface{}); ok && len(m) > 0 {
			out = append(out, leaves(m, p)...)
			continue
		}
		out = append(out, leafPath{Path: p, Value: v[k]})
	}
	return out
}

const sentinel = "multinode-sentinel"

// sentinelFor returns a value of the same type that differs from v (ok false: no such value, e.g. null).
func sentinelFor(v interface{}) (interface{}, bool) {
	switch t := v.(type) {
	case bool:
		return !t, true
	case float64:
		return t + 7, true
	case int:
		return t + 7, true
	case int64:
		return t + 7, true
	case string:
		if t == "" {
			return sentinel, true
		}
		return t + "-" + sentinel, true
	case []interface{}:
		if len(t) > 0 {
			return []interface{}{}, true
		}
		return []interface{}{sentinel}, true
	case map[string]interface{}:
		return map[string]interface{}{sentinel: sentinel}, true
	default:
		return nil, false
	}
}

// withKey returns a deep copy of vals with path set to v (remove: path deleted).
func withKey(vals map[string]interface{}, path []string, v interface{}, remove bool) map[string]interface{} {
	out := deepCopy(vals).(map[string]interface{})
	m := out
	for _, k := range path[:len(path)-1] {
		next, ok := m[k].(map[string]interface{})
		if !ok {
			return out
		}
		m = next
	}
	last := path[len(path)-1]
	if remove {
		delete(m, last)
	} else {
		m[last] = v
	}
	return out
}

// keyVerdict is what became of one key.
type keyVerdict struct {
	Key    string
	Read   bool
	How    string // how it was seen to be read, or why it was not judged
	Judged bool
}

// judgeKeys renders the release once per key (twice for an unread one) and says which keys change nothing.
// notJudged maps a top-level key (a dependency that is not stored) to the reason its keys cannot be judged;
// helmRead maps a key path Helm itself reads (a dependency's condition) to that reason.
func judgeKeys(render func(map[string]interface{}) rendered, vals map[string]interface{}, base rendered, unstable map[string]bool,
	notJudged map[string]string, helmRead map[string]string) []keyVerdict {
	baseText := base.text(unstable)
	changed := func(r rendered) (bool, string) {
		if r.Err != nil {
			return true, "render error: " + firstLine(r.Err.Error())
		}
		return r.text(unstable) != baseText, "output changed"
	}
	var out []keyVerdict
	for _, l := range leaves(vals, nil) {
		key := l.String()
		if why, ok := notJudged[l.Path[0]]; ok {
			out = append(out, keyVerdict{Key: key, How: why})
			continue
		}
		if why, ok := helmRead[key]; ok {
			out = append(out, keyVerdict{Key: key, Read: true, Judged: true, How: why})
			continue
		}
		v := keyVerdict{Key: key, Judged: true}
		if s, ok := sentinelFor(l.Value); ok {
			if c, how := changed(render(withKey(vals, l.Path, s, false))); c {
				v.Read, v.How = true, fmt.Sprintf("set to %v: %s", short(s), how)
			}
		}
		if !v.Read {
			if c, how := changed(render(withKey(vals, l.Path, nil, true))); c {
				v.Read, v.How = true, "removed: "+how
			}
		}
		out = append(out, v)
	}
	return out
}

func short(v interface{}) string {
	s := oneLine(fmt.Sprintf("%v", v))
	if len(s) > 40 {
		s = s[:40] + "..."
	}
	return s
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}
