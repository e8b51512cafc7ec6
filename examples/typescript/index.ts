// The gcp-dev example stack (stacks/Pulumi.gcp-dev.yaml) as a TypeScript program using the multinode
// package, plus one more GPU node pool on its own. Set up (needs the Pulumi CLI and Node.js; see README
// "Using it from another language"):
//   pulumi package add github.com/multinode-gpu/multinode@v0.4.0   # generates sdks/multinode, links @pulumi/multinode
//   pulumi config set --secret hfToken <token>
//   pulumi preview
// `make sdks` type-checks this file with tsc against the nodejs SDK Pulumi's code generator makes from the
// package schema (conformance/sdkgen/README.md): the args are typed, so a misspelt key or a value outside an
// enum (cloud, kind, engine...) is a compile error.
// tests/test_package.py reads the two argument objects below (between the BEGIN/END markers) and checks
// them against the package schema and against stacks/Pulumi.gcp-dev.yaml.
import * as pulumi from "@pulumi/pulumi";
import * as multinode from "@pulumi/multinode";

const config = new pulumi.Config();

// BEGIN platform args
const platformArgs: multinode.PlatformArgs = {
    cloud: "gcp",
    cluster: { name: "dev-gke", project: "my-gpu-project", location: "us-central1" },
    addons: { grove: { enabled: true }, kai: { enabled: true } },
    nodePools: [
        { name: "gpu", machine: "a3-megagpu-8g", nodeCount: 6, zone: "us-central1-c" },
    ],
    storage: { kind: "filestore", tier: "ZONAL", sizeGib: 1024 },
    workloads: [
        {
            name: "llama-405b", kind: "lws-inference", engine: "vllm",
            model: "meta-llama/Llama-3.1-405B-Instruct", image: "docker.io/vllm/vllm-openai:v0.31.0-cu129",
            nodePool: "gpu", nodes: 2, tensorParallel: 8, pipelineParallel: 2,
        },
        {
            name: "r1-disagg", kind: "grove-inference", engine: "vllm", model: "deepseek-ai/DeepSeek-R1",
            image: "nvcr.io/nvidia/ai-dynamo/vllm-runtime:0.6.0", nodePool: "gpu", precision: "fp8",
            disaggregated: {
                prefill: { nodes: 2, tensorParallel: 8, pipelineParallel: 2 },
                decode: { nodes: 2, tensorParallel: 8, pipelineParallel: 2 },
            },
        },
    ],
};
// END platform args

const platform = new multinode.Platform("multinode", {
    ...platformArgs,
    hfToken: config.requireSecret("hfToken"),
});

// BEGIN pool args
const poolArgs: multinode.GpuNodePoolArgs = {
    cloud: "gcp",
    cluster: { name: "dev-gke", project: "my-gpu-project", location: "us-central1" },
    nodePool: { name: "spare", machine: "a3-megagpu-8g", nodeCount: 2, zone: "us-central1-c" },
};
// END pool args

// A pool on its own, e.g. for workloads this program deploys itself: select its nodes with nodeSelector.
const spare = new multinode.GpuNodePool("spare", poolArgs);

export const nodePools = platform.nodePools;
export const workloads = platform.workloads;
export const spareSelector = spare.nodeSelector;
export const spareFabric = spare.fabric;
