// Command mpi-operator runs the Kubeflow MPI operator's MPIJob controller (github.com/kubeflow/mpi-operator, the
// version of this module's go.mod) for the cluster box: the operator's own flags and defaults (options.AddFlags),
// and the clients, informers and controller exactly as its command builds them
// (github.com/kubeflow/mpi-operator@v0.8.0 cmd/mpi-operator/app/server.go:108-173, createClientSets :258-300),
// without what the box must not have: the health server its command binds on every interface (server.go:188-204,
// ":8080"), the metrics server (main.go:29-38, --monitoring-port) and leader election (server.go:206-255; one replica
// here). Nothing listens.
package main

import (
	"context"
	"flag"
	"os"
	"os/signal"
	"syscall"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubeinformers "k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	clientgokubescheme "k8s.io/client-go/kubernetes/scheme"
	restclientset "k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"
	schedclientset "sigs.k8s.io/scheduler-plugins/pkg/generated/clientset/versioned"
	volcanoclient "volcano.sh/apis/pkg/client/clientset/versioned"

	"github.com/kubeflow/mpi-operator/cmd/mpi-operator/app/options"
	mpijobclientset "github.com/kubeflow/mpi-operator/pkg/client/clientset/versioned"
	kubeflowscheme "github.com/kubeflow/mpi-operator/pkg/client/clientset/versioned/scheme"
	informers "github.com/kubeflow/mpi-operator/pkg/client/informers/externalversions"
	controllersv1 "github.com/kubeflow/mpi-operator/pkg/controller"
)

func main() {
	opt := options.NewServerOption()
	opt.AddFlags(flag.CommandLine)
	klog.InitFlags(nil)
	flag.Parse()
	if opt.MonitoringPort != 0 {
		klog.Fatalf("--monitoring-port: the box serves no metrics (nothing of it listens)")
	}

	cfg, err := clientcmd.BuildConfigFromFlags(opt.MasterURL, opt.Kubeconfig)
	if err != nil {
		klog.Fatalf("kubeconfig: %v", err)
	}
	cfg.QPS, cfg.Burst = float32(opt.QPS), opt.Burst
	kubeClient := kubernetes.NewForConfigOrDie(restclientset.AddUserAgent(cfg, "mpi-operator"))
	mpiJobClient := mpijobclientset.NewForConfigOrDie(cfg)
	var vc volcanoclient.Interface
	var sc schedclientset.Interface
	if opt.GangSchedulingName == options.GangSchedulerVolcano {
		vc = volcanoclient.NewForConfigOrDie(restclientset.AddUserAgent(cfg, "volcano"))
	} else if opt.GangSchedulingName != "" {
		sc = schedclientset.NewForConfigOrDie(restclientset.AddUserAgent(cfg, "scheduler-plugins"))
	}
	if err := kubeflowscheme.AddToScheme(clientgokubescheme.Scheme); err != nil {
		klog.Fatalf("scheme: %v", err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	go func() { <-sig; cancel() }()

	var kubeOpts []kubeinformers.SharedInformerOption
	var kubeflowOpts []informers.SharedInformerOption
	if opt.Namespace != metav1.NamespaceAll {
		kubeOpts = append(kubeOpts, kubeinformers.WithNamespace(opt.Namespace))
		kubeflowOpts = append(kubeflowOpts, informers.WithNamespace(opt.Namespace))
	}
	kubeInformers := kubeinformers.NewSharedInformerFactoryWithOptions(kubeClient, 0, kubeOpts...)
	kubeflowInformers := informers.NewSharedInformerFactoryWithOptions(mpiJobClient, 0, kubeflowOpts...)
	controller, err := controllersv1.NewMPIJobController(ctx, kubeClient, mpiJobClient, vc, sc,
		kubeInformers.Core().V1().ConfigMaps(), kubeInformers.Core().V1().Secrets(),
		kubeInformers.Core().V1().Services(), kubeInformers.Batch().V1().Jobs(), kubeInformers.Core().V1().Pods(),
		kubeInformers.Scheduling().V1().PriorityClasses(), kubeflowInformers.Kubeflow().V2beta1().MPIJobs(), opt)
	if err != nil {
		klog.Fatalf("controller: %v", err)
	}
	go kubeInformers.Start(ctx.Done())
	go kubeflowInformers.Start(ctx.Done())
	if controller.PodGroupCtrl != nil {
		controller.PodGroupCtrl.StartInformerFactory(ctx.Done())
	}
	klog.Infof("mpi-operator controller running (gang-scheduling %q; no health server, metrics or leader election)",
		opt.GangSchedulingName)
	if err := controller.Run(opt.Threadiness, ctx.Done()); err != nil {
		klog.Fatalf("run: %v", err)
	}
}
