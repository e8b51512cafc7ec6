// Command pulumi-resource-kubernetes serves the Pulumi kubernetes provider from its Go module
// (github.com/pulumi/pulumi-kubernetes/provider/v4). The upstream main cannot be built from the module
// zip: it embeds schema-embed.json and terraform-mapping-embed.json, which upstream's `go generate`
// writes from schema.json and terraform-mapping.json and .gitignore keeps out of the module
// (pulumi/pulumi-kubernetes@v4.25.0 provider/cmd/pulumi-resource-kubernetes/main.go:27-32, generate.go).
// The two source files themselves are in the module zip at this version; `make pulumi-tools` copies them
// here from the module cache (git-ignored, see ../Makefile) and this main embeds them.
package main

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"os"

	"github.com/pulumi/pulumi-kubernetes/provider/v4/pkg/provider"
	"github.com/pulumi/pulumi-kubernetes/provider/v4/pkg/version"
)

//go:embed schema.json
var schemaJSON []byte

//go:embed terraform-mapping.json
var terraformMapping []byte

func main() {
	// version.Version is set at link time (-X, as upstream's release build does); the schema carries the
	// same version, which upstream's generate.go writes into schema-embed.json.
	schema, err := withVersion(schemaJSON, version.Version)
	if err != nil {
		fmt.Fprintf(os.Stderr, "pulumi-resource-kubernetes: %v\n", err)
		os.Exit(1)
	}
	provider.Serve("kubernetes", version.Version, schema, terraformMapping)
}

// withVersion sets the schema's top-level "version" field, leaving every other field byte-for-byte.
func withVersion(schema []byte, v string) ([]byte, error) {
	var spec map[string]json.RawMessage
	if err := json.Unmarshal(schema, &spec); err != nil {
		return nil, fmt.Errorf("cannot read the provider schema: %w", err)
	}
	if v == "" {
		return nil, fmt.Errorf("no version linked in (build with -ldflags -X %s.Version=...)", "github.com/pulumi/pulumi-kubernetes/provider/v4/pkg/version")
	}
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	spec["version"] = raw
	return json.Marshal(spec)
}
