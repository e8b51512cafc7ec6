// A GPU node pool with EFA on an EKS cluster that another stack created (for instance with pulumi-eks), from Go:
// the cluster's name is an Output of that stack (a StackReference), passed straight to the pool. The shapes
// (machine, node count, zone, subnet) are plain values: the package checks them before any resource is
// registered.
//
// Set up (needs the Pulumi CLI and Go; see README "Using it from another language"):
//
//	pulumi package add github.com/multinode-gpu/multinode@v0.4.0   # generates sdks/multinode, adds its replace line
//	pulumi config set infraStack acme/eks/prod               # the stack that exports clusterName
//	pulumi preview
//
// `make sdks` builds this program with `go build` against the go SDK that Pulumi's code generator makes from the
// package schema (go.mod replaces the SDK's module by build/sdks/go).
package main

import (
	"github.com/multinode-gpu/multinode/sdk/go/multinode"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi/config"
)

func main() {
	pulumi.Run(func(ctx *pulumi.Context) error {
		cfg := config.New(ctx, "")
		infra, err := pulumi.NewStackReference(ctx, cfg.Require("infraStack"), nil)
		if err != nil {
			return err
		}
		// An identity computed elsewhere: unknown at the first preview, a string afterwards.
		clusterName := infra.GetStringOutput(pulumi.String("clusterName"))

		pool, err := multinode.NewGpuNodePool(ctx, "h100", &multinode.GpuNodePoolArgs{
			Cloud: multinode.CloudAws,
			Cluster: &multinode.ClusterRefArgs{
				Name:   clusterName,
				Region: pulumi.StringRef("us-east-1"),
			},
			NodePool: multinode.NodePoolArgs{
				Name:      "h100",
				Machine:   pulumi.StringRef("p5.48xlarge"),
				NodeCount: 2,
				Zone:      pulumi.StringRef("us-east-1a"),
				SubnetId:  pulumi.StringRef(cfg.Require("subnetId")),
			},
		})
		if err != nil {
			return err
		}
		ctx.Export("nodeSelector", pool.NodeSelector)
		ctx.Export("fabric", pool.Fabric)
		return nil
	})
}
