package main

// Where each release's chart comes from: the chart folders of ../shared/charts (one folder per chart and
// version, README.md "Chart folders"), a scratch copy under build/ for the folders whose Chart.yaml lists
// dependencies that are not stored, or nothing at all (the release is NOT CHECKED).

import (
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chartutil"
	"sigs.k8s.io/yaml"
)

// releaseSpec is one build/<stack>/helm/<file>.yaml as `multinode plan` writes it (the helm.v3.Release inputs).
type releaseSpec struct {
	File      string                 `json:"-"`
	Name      string                 `json:"name"`
	Namespace string                 `json:"namespace"`
	Chart     string                 `json:"chart"`
	Version   string                 `json:"version"`
	Values    map[string]interface{} `json:"values"`
	SkipCrds  bool                   `json:"skipCrds"`
}

// chartName is the chart's own name: the last path element of an oci:// reference, else the name as given
// (a name inside repositoryOpts.repo).
func (r releaseSpec) chartName() string {
	return path.Base(strings.TrimPrefix(r.Chart, "oci://"))
}

// standIns: a pinned version with no folder of its own, rendered with the folder of another version because
// PROVENANCE.md shows the chart folder is the same. The verdict says so on every such release ("stand-in"),
// and it never counts as a check of the pinned version's own files.
var standIns = map[string]struct{ folder, why string }{
	// ../shared/charts/PROVENANCE.md note 1: `git diff --stat v1.15.1 release-1.15 -- installer/helm/chart/volcano`
	// is empty; the release bump changes only Chart.yaml version/appVersion and values.yaml's image tag.
	"volcano 1.15.2": {"volcano-1.15.1", "no volcano-1.15.2 folder; PROVENANCE.md note 1: the chart folder of release-1.15 is byte-identical to v1.15.1 except Chart.yaml version/appVersion and the image tag (not verified for 1.15.2)"},
}

// droppedDepCRDs: CRDs a remote dependency (not stored, so removed from the scratch copy) would install when
// enabled, read from the project's schemas/ instead, so the kinds the chart renders for them are not reported
// as kinds without a CRD. kyverno/kyverno@v1.19.0 charts/kyverno/Chart.yaml: `kyverno-api` (condition
// crds.install) carries the policies.kyverno.io CRDs; schemas/kyverno/policies.kyverno.io_*.yaml are those CRDs
// (schemas/PROVENANCE.md).
var droppedDepCRDs = map[string]string{
	"kyverno-api": "kyverno/policies.kyverno.io_*.yaml",
}

// chartSource is the folder a release renders from, or why it is not checked.
type chartSource struct {
	Dir        string // folder to load (the stored one, or its scratch copy)
	Folder     string // folder name in the charts directory
	StandIn    string // non-empty: the reason another version's folder is used
	NotChecked string // non-empty: the release is not checked, and why
	Dropped    []*chart.Dependency
}

type chartResolver struct {
	chartsDir  string
	scratchDir string
	made       map[string]chartSource
}

func newChartResolver(chartsDir, scratchDir string) *chartResolver {
	return &chartResolver{chartsDir: chartsDir, scratchDir: scratchDir, made: map[string]chartSource{}}
}

func (c *chartResolver) resolve(r releaseSpec) chartSource {
	name, version := r.chartName(), r.Version
	folder := name + "-" + version
	var src chartSource
	if st, ok := standIns[name+" "+version]; ok {
		folder = st.folder
		src.StandIn = st.why
	}
	src.Folder = folder
	dir := filepath.Join(c.chartsDir, folder)
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		src.NotChecked = fmt.Sprintf("chart %s %s has no folder %s in %s: add its source there (PROVENANCE.md) to check it", name, version, folder, c.chartsDir)
		return src
	}
	if done, ok := c.made[folder]; ok {
		done.StandIn = src.StandIn
		return done
	}
	out, err := c.prepare(dir, folder)
	if err != nil {
		out = chartSource{Folder: folder, NotChecked: fmt.Sprintf("chart %s %s (%s): %v", name, version, folder, err)}
	}
	c.made[folder] = out
	out.StandIn = src.StandIn
	return out
}

// prepare returns the folder as-is when every dependency its Chart.yaml lists is present in charts/, else a
// scratch copy under scratchDir in which: a `file://` dependency is copied into charts/<name> (what `helm
// dependency build` does), and a remote dependency (not stored: PROVENANCE.md) is removed from Chart.yaml and
// Chart.lock. A removed dependency with no condition and no tags is required by the chart's templates: the
// release is then not checked.
func (c *chartResolver) prepare(dir, folder string) (chartSource, error) {
	meta, err := readChartYAML(filepath.Join(dir, "Chart.yaml"))
	if err != nil {
		return chartSource{}, err
	}
	var missing []*chart.Dependency
	for _, d := range meta.Dependencies {
		if !depPresent(dir, d) {
			missing = append(missing, d)
		}
	}
	if len(missing) == 0 {
		return chartSource{Dir: dir, Folder: folder}, nil
	}
	locked := map[string]string{}
	if b, err := os.ReadFile(filepath.Join(dir, "Chart.lock")); err == nil {
		var lock chart.Lock
		if yaml.Unmarshal(b, &lock) == nil {
			for _, d := range lock.Dependencies {
				locked[d.Name] = d.Version
			}
		}
	}
	for _, d := range missing {
		if !strings.HasPrefix(d.Repository, "file://") && d.Condition == "" && len(d.Tags) == 0 {
			v := d.Version
			if l, ok := locked[d.Name]; ok {
				v = l + " (Chart.lock; Chart.yaml asks " + d.Version + ")"
			}
			return chartSource{}, fmt.Errorf("its dependency %s %s from %s is required (no condition: the templates need it) and not stored in the charts folder: add it there to render this chart", d.Name, v, d.Repository)
		}
	}
	scratch := filepath.Join(c.scratchDir, folder)
	if err := os.RemoveAll(scratch); err != nil {
		return chartSource{}, err
	}
	if err := copyTree(dir, scratch); err != nil {
		return chartSource{}, err
	}
	out := chartSource{Dir: scratch, Folder: folder}
	drop := map[string]bool{}
	for _, d := range missing {
		if rel, ok := strings.CutPrefix(d.Repository, "file://"); ok {
			if err := copyTree(filepath.Join(dir, rel), filepath.Join(scratch, "charts", d.Name)); err != nil {
				return chartSource{}, fmt.Errorf("copying the local dependency %s: %w", d.Name, err)
			}
			continue
		}
		drop[d.Name] = true
		out.Dropped = append(out.Dropped, d)
	}
	for _, f := range []string{"Chart.yaml", "Chart.lock"} {
		if err := dropDependencies(filepath.Join(scratch, f), drop); err != nil {
			return chartSource{}, err
		}
	}
	return out, nil
}

func readChartYAML(p string) (*chart.Metadata, error) {
	b, err := os.ReadFile(p)
	if err != nil {
		return nil, err
	}
	m := &chart.Metadata{}
	return m, yaml.Unmarshal(b, m)
}

// depPresent: charts/<name>/Chart.yaml or a charts/<name>-*.tgz, as Helm's loader would find it.
func depPresent(dir string, d *chart.Dependency) bool {
	if _, err := os.Stat(filepath.Join(dir, "charts", d.Name, "Chart.yaml")); err == nil {
		return true
	}
	m, _ := filepath.Glob(filepath.Join(dir, "charts", d.Name+"-*.tgz"))
	return len(m) > 0
}

// dropDependencies removes the named entries from `dependencies:` of a Chart.yaml or Chart.lock (absent: no-op).
func dropDependencies(p string, drop map[string]bool) error {
	b, err := os.ReadFile(p)
	if os.IsNotExist(err) {
		return nil
	} else if err != nil {
		return err
	}
	var doc map[string]interface{}
	if err := yaml.Unmarshal(b, &doc); err != nil {
		return fmt.Errorf("%s: %w", p, err)
	}
	deps, _ := doc["dependencies"].([]interface{})
	kept := []interface{}{}
	for _, d := range deps {
		if m, ok := d.(map[string]interface{}); ok && drop[fmt.Sprint(m["name"])] {
			continue
		}
		kept = append(kept, d)
	}
	doc["dependencies"] = kept
	out, err := yaml.Marshal(doc)
	if err != nil {
		return err
	}
	return os.WriteFile(p, out, 0o644)
}

// copyTree copies a folder, keeping symlinks as symlinks (volcano's crd/v1 -> bases).
func copyTree(src, dst string) error {
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		t := filepath.Join(dst, rel)
		switch {
		case d.Type()&fs.ModeSymlink != 0:
			l, err := os.Readlink(p)
			if err != nil {
				return err
			}
			return os.Symlink(l, t)
		case d.IsDir():
			return os.MkdirAll(t, 0o755)
		default:
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			return os.WriteFile(t, b, 0o644)
		}
	})
}

// droppedEnabled lists the removed dependencies the release would install (their condition, or tags, true
// in the chart's defaults merged with the release's values), with what is then left unchecked.
func droppedEnabled(ch *chart.Chart, vals map[string]interface{}, dropped []*chart.Dependency) ([]*chart.Dependency, error) {
	merged, err := chartutil.CoalesceValues(ch, vals)
	if err != nil {
		return nil, err
	}
	var on []*chart.Dependency
	for _, d := range dropped {
		enabled := true
		if d.Condition != "" {
			enabled = false
			for _, c := range strings.Split(d.Condition, ",") {
				v, err := merged.PathValue(strings.TrimSpace(c))
				if err == nil {
					if b, ok := v.(bool); ok {
						enabled = b
						break
					}
				}
			}
		}
		if enabled {
			on = append(on, d)
		}
	}
	sort.Slice(on, func(i, j int) bool { return on[i].Name < on[j].Name })
	return on, nil
}

// depKey is the values key a dependency's values live under (its alias, else its name).
func depKey(d *chart.Dependency) string {
	if d.Alias != "" {
		return d.Alias
	}
	return d.Name
}
