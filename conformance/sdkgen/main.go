// Command sdkgen generates the multinode package's SDKs from its schema (`multinode schema`) with Pulumi's own
// code generators, used as libraries: github.com/pulumi/pulumi/pkg/v3/codegen/schema binds the schema (the
// checks `pulumi package add` runs), codegen/{nodejs,python,go} write the SDKs `pulumi package add` would
// generate for a local package. No Pulumi CLI, no language host, no plugin: the schema references no other
// package, so a loader that refuses every load is enough (a reference to another package fails the bind).
//
//	sdkgen -schema build/sdks/schema.json -out build/sdks [-lang nodejs,python,go]
//
// writes <out>/<lang>/... and prints one line per language with its file count.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/blang/semver"
	gogen "github.com/pulumi/pulumi/pkg/v3/codegen/go"
	"github.com/pulumi/pulumi/pkg/v3/codegen/nodejs"
	"github.com/pulumi/pulumi/pkg/v3/codegen/python"
	"github.com/pulumi/pulumi/pkg/v3/codegen/schema"
)

const tool = "multinode-sdkgen"

// noLoader refuses to load any other package: the multinode schema must be self-contained.
type noLoader struct{}

var errNoLoad = errors.New("the multinode schema must not reference another package (sdkgen loads none)")

func (noLoader) LoadPackage(string, *semver.Version) (*schema.Package, error) { return nil, errNoLoad }
func (noLoader) LoadPackageV2(context.Context, *schema.PackageDescriptor) (*schema.Package, error) {
	return nil, errNoLoad
}
func (noLoader) LoadPackageReference(string, *semver.Version) (schema.PackageReference, error) {
	return nil, errNoLoad
}
func (noLoader) LoadPackageReferenceV2(context.Context, *schema.PackageDescriptor) (schema.PackageReference, error) {
	return nil, errNoLoad
}

// bind reads and binds the schema; every diagnostic the binder reports is an error here (warnings too: a
// schema Pulumi warns about is one to fix).
func bind(path string) (*schema.Package, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var spec schema.PackageSpec
	if err := json.Unmarshal(data, &spec); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	pkg, diags, err := schema.BindSpec(spec, noLoader{}, schema.ValidationOptions{})
	if err != nil {
		return nil, fmt.Errorf("bind %s: %w", path, err)
	}
	if len(diags) > 0 {
		return nil, fmt.Errorf("bind %s: %w", path, diags)
	}
	// What `pulumi package add` does for a local package (pkg/cmd/pulumi/packages/packages.go InstallPackage):
	// SDKs laid out to be packed (the Go SDK gets its own go.mod).
	pkg.SupportPack = true
	return pkg, nil
}

func generate(lang string, pkg *schema.Package) (map[string][]byte, error) {
	switch lang {
	case "nodejs":
		// localSDK: the package.json of a local SDK (what `pulumi package add` generates)
		return nodejs.GeneratePackage(tool, pkg, nil, nil, true, noLoader{})
	case "python":
		return python.GeneratePackage(tool, pkg, nil, noLoader{})
	case "go":
		return gogen.GeneratePackage(tool, pkg, nil)
	}
	return nil, fmt.Errorf("unknown language %q (nodejs, python, go)", lang)
}

func write(dir string, files map[string][]byte) error {
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	for name, data := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			return err
		}
	}
	return nil
}

func run() error {
	schemaPath := flag.String("schema", "", "the package schema (JSON), as `multinode schema` prints it")
	out := flag.String("out", "", "the folder to write <lang>/ into")
	langs := flag.String("lang", "nodejs,python,go", "languages, comma-separated")
	flag.Parse()
	if *schemaPath == "" || *out == "" {
		return errors.New("usage: sdkgen -schema FILE -out DIR [-lang nodejs,python,go]")
	}
	for _, lang := range strings.Split(*langs, ",") {
		// each language binds its own copy: the generators record their language info on the package
		pkg, err := bind(*schemaPath)
		if err != nil {
			return err
		}
		files, err := generate(lang, pkg)
		if err != nil {
			return fmt.Errorf("%s: %w", lang, err)
		}
		if err := write(filepath.Join(*out, lang), files); err != nil {
			return err
		}
		names := make([]string, 0, len(files))
		for n := range files {
			names = append(names, n)
		}
		sort.Strings(names)
		fmt.Printf("sdkgen: %s SDK of %s %s: %d files in %s\n", lang, pkg.Name, pkg.Version, len(files),
			filepath.Join(*out, lang))
	}
	return nil
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "sdkgen:", err)
		os.Exit(1)
	}
}
