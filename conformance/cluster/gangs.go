package main

// Gangs on real nodes (issue 43): the pods of an MPIJob or of a LeaderWorkerSet group run the real coordination
// layer in the stand-in images (mpirun over ssh with the operator's hostfile and keys; `ray start`; the NIM
// stand-in's rendezvous), and the stand-ins print one verdict line, `MULTINODE_GANG {json}`
// (conformance/realnode/standin/python/multinode_standin/gang.py), on the gang's leading pod: the MPIJob's launcher
// (mpirun forwards rank 0's output; a Volcano Job's MPI master likewise) or the LWS group's leader. The box waits,
// bounded, for that line after a phase settled (a settled phase means the pods run, not that their gang formed),
// and records each real-node pod's last log lines and its verdict lines (PodView.Logs, PodView.Gang) from the
// kubelet's container logs; gang_check.py judges them against placement.json.
//
// PyTorch gangs (the containers that launch torchrun / torch.distributed.run: trainers, the NCCL preflight): the
// real launcher in the image's PyTorch layer (image.go, TorchRefs) runs the rendered flags; rank 0 of the process
// group prints the verdict (standin/python/multinode_standin/torch_hooks.py), in whichever pod of the gang it ran,
// and each pod's launcher a `MULTINODE_GANG_LAUNCH {json}` line (its endpoint and node rank, for a gang that does
// not form). The box waits, bounded, until every such container on a real node has terminated (or its pod ended):
// a gang that does not form keeps its launchers waiting at the rendezvous.

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

const gangMarker = "MULTINODE_GANG "

// the PyTorch launcher's line per pod (torch_hooks.py LAUNCH_MARKER), kept with the verdict lines
const gangLaunchMarker = "MULTINODE_GANG_LAUNCH "

// how long the box waits for a gang's verdict once the phase settled (--gang-timeout)
var gangTimeout = 240 * time.Second

// labels of the operators (kubeflow/mpi-operator@v0.8.0 pkg/apis/kubeflow/v2beta1/constants.go JobRoleLabel;
// sigs.k8s.io/lws@v0.9.0 api/leaderworkerset/v1/leaderworkerset_types.go SetNameLabelKey (lwsNameLabel, daytwo_rollout.go), WorkerIndexLabelKey)
const (
	mpiRoleLabel     = "training.kubeflow.org/job-role"
	mpiJobNameLabel  = "training.kubeflow.org/job-name"
	lwsWorkerIdLabel = "leaderworkerset.sigs.k8s.io/worker-index"
)

// gangLeader: the pod whose log carries its gang's verdict (an MPIJob's launcher, an LWS group's leader, a
// Volcano Job's MPI master).
func gangLeader(p corev1.Pod) bool {
	return p.Labels[mpiRoleLabel] == "launcher" || (p.Labels[lwsNameLabel] != "" && p.Labels[lwsWorkerIdLabel] == "0") ||
		volcanoMPIMaster(p)
}

// the label Volcano's job controller puts on a Job's pods (volcano.sh/apis@v1.14.0 pkg/apis/batch/v1alpha1/labels.go
// JobNameKey), and the env its mpi plugin gives the master task's containers when it makes the pod: the workers'
// host names (volcano.sh/volcano@v1.14.1 pkg/controllers/job/plugins/distributed-framework/mpi/mpi.go MPIHost,
// OnPodCreate)
const (
	volcanoJobLabel = "volcano.sh/job-name"
	volcanoMPIHost  = "MPI_HOST"
)

// volcanoMPIMaster: the master of a Volcano Job with the mpi plugin (aws-dev's and existing-dev's NCCL check): it
// runs mpirun over its workers' sshd, and rank 0's verdict comes out in its log.
func volcanoMPIMaster(p corev1.Pod) bool {
	if p.Labels[volcanoJobLabel] == "" {
		return false
	}
	for _, c := range p.Spec.Containers {
		for _, e := range c.Env {
			if e.Name == volcanoMPIHost {
				return true
			}
		}
	}
	return false
}

// RayRefs: the images of the containers whose command line runs Ray (`ray start`, `import ray`, vLLM's Ray
// executor): they get the Ray layer (image.go).
func RayRefs(objects []Object) map[string]bool {
	return refsOf(objects, func(line string) bool {
		return strings.Contains(line, "ray start") || strings.Contains(line, "import ray") ||
			strings.Contains(line, "executor-backend ray") || strings.Contains(line, "executor-backend=ray")
	})
}

// TorchRefs: the images of the containers that launch PyTorch (launchesTorch): they get the PyTorch layer (image.go).
func TorchRefs(objects []Object) map[string]bool {
	return refsOf(objects, launchesTorch)
}

// launchesTorch: a command line that runs PyTorch's launcher (torchrun, python3 -m torch.distributed.run)
func launchesTorch(line string) bool {
	return strings.Contains(line, "torchrun") || strings.Contains(line, "torch.distributed.run")
}

func runsTorch(c corev1.Container) bool {
	return launchesTorch(strings.Join(append(append([]string{}, c.Command...), c.Args...), " "))
}

// refsOf: the images of the containers (any map with an "image" string: pod templates, LWS templates, Volcano
// tasks ...) whose command and args, joined by spaces, match.
func refsOf(objects []Object, match func(line string) bool) map[string]bool {
	out := map[string]bool{}
	eachMap(objects, func(m map[string]any) {
		img, ok := m["image"].(string)
		if !ok || img == "" {
			return
		}
		var words []string
		for _, k := range []string{"command", "args"} {
			if l, ok := m[k].([]any); ok {
				for _, w := range l {
					if s, ok := w.(string); ok {
						words = append(words, s)
					}
				}
			}
		}
		if match(strings.Join(words, " ")) {
			out[img] = true
		}
	})
	return out
}

// torchContainers: the names of the pod's containers (init or not) that launch PyTorch
func torchContainers(p corev1.Pod) map[string]bool {
	out := map[string]bool{}
	for _, c := range append(append([]corev1.Container{}, p.Spec.InitContainers...), p.Spec.Containers...) {
		if runsTorch(c) {
			out[c.Name] = true
		}
	}
	return out
}

// leaderStarting: a gang's leading pod still Pending and not held in an error (its init containers running or
// completed, its containers being created): its verdict may still come.
func leaderStarting(p corev1.Pod) bool {
	return gangLeader(p) && p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodPending && !realPodDecided(p)
}

// torchRunning: a container of the pod that launches PyTorch is running (its gang forming or at work).
func torchRunning(p corev1.Pod) bool {
	if p.DeletionTimestamp != nil {
		return false
	}
	torch := torchContainers(p)
	for _, s := range append(append([]corev1.ContainerStatus{}, p.Status.InitContainerStatuses...), p.Status.ContainerStatuses...) {
		if torch[s.Name] && s.State.Running != nil {
			return true
		}
	}
	return false
}

// torchPending: the first container of the pod that launches PyTorch and has not terminated ("" when none), in
// the order the kubelet runs them (init containers first)
func torchPending(p corev1.Pod) string {
	state := map[string]corev1.ContainerStatus{}
	for _, s := range append(append([]corev1.ContainerStatus{}, p.Status.InitContainerStatuses...), p.Status.ContainerStatuses...) {
		state[s.Name] = s
	}
	for _, c := range append(append([]corev1.Container{}, p.Spec.InitContainers...), p.Spec.Containers...) {
		if s, ok := state[c.Name]; runsTorch(c) && (!ok || s.State.Terminated == nil) {
			return c.Name
		}
	}
	return ""
}

// heldReasons: the kubelet's waiting reasons of a container that will not start without a change from outside
// the pod (its image, its Secret or ConfigMap): the kubelet retries, with a back-off, the same thing
// (k8s.io/kubernetes@v1.33.13 pkg/kubelet/images/types.go:29-41 ErrImagePullBackOff, ErrImagePull,
// ErrImageNeverPull, ErrInvalidImageName; pkg/kubelet/kuberuntime/kuberuntime_container.go:68-72
// ErrCreateContainerConfig, ErrCreateContainer).
var heldReasons = map[string]bool{"ErrImagePull": true, "ImagePullBackOff": true, "ErrImageNeverPull": true,
	"InvalidImageName": true, "CreateContainerConfigError": true, "CreateContainerError": true}

// torchHeld: no container of the pod that launches PyTorch runs, and a container of the pod is held in one of
// heldReasons (existing-dev's Indexed Job: its preflight's image pull failed, the pod stayed Pending in
// ImagePullBackOff and the gang wait ran its whole bound for launchers that could not start): no launcher of
// this pod will join its gang within the wait; realnode_check.py reports the held container.
func torchHeld(p corev1.Pod) bool {
	if torchRunning(p) {
		return false
	}
	for _, s := range append(append([]corev1.ContainerStatus{}, p.Status.InitContainerStatuses...), p.Status.ContainerStatuses...) {
		if s.State.Waiting != nil && heldReasons[s.State.Waiting.Reason] {
			return true
		}
	}
	return false
}

// torchWaited: the pod has a container that launches PyTorch, not yet done, and not held (torchHeld): the gang
// wait waits for it.
func torchWaited(p corev1.Pod) bool {
	return len(torchContainers(p)) > 0 && !torchDone(p) && !torchHeld(p)
}

// torchDone: every container of the pod that launches PyTorch has terminated (and is not to be restarted: a
// container waiting for its restart is not done), or the pod ended.
func torchDone(p corev1.Pod) bool {
	if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
		return true
	}
	state := map[string]corev1.ContainerStatus{}
	for _, s := range append(append([]corev1.ContainerStatus{}, p.Status.InitContainerStatuses...), p.Status.ContainerStatuses...) {
		state[s.Name] = s
	}
	for name := range torchContainers(p) {
		if s, ok := state[name]; !ok || s.State.Terminated == nil {
			return false
		}
	}
	if p.Spec.RestartPolicy == corev1.RestartPolicyAlways {
		return true
	}
	// every container ended: the kubelet posts the pod's terminal phase next (seen: a status with the container
	// terminated and the phase still Running); wait for it, so the pod is read as it ends
	for _, c := range p.Spec.Containers {
		if s, ok := state[c.Name]; !ok || s.State.Terminated == nil {
			return true
		}
	}
	return false
}

// logTail: the lines a phase's snapshot keeps of each container (observed.json `logs`): enough of a failing
// container's end to find its cause (a Python traceback is 10-20 lines, mpirun's own errors as many); the whole
// log is in the copy podLogs names.
const logTail = 80

// podLogs reads each container's current log file as the kubelet wrote it (<podLogsDir>/<ns>_<pod>_<uid>/
// <container>/<restart>.log, CRI format: "<RFC3339 time> <stream> <tag> <line>"): the last `tail` lines, every
// verdict line (which may have scrolled out of the tail), and the path of the file's whole copy under the
// stack's folder (podlogs.go), by container.
func podLogs(p corev1.Pod, tail int) (map[string][]string, []string, map[string]string) {
	sock := realNodeSockets[p.Spec.NodeName]
	if sock == "" {
		return nil, nil, nil
	}
	dir := filepath.Join(filepath.Dir(filepath.Dir(sock)), "pod-logs", p.Namespace+"_"+p.Name+"_"+string(p.UID))
	conts, err := os.ReadDir(dir)
	if err != nil {
		return nil, nil, nil
	}
	var gang []string
	logs, copies := map[string][]string{}, map[string]string{}
	for _, c := range conts {
		files, _ := filepath.Glob(filepath.Join(dir, c.Name(), "*.log"))
		if len(files) == 0 {
			continue
		}
		sort.Slice(files, func(i, j int) bool { return restartOf(files[i]) < restartOf(files[j]) })
		f, err := os.Open(files[len(files)-1])
		if err != nil {
			continue
		}
		if cp := podLogCopy(files[len(files)-1]); cp != "" {
			if _, err := os.Stat(cp); err == nil {
				copies[c.Name()] = cp
			}
		}
		var last []string
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 64*1024), 1024*1024)
		for sc.Scan() {
			line := sc.Text()
			if strings.Contains(line, gangMarker) || strings.Contains(line, gangLaunchMarker) {
				gang = append(gang, c.Name()+" "+line)
			}
			last = append(last, line)
			if len(last) > tail {
				last = last[1:]
			}
		}
		f.Close()
		logs[c.Name()] = last
	}
	return logs, gang, copies
}

func restartOf(path string) int {
	n := 0
	for _, ch := range strings.TrimSuffix(filepath.Base(path), ".log") {
		if ch < '0' || ch > '9' {
			return -1
		}
		n = n*10 + int(ch-'0')
	}
	return n
}

// waitGangs waits (at most gangTimeout for each gang, twice that in all) until every gang with a pod on a real node has its verdict: the leading
// pod's log holds the verdict line, or that pod has ended or failed (no line will come); and every container that
// launches PyTorch on a real node has terminated (its pod ended, or it is gone). An MPIJob whose workers
// run on real nodes and whose launcher pod does not exist yet (the operator creates it once the workers are
// Ready) is waited for too. Returns how many gangs were still without a verdict at the end.
func waitGangs(ctx context.Context, box *Box, logf func(string, ...any)) int {
	if len(realNodeNames) == 0 {
		return 0
	}
	t0 := time.Now()
	last, since := "", t0
	for {
		pods, err := box.Client.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
		if err != nil {
			return -1
		}
		notePods(pods.Items)
		launchers := map[string]bool{}
		for _, p := range pods.Items {
			if p.Labels[mpiRoleLabel] == "launcher" {
				launchers[p.Namespace+"/"+p.Labels[mpiJobNameLabel]] = true
			}
		}
		var waiting []string
		for _, p := range pods.Items {
			if !realNodeNames[p.Spec.NodeName] || p.DeletionTimestamp != nil {
				continue
			}
			torch := torchContainers(p)
			if torchWaited(p) {
				waiting = append(waiting, "PyTorch launcher "+torchPending(p)+" in pod "+p.Namespace+"/"+p.Name)
				continue
			}
			if p.Labels[mpiRoleLabel] == "worker" && !launchers[p.Namespace+"/"+p.Labels[mpiJobNameLabel]] {
				waiting = append(waiting, "MPIJob "+p.Namespace+"/"+p.Labels[mpiJobNameLabel]+" (no launcher pod yet)")
				continue
			}
			if leaderStarting(p) {
				// its init containers done (azure-dev's LWS leader after its PyTorch preflight), its engine's
				// containers being created: the verdict is still to come
				waiting = append(waiting, "pod "+p.Namespace+"/"+p.Name+" (starting)")
				continue
			}
			if !gangLeader(p) || p.Status.Phase != corev1.PodRunning {
				continue // a leader held in its init containers, or ended: no verdict will come (realnode_check.py says why)
			}
			_, lines, _ := podLogs(p, 0)
			verdict := false
			for _, l := range lines {
				// a verdict of the pod's own engine, not its PyTorch preflight's (an init container)
				verdict = verdict || (strings.Contains(l, gangMarker) && !torch[strings.SplitN(l, " ", 2)[0]])
			}
			if !verdict {
				waiting = append(waiting, "pod "+p.Namespace+"/"+p.Name)
			}
		}
		sort.Strings(waiting)
		if len(waiting) == 0 {
			if time.Since(t0) > 2*time.Second {
				logf("gangs: every verdict in after %.0fs", time.Since(t0).Seconds())
			}
			return 0
		}
		// the bound is per gang: a change in what is waited for (a gang's verdict in, a pod's preflight gang done
		// and its trainer's begun) starts it again, up to twice the bound in all
		if now := strings.Join(waiting, ";"); now != last {
			last, since = now, time.Now()
		}
		if time.Since(since) > gangTimeout || time.Since(t0) > 2*gangTimeout || ctx.Err() != nil {
			logf("gangs: no verdict after %.0fs from %s", time.Since(t0).Seconds(), strings.Join(dedup(waiting), ", "))
			return len(dedup(waiting))
		}
		time.Sleep(2 * time.Second)
	}
}

func dedup(s []string) []string {
	var out []string
	for i, x := range s {
		if i == 0 || x != s[i-1] {
			out = append(out, x)
		}
	}
	return out
}

// env vars that name an MPI hostfile, as the MPI operator sets them on the launcher
// (kubeflow/mpi-operator@v0.8.0 pkg/controller/mpi_job_controller.go ompiEnvVars, intelEnvVars, mpichEnvVars)
var hostfileEnvs = []string{"OMPI_MCA_orte_default_hostfile", "I_MPI_HYDRA_HOST_FILE", "HYDRA_HOST_FILE"}

// hostfileNames: the hosts of the MPI hostfile a running container's env names, read from inside the container
// (`cat` through its node's containerd: the file as the kubelet mounted it from the operator's ConfigMap), one
// NameCheck each (first field of each line; Open MPI's "host slots=N", Intel's and MPICH's "host:N").
func hostfileNames(ctx context.Context, p corev1.Pod, env map[string]map[string]string, have []NameCheck) []NameCheck {
	seen := map[string]bool{}
	for _, c := range have {
		seen[c.Name] = true
	}
	var out []NameCheck
	for _, c := range p.Spec.Containers {
		for _, key := range hostfileEnvs {
			path := env[c.Name][key]
			if path == "" {
				continue
			}
			text, err := execIn(ctx, p, c.Name, "cat", path)
			if err != nil {
				out = append(out, NameCheck{Name: path, From: fmt.Sprintf("container %s hostfile %s (env %s)", c.Name, path, key),
					Container: c.Name, Error: "the hostfile cannot be read: " + err.Error(), Resolved: []string{}})
				continue
			}
			for _, line := range strings.Split(text, "\n") {
				f := strings.Fields(strings.SplitN(line, "#", 2)[0])
				if len(f) == 0 {
					continue
				}
				host := strings.SplitN(f[0], ":", 2)[0]
				if hostOf(host) == "" || seen[host] {
					continue
				}
				seen[host] = true
				out = append(out, NameCheck{Name: host, From: fmt.Sprintf("container %s hostfile %s: %s", c.Name, path,
					strings.TrimSpace(line)), Container: c.Name})
			}
		}
	}
	return out
}

// containerTask: the containerd socket of the pod's real node, the container's task id there and a fifo folder for
// `ctr tasks exec`; ok is false when the pod is not on a real node or the container has not started.
func containerTask(p corev1.Pod, container string) (sock, id, fifo string, ok bool) {
	sock = realNodeSockets[p.Spec.NodeName]
	for _, c := range p.Status.ContainerStatuses {
		if c.Name == container {
			id = strings.TrimPrefix(c.ContainerID, "containerd://")
		}
	}
	if sock == "" || id == "" {
		return "", "", "", false
	}
	fifo = filepath.Join(filepath.Dir(filepath.Dir(sock)), "fifo")
	_ = os.MkdirAll(fifo, 0o755)
	return sock, id, fifo, true
}

// execIn runs a command in a running container of a pod on a real node (ctr tasks exec) and returns its output.
func execIn(ctx context.Context, p corev1.Pod, container string, args ...string) (string, error) {
	sock, id, fifo, ok := containerTask(p, container)
	if !ok {
		return "", fmt.Errorf("container %s not found on its node", container)
	}
	cctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	out, err := exec.CommandContext(cctx, "ctr", append([]string{"--address", sock, "-n", "k8s.io", "tasks", "exec",
		"--fifo-dir", fifo, "--exec-id", fmt.Sprintf("box-exec-%d", execSeq.Add(1)), id}, args...)...).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("%s: %v %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return string(out), nil
}
