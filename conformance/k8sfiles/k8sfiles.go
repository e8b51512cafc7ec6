// Package k8sfiles reads a build/<stack>/k8s/ folder that `multinode plan` wrote, in apply order. One small
// module that conformance/apiserver and conformance/cluster both require through a replace line (their go.mod), so
// the reading of apply-order.txt is written once.
package k8sfiles

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// ApplyOrderIndex is the file `multinode plan` writes into build/<stack>/k8s/: the file names of the folder in
// apply order, one per line, dependencies first (multinode/k8sfiles.py). The file names themselves carry no
// order (<Kind>-<namespace>-<name>.yaml), so a folder with the index is read in its order; a folder without it
// (a hand-made fixture, the chart-check's helm-objects/k8s/) in name order.
const ApplyOrderIndex = "apply-order.txt"

// OrderedYAMLFiles returns every *.yaml of a k8s/ folder in apply order. An index that does not list exactly
// the folder's files is an error (a hand edit or a partial copy), never guessed around.
func OrderedYAMLFiles(dir string) ([]string, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		return nil, err
	}
	sort.Strings(files)
	data, err := os.ReadFile(filepath.Join(dir, ApplyOrderIndex))
	if os.IsNotExist(err) {
		return files, nil
	}
	if err != nil {
		return nil, err
	}
	present := map[string]bool{}
	for _, f := range files {
		present[filepath.Base(f)] = true
	}
	var out []string
	listed := map[string]bool{}
	for _, line := range strings.Split(string(data), "\n") {
		name := strings.TrimSpace(line)
		if name == "" || strings.HasPrefix(name, "#") {
			continue
		}
		if !present[name] || listed[name] {
			return nil, fmt.Errorf("%s: lists %q, which is not a file of the folder (or twice); run `multinode plan` again",
				filepath.Join(dir, ApplyOrderIndex), name)
		}
		listed[name] = true
		out = append(out, filepath.Join(dir, name))
	}
	if len(out) != len(files) {
		var missing []string
		for _, f := range files {
			if !listed[filepath.Base(f)] {
				missing = append(missing, filepath.Base(f))
			}
		}
		return nil, fmt.Errorf("%s: does not list %v; run `multinode plan` again", filepath.Join(dir, ApplyOrderIndex), missing)
	}
	return out, nil
}
