module github.com/multinode/conformance/k8sfiles

go 1.24.0
