package main

// `clusterbox kubelet`: the real kubelet of k8s.io/kubernetes (the box's version), started the way its own
// command starts it (k8s.io/kubernetes@v1.33.13 cmd/kubelet/app/server.go:176-300: config file, flags, feature
// gates, logging, validation, UnsecuredDependencies, Run), with one difference: cadvisor's MachineInfo reports
// the catalog machine's cpu and memory (--machine-cpu, --machine-memory: the node's allocatable in nodes.yaml)
// instead of this 2-core host's, so that the kubelet admits the pods plan sized for that machine. The containers
// themselves run for real; their cgroups get the requests and limits the pod asks for.

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	cadvisorapi "github.com/google/cadvisor/info/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation/field"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/component-base/logs"
	logsapi "k8s.io/component-base/logs/api/v1"
	"k8s.io/kubernetes/cmd/kubelet/app"
	"k8s.io/kubernetes/cmd/kubelet/app/options"
	kubeletconfigvalidation "k8s.io/kubernetes/pkg/kubelet/apis/config/validation"
	"k8s.io/kubernetes/pkg/kubelet/cadvisor"
	"k8s.io/kubernetes/pkg/kubelet/cm"
	"k8s.io/kubernetes/pkg/kubelet/eviction"
	"k8s.io/kubernetes/pkg/kubelet/kubeletconfig/configfiles"
	utilfs "k8s.io/kubernetes/pkg/util/filesystem"
)

// machineSize is cadvisor with the catalog machine's cpu count and memory.
type machineSize struct {
	cadvisor.Interface
	cores  int
	memory uint64
}

func (m *machineSize) MachineInfo() (*cadvisorapi.MachineInfo, error) {
	mi, err := m.Interface.MachineInfo()
	if err != nil {
		return nil, err
	}
	c := *mi
	c.NumCores, c.NumPhysicalCores, c.MemoryCapacity = m.cores, m.cores, m.memory
	c.Topology = nil // the host's NUMA layout would contradict the machine's size (no topology manager runs)
	return &c, nil
}

func kubeletMain(args []string) int {
	fs := flag.NewFlagSet("kubelet", flag.ContinueOnError)
	config := fs.String("config", "", "KubeletConfiguration file")
	kubeconfig := fs.String("kubeconfig", "", "the box's kubeconfig")
	hostname := fs.String("hostname-override", "", "the node's name")
	nodeIP := fs.String("node-ip", "", "the node's address in the box")
	rootDir := fs.String("root-dir", "", "the kubelet's root directory")
	certDir := fs.String("cert-dir", "", "the kubelet's serving certificate directory")
	cpu := fs.String("machine-cpu", "", "cpu the machine reports (a quantity; rounded up to whole cores)")
	memory := fs.Int64("machine-memory", 0, "memory the machine reports, bytes")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	err := func() error {
		kf := options.NewKubeletFlags()
		kf.KubeConfig, kf.HostnameOverride, kf.NodeIP = *kubeconfig, *hostname, *nodeIP
		kf.RootDirectory, kf.CertDirectory = *rootDir, *certDir
		abs, err := filepath.Abs(*config)
		if err != nil {
			return err
		}
		kf.KubeletConfigFile = abs
		loader, err := configfiles.NewFsLoader(&utilfs.DefaultFs{}, abs)
		if err != nil {
			return err
		}
		kc, err := loader.Load()
		if err != nil {
			return fmt.Errorf("kubelet config %s: %w", abs, err)
		}
		if kc.EvictionHard == nil {
			kc.EvictionHard = eviction.DefaultEvictionHard
		}
		if err := utilfeature.DefaultMutableFeatureGate.SetFromMap(kc.FeatureGates); err != nil {
			return err
		}
		if err := options.ValidateKubeletFlags(kf); err != nil {
			return err
		}
		logs.InitLogs()
		if err := logsapi.ValidateAndApplyAsField(&kc.Logging, utilfeature.DefaultFeatureGate, field.NewPath("logging")); err != nil {
			return err
		}
		if err := kubeletconfigvalidation.ValidateKubeletConfiguration(kc, utilfeature.DefaultFeatureGate); err != nil {
			return err
		}
		s := &options.KubeletServer{KubeletFlags: *kf, KubeletConfiguration: *kc}
		deps, err := app.UnsecuredDependencies(s, utilfeature.DefaultFeatureGate)
		if err != nil {
			return err
		}
		// cadvisor as server.go run() makes it (cmd/kubelet/app/server.go:749-775), wrapped
		roots := []string{cm.NodeAllocatableRoot(s.CgroupRoot, s.CgroupsPerQOS, s.CgroupDriver)}
		if kcg, err := cm.GetKubeletContainer(s.KubeletCgroups); err == nil && kcg != "" {
			roots = append(roots, kcg)
		}
		cad, err := cadvisor.New(cadvisor.NewImageFsInfoProvider(s.ContainerRuntimeEndpoint), s.RootDirectory, roots,
			cadvisor.UsingLegacyCadvisorStats(s.ContainerRuntimeEndpoint), s.LocalStorageCapacityIsolation)
		if err != nil {
			return err
		}
		q, err := resource.ParseQuantity(*cpu)
		if err != nil {
			return fmt.Errorf("--machine-cpu: %w", err)
		}
		cores := int((q.MilliValue() + 999) / 1000)
		deps.CAdvisorInterface = &machineSize{Interface: cad, cores: cores, memory: uint64(*memory)}
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		sigs := make(chan os.Signal, 1)
		signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
		go func() { <-sigs; cancel() }()
		utilfeature.DefaultMutableFeatureGate.AddMetrics()
		return app.Run(ctx, s, deps, utilfeature.DefaultFeatureGate)
	}()
	if err != nil {
		fmt.Fprintln(os.Stderr, "kubelet:", err)
		return 1
	}
	return 0
}
