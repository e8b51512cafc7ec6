package k8sfiles

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The apply order is k8s/apply-order.txt's, not the file names' (multinode/k8sfiles.py); a folder without the
// index is read in name order; an index that does not list exactly the folder's files is an error.
func TestOrderedYAMLFiles(t *testing.T) {
	dir := t.TempDir()
	for _, n := range []string{"Namespace-multinode.yaml", "CustomResourceDefinition-x.example.com.yaml", "Job-multinode-train.yaml"} {
		if err := os.WriteFile(filepath.Join(dir, n), []byte("kind: X\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	base := func(fs []string) string {
		var out []string
		for _, f := range fs {
			out = append(out, filepath.Base(f))
		}
		return strings.Join(out, ",")
	}
	got, err := OrderedYAMLFiles(dir)
	if err != nil || base(got) != "CustomResourceDefinition-x.example.com.yaml,Job-multinode-train.yaml,Namespace-multinode.yaml" {
		t.Fatalf("without an index, name order: %v %v", got, err)
	}
	index := "# header\nNamespace-multinode.yaml\nCustomResourceDefinition-x.example.com.yaml\nJob-multinode-train.yaml\n"
	if err := os.WriteFile(filepath.Join(dir, ApplyOrderIndex), []byte(index), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err = OrderedYAMLFiles(dir)
	if err != nil || base(got) != "Namespace-multinode.yaml,CustomResourceDefinition-x.example.com.yaml,Job-multinode-train.yaml" {
		t.Fatalf("the index's order: %v %v", got, err)
	}
	if err := os.WriteFile(filepath.Join(dir, "Service-multinode-extra.yaml"), []byte("kind: X\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := OrderedYAMLFiles(dir); err == nil || !strings.Contains(err.Error(), "Service-multinode-extra.yaml") {
		t.Fatalf("a file the index does not list: %v", err)
	}
}
