package main

// The Kubeflow MPI operator's MPIJob controller (github.com/kubeflow/mpi-operator, built by conformance/mpi-operator
// with a main of ours: no health server, no leader election; that main says why), run outside the cluster on
// loopback, a child process like LWS. It serves no webhook (the operator has none: its manifests/base holds a
// Deployment, RBAC and the MPIJob CRD only), and listens on nothing.
//
// Gang scheduling: the stacks render MPIJobs for an operator run with --gang-scheduling=volcano
// (docs/workloads.md: schedulerName volcano and runPolicy.schedulingPolicy); the box gives it that flag when
// Volcano runs in the box, so the operator creates the Volcano PodGroup (minMember = schedulingPolicy.minAvailable)
// as it would in the cluster. Without Volcano it runs without gang scheduling and the pods stay for a scheduler
// the box does not run (listed as not checked by compare.py).

import (
	"context"
	"debug/buildinfo"
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"time"
)

type MPIOperator struct {
	cmd    *exec.Cmd
	exited chan error
}

// StartMPIOperator starts the controller with the box's kubeconfig; ready when it logs that it runs (its informers
// then sync by themselves; the batch phase that applies an MPIJob comes after the services phase has settled).
func StartMPIOperator(ctx context.Context, b *Box, bin string, gang string, logPath string,
	logf func(string, ...any)) (*MPIOperator, error) {
	log, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(log, "# %s --kubeConfig=<box> --gang-scheduling=%q\n", bin, gang)
	cmd := exec.Command(bin, "--kubeConfig="+b.Kubeconfig, "--gang-scheduling="+gang, "--logtostderr=true", "--v=2")
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		log.Close()
		return nil, fmt.Errorf("mpi-operator: %w", err)
	}
	m := &MPIOperator{cmd: cmd, exited: make(chan error, 1)}
	go func() { m.exited <- cmd.Wait(); log.Close() }()
	// a controller that exits at once (a flag it does not know, a kubeconfig it cannot read) is an error here
	select {
	case err := <-m.exited:
		m.exited <- err
		return nil, fmt.Errorf("mpi-operator exited at start (%v): see %s", err, logPath)
	case <-time.After(2 * time.Second):
	case <-ctx.Done():
		m.Stop()
		return nil, ctx.Err()
	}
	logf("mpi-operator started (pid %d, gang-scheduling %q, log %s)", cmd.Process.Pid, gang, logPath)
	return m, nil
}

func (m *MPIOperator) Stop() {
	if m == nil || m.cmd.Process == nil {
		return
	}
	_ = syscall.Kill(-m.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case err := <-m.exited:
		m.exited <- err
	case <-time.After(10 * time.Second):
		_ = syscall.Kill(-m.cmd.Process.Pid, syscall.SIGKILL)
		<-m.exited
	}
}

// ModuleVersion: "<module> <version>" of a binary built with that module as a dependency (its Go build information).
func ModuleVersion(bin, module string) string {
	info, err := buildinfo.ReadFile(bin)
	if err != nil {
		return bin + " (no build information: " + err.Error() + ")"
	}
	for _, d := range info.Deps {
		if d.Path == module {
			return module + " " + d.Version
		}
	}
	return bin + " (" + module + " not among its dependencies)"
}
