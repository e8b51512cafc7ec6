package main

// Gangs on real nodes (issue 43): after a phase settled and its pods were read, the box waits, at most
// --gang-timeout, for the PyTorch gangs on real nodes to finish: in every real-node pod of the phase, each
// container that launches PyTorch (its command or args name torchrun or torch.distributed.run: the trainers, the
// NCCL preflight) terminated, or the pod ended (or is gone, after it was seen). Meanwhile it keeps each such pod's container logs as the kubelet writes
// them (<node>/pod-logs/<ns>_<pod>_<uid>/<container>/<restart>.log, CRI log format): the lines the stand-in image's
// PyTorch hooks print (MULTINODE_BOX_RANK per process that joined its process group, MULTINODE_BOX_TRAIN per
// trainer stand-in, MULTINODE_PREFLIGHT per preflight) and the last lines of each container. compare.py
// (gangs_check.py) judges them: formed or not, world size seen, time to form.

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// gangTimeout: the longest wait for a phase's PyTorch gangs on real nodes (--gang-timeout)
var gangTimeout = 240 * time.Second

// GangWait is what the box saw while it waited for a phase's PyTorch pods on real nodes.
type GangWait struct {
	Pods     []string `json:"pods"`     // namespace/name of the pods waited for
	Seconds  float64  `json:"seconds"`  // how long the wait took
	Bound    float64  `json:"bound"`    // --gang-timeout, seconds
	Finished bool     `json:"finished"` // every PyTorch container terminated (or its pod ended or is gone) before the bound
}

// GangSettings goes into observed.json: what the box changed for its PyTorch gangs.
type GangSettings struct {
	Bound      float64 `json:"bound"`
	NprocMax   int     `json:"nprocMax"`
	TorchLayer bool    `json:"torchLayer"`
}

const logTail = 25 // last lines kept per container

// launchesTorch: a command or args word names PyTorch's launcher (torchrun, python3 -m torch.distributed.run)
func launchesTorch(words []string) bool {
	for _, w := range words {
		if strings.Contains(w, "torchrun") || strings.Contains(w, "torch.distributed.run") {
			return true
		}
	}
	return false
}

func runsTorch(c corev1.Container) bool {
	return launchesTorch(append(append([]string{}, c.Command...), c.Args...))
}

// torchDone: every container of the pod that launches PyTorch has terminated (an init container's restarts
// count: the kubelet reruns a failed one under restartPolicy OnFailure/Always), or the pod ended.
func torchDone(p corev1.Pod) bool {
	if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
		return true
	}
	state := map[string]corev1.ContainerStatus{}
	for _, s := range append(append([]corev1.ContainerStatus{}, p.Status.InitContainerStatuses...), p.Status.ContainerStatuses...) {
		state[s.Name] = s
	}
	for _, c := range append(append([]corev1.Container{}, p.Spec.InitContainers...), p.Spec.Containers...) {
		if !runsTorch(c) {
			continue
		}
		s, ok := state[c.Name]
		if !ok || s.State.Terminated == nil {
			return false
		}
	}
	return true
}

func torchPod(p corev1.Pod) bool {
	for _, c := range append(append([]corev1.Container{}, p.Spec.InitContainers...), p.Spec.Containers...) {
		if runsTorch(c) {
			return true
		}
	}
	return false
}

// podLogs reads the pod's container logs on its real node: per container, the marked lines (MULTINODE_*) and the
// last logTail lines, over its restarts in order.
func podLogs(p corev1.Pod) map[string][]string {
	sock := realNodeSockets[p.Spec.NodeName]
	if sock == "" {
		return nil
	}
	dir := filepath.Join(filepath.Dir(filepath.Dir(sock)), "pod-logs", p.Namespace+"_"+p.Name+"_"+string(p.UID))
	out := map[string][]string{}
	conts, _ := os.ReadDir(dir)
	for _, c := range conts {
		files, _ := filepath.Glob(filepath.Join(dir, c.Name(), "*.log"))
		sort.Slice(files, func(i, j int) bool { return restartOf(files[i]) < restartOf(files[j]) })
		var marked, tail []string
		for _, f := range files {
			fh, err := os.Open(f)
			if err != nil {
				continue
			}
			sc := bufio.NewScanner(fh)
			sc.Buffer(make([]byte, 0, 64*1024), 1024*1024)
			for sc.Scan() {
				// CRI log line: <RFC3339 time> <stream> <P|F> <text>
				parts := strings.SplitN(sc.Text(), " ", 4)
				if len(parts) < 4 {
					continue
				}
				line := parts[3]
				if strings.HasPrefix(line, "MULTINODE_") && len(marked) < 512 {
					marked = append(marked, line)
				}
				tail = append(tail, line)
				if len(tail) > logTail {
					tail = tail[1:]
				}
			}
			fh.Close()
		}
		out[c.Name()] = append(marked, append([]string{"--- last lines ---"}, tail...)...)
	}
	return out
}

func restartOf(f string) int {
	n := 0
	for _, r := range strings.TrimSuffix(filepath.Base(f), ".log") {
		if r < '0' || r > '9' {
			return 0
		}
		n = n*10 + int(r-'0')
	}
	return n
}

// WaitGangs waits for the phase's PyTorch pods on real nodes (bounded by gangTimeout) and updates their views in
// ph.Pods: the pod as it is at the end (if it still exists), its container logs.
func WaitGangs(ctx context.Context, box *Box, ph *Phase, logf func(string, ...any)) {
	type tracked struct {
		idx  int
		pod  corev1.Pod
		logs map[string][]string
		gone bool
	}
	var ts []*tracked
	for i, v := range ph.Pods {
		if !realNodeNames[v.Node] {
			continue
		}
		p, err := box.Client.CoreV1().Pods(v.Namespace).Get(ctx, v.Name, metav1.GetOptions{})
		if err != nil || !torchPod(*p) {
			continue
		}
		ts = append(ts, &tracked{idx: i, pod: *p})
	}
	if len(ts) == 0 {
		return
	}
	t0 := time.Now()
	w := GangWait{Bound: gangTimeout.Seconds()}
	for _, t := range ts {
		w.Pods = append(w.Pods, t.pod.Namespace+"/"+t.pod.Name)
	}
	for {
		ended := true
		for _, t := range ts {
			if t.gone {
				continue
			}
			if l := podLogs(t.pod); len(l) > 0 {
				t.logs = l
			}
			p, err := box.Client.CoreV1().Pods(t.pod.Namespace).Get(ctx, t.pod.Name, metav1.GetOptions{})
			switch {
			case apierrors.IsNotFound(err) || (err == nil && p.UID != t.pod.UID):
				t.gone = true
				continue
			case err == nil:
				t.pod = *p
			}
			if !torchDone(t.pod) {
				ended = false
			}
		}
		if ended || time.Since(t0) > gangTimeout || ctx.Err() != nil {
			w.Finished = ended
			break
		}
		time.Sleep(2 * time.Second)
	}
	w.Seconds = time.Since(t0).Seconds()
	for _, t := range ts {
		v := &ph.Pods[t.idx]
		v.Logs = t.logs
		if !t.gone {
			v.Phase = string(t.pod.Status.Phase)
			raw := t.pod.DeepCopy()
			raw.ManagedFields = nil
			if m, err := toMap(raw); err == nil {
				v.Pod = m
			}
		}
	}
	ph.Gangs = append(ph.Gangs, w)
	logf("phase %q: %d PyTorch pods on real nodes, ended=%v after %.0fs (bound %.0fs)", ph.Name, len(ts), w.Finished,
		w.Seconds, w.Bound)
}

func toMap(v any) (map[string]any, error) {
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	return m, json.Unmarshal(raw, &m)
}
