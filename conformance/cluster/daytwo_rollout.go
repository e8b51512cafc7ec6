package main

// Day two, scenario 4 (issue 44): a model rollout. The image of the stack's first LeaderWorkerSet changes and the
// changed object is applied to the box as pulumi-kubernetes applies it (server-side apply, field manager
// pulumi-kubernetes: apply.go); with --day-two-rollout-up a command sends the change instead (`make day-two-up`: the
// second `pulumi up` on the real engine of the stack with the workload's image changed to nextImage, while the box
// samples; the deadline counts from the command's end). LWS v0.9.0 rolls the groups: it first adds maxSurge groups of the
// new revision (indices replicas..replicas+maxSurge-1), then moves the leader StatefulSet's partition down, so old
// groups are replaced from the highest index to 0, never with fewer than replicas - maxUnavailable groups ready
// (sigs.k8s.io/lws@v0.9.0 pkg/controllers/leaderworkerset_controller.go:280-373 rollingUpdateParameters, :643-673
// rollingUpdatePartition, :685-696 calculateRollingUpdateReplicas). Expected, from upgrades.json `rollouts[]` (what
// `plan` prints): the rendered rolloutStrategy is plan's; surge groups first, then the old groups in order
// groups-1 .. 0; at no sample fewer ready groups than replicas - maxUnavailable; the rollout completes (every group of
// the new image, no surge group left). The box samples the LWS's pods every 200 ms (a fake kubelet makes a bound pod
// Ready at once, so a group is unready at least from its pods' deletion to their replacements' binding).

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

const (
	lwsNameLabel  = "leaderworkerset.sigs.k8s.io/name"
	lwsGroupLabel = "leaderworkerset.sigs.k8s.io/group-index"
	rolloutSample = 200 * time.Millisecond
)

type RolloutResult struct {
	LWS                     string   `json:"lws"`
	How                     string   `json:"how"`
	Replicas                int      `json:"replicas"`
	Size                    int      `json:"size"`
	MaxSurge                int      `json:"renderedMaxSurge"`
	MaxUnavailable          int      `json:"renderedMaxUnavailable"`
	PredictedMaxSurge       int      `json:"predictedMaxSurge"`
	PredictedMaxUnavailable int      `json:"predictedMaxUnavailable"`
	Predicted               string   `json:"predicted"` // upgrades.json imageChange
	PredictedOrder          []string `json:"predictedOrder"`
	ObservedOrder           []string `json:"observedOrder"` // group indices as their first new-image pod appeared
	MinReady                int      `json:"fewestReadyGroups"`
	AllowedMinReady         int      `json:"allowedFewestReadyGroups"`
	Samples                 int      `json:"samples"`
	SampleEvery             string   `json:"sampleEvery"`
	LongestGap              float64  `json:"longestGapBetweenSamplesSeconds"`
	Completed               bool     `json:"completed"`
	Final                   string   `json:"final"`
	// --day-two-rollout-up: the command that sent the change (the second `pulumi up`), its exit, its time, its lines
	// starting "rollout-up:" (the engine's step of the LeaderWorkerSet as rollout_up.py judged it), and the images the
	// LeaderWorkerSet on the box holds once it ended
	Command        string      `json:"command,omitempty"`
	CommandExit    *int        `json:"commandExit,omitempty"`
	CommandSeconds float64     `json:"commandSeconds,omitempty"`
	CommandSays    []string    `json:"commandSays,omitempty"`
	LiveImages     []string    `json:"liveImages,omitempty"`
	Events         []EventView `json:"events,omitempty"`
	Seconds        float64     `json:"seconds"`
}

func intField(u map[string]any, path ...string) (int, bool) {
	v, ok, err := unstructured.NestedFieldNoCopy(u, path...)
	if err != nil || !ok {
		return 0, false
	}
	switch x := v.(type) {
	case int64:
		return int(x), true
	case float64:
		return int(x), true
	case string:
		n, err := strconv.Atoi(x)
		return n, err == nil
	}
	return 0, false
}

// nextImage: the image a rollout moves to (another tag of the same repository: the fake kubelet pulls nothing)
func nextImage(img string) string {
	if at := strings.Index(img, "@"); at >= 0 {
		img = img[:at]
	}
	if i := strings.LastIndex(img, ":"); i > strings.LastIndex(img, "/") {
		return img + "-rollout"
	}
	return img + ":rollout"
}

func setImages(u map[string]any, path ...string) (map[string]bool, error) {
	cs, ok, err := unstructured.NestedSlice(u, path...)
	if err != nil || !ok {
		return nil, err
	}
	imgs := map[string]bool{}
	for i := range cs {
		c, _ := cs[i].(map[string]any)
		if img, ok := c["image"].(string); ok {
			c["image"] = nextImage(img)
			imgs[nextImage(img)] = true
		}
	}
	return imgs, unstructured.SetNestedSlice(u, cs, path...)
}

type groupState struct {
	pods, ready, fresh int
}

func (d *dayTwo) rollout(ctx context.Context) error {
	var lws *Object
	for i, o := range d.objs {
		if o.U.GetKind() == "LeaderWorkerSet" {
			if lws == nil {
				lws = &d.objs[i]
			} else {
				d.rep.NotChecked = append(d.rep.NotChecked, "rollout: "+o.Key()+" not rolled (the box rolls the first LeaderWorkerSet)")
			}
		}
	}
	if lws == nil {
		d.rep.NotChecked = append(d.rep.NotChecked, "rollout: the stack has no LeaderWorkerSet")
		return nil
	}
	ns, name := lws.U.GetNamespace(), lws.U.GetName()
	if n, err := d.box.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: lwsNameLabel + "=" + name}); err != nil {
		return err
	} else if len(n.Items) == 0 {
		d.rep.NotChecked = append(d.rep.NotChecked, "rollout: "+lws.Key()+" has no pods in the box (LWS controller not run?)")
		return nil
	}
	t0 := time.Now()
	res := &RolloutResult{LWS: lws.Key(), SampleEvery: rolloutSample.String(),
		How: "the changed object (every container image of the leader and worker templates) applied to the box by " +
			"server-side apply as pulumi-kubernetes applies it; not through `pulumi up`"}
	d.rep.Rollout = res
	defer func() { res.Seconds = time.Since(t0).Seconds(); res.Events = d.events(ctx, t0) }()
	u := lws.U.Object
	res.Replicas, _ = intField(u, "spec", "replicas")
	if res.Replicas == 0 {
		res.Replicas = 1
	}
	res.Size, _ = intField(u, "spec", "leaderWorkerTemplate", "size")
	if res.Size == 0 {
		res.Size = 1
	}
	res.MaxSurge, _ = intField(u, "spec", "rolloutStrategy", "rollingUpdateConfiguration", "maxSurge")
	mu, ok := intField(u, "spec", "rolloutStrategy", "rollingUpdateConfiguration", "maxUnavailable")
	if !ok {
		mu = 1 // the CRD's default
	}
	res.MaxUnavailable = mu
	if res.MaxSurge > res.Replicas {
		res.MaxSurge = res.Replicas // LWS caps it (leaderworkerset_controller.go:307-309)
	}
	found := false
	for _, r := range d.up.Rollouts {
		if r.Workload == lws.U.GetLabels()["multinode.dev/workload"] || r.Workload == name {
			res.PredictedMaxSurge, res.PredictedMaxUnavailable, res.Predicted, found = r.MaxSurge, r.MaxUnavailable, r.ImageChange, true
		}
	}
	if !found {
		d.finding("rollout: upgrades.json names no rollout for %s", lws.Key())
	} else if res.PredictedMaxSurge != res.MaxSurge || res.PredictedMaxUnavailable != res.MaxUnavailable {
		d.finding("rollout: %s is rendered with maxSurge %d, maxUnavailable %d where plan prints maxSurge %d, "+
			"maxUnavailable %d (upgrades.json rollouts)", lws.Key(), res.MaxSurge, res.MaxUnavailable,
			res.PredictedMaxSurge, res.PredictedMaxUnavailable)
	}
	for i := 0; i < res.MaxSurge; i++ {
		res.PredictedOrder = append(res.PredictedOrder, fmt.Sprintf("surge %d", res.Replicas+i))
	}
	for i := res.Replicas - 1; i >= 0; i-- {
		res.PredictedOrder = append(res.PredictedOrder, strconv.Itoa(i))
	}
	res.AllowedMinReady = res.Replicas - res.MaxUnavailable
	if res.AllowedMinReady < 0 {
		res.AllowedMinReady = 0
	}
	changed := lws.U.DeepCopy()
	fresh := map[string]bool{}
	for _, path := range [][]string{
		{"spec", "leaderWorkerTemplate", "leaderTemplate", "spec", "containers"},
		{"spec", "leaderWorkerTemplate", "workerTemplate", "spec", "containers"},
	} {
		imgs, err := setImages(changed.Object, path...)
		if err != nil {
			return err
		}
		for k := range imgs {
			fresh[k] = true
		}
	}
	sample := func() (map[int]*groupState, error) {
		pods, err := d.box.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: lwsNameLabel + "=" + name})
		if err != nil {
			return nil, err
		}
		out := map[int]*groupState{}
		for _, p := range pods.Items {
			if p.DeletionTimestamp != nil {
				continue
			}
			gi, err := strconv.Atoi(p.Labels[lwsGroupLabel])
			if err != nil {
				continue
			}
			g := out[gi]
			if g == nil {
				g = &groupState{}
				out[gi] = g
			}
			g.pods++
			if p.Spec.NodeName != "" && podReady(p) {
				g.ready++
			}
			if len(p.Spec.Containers) > 0 && fresh[p.Spec.Containers[0].Image] {
				g.fresh++
			}
		}
		return out, nil
	}
	readyGroups := func(gs map[int]*groupState) int {
		n := 0
		for _, g := range gs {
			if g.pods == res.Size && g.ready == res.Size {
				n++
			}
		}
		return n
	}
	start, err := sample()
	if err != nil {
		return err
	}
	res.MinReady = readyGroups(start)
	if res.MinReady < res.Replicas {
		d.rep.NotChecked = append(d.rep.NotChecked, fmt.Sprintf("rollout: %s has %d of %d groups ready when the "+
			"rollout starts: judged from that state", lws.Key(), res.MinReady, res.Replicas))
		res.AllowedMinReady = min(res.AllowedMinReady, max(0, res.MinReady-res.MaxUnavailable))
	}
	// --day-two-rollout-up: the command sends the change (its stack file's image is nextImage of the rendered one) and
	// the box samples while it runs; the deadline counts from its end
	var cmdDone chan error
	var cmdOut bytes.Buffer
	cmdStart := time.Now()
	if rolloutUpCmd != "" {
		res.Command = rolloutUpCmd
		res.How = "the changed stack (the workload's image) sent by the command, the second `pulumi up` on the real " +
			"engine (--day-two-rollout-up); the box's own apply not used"
		cmdDone = make(chan error, 1)
		go func() { cmdDone <- runBoxCommand(ctx, d.box, rolloutUpCmd, &cmdOut) }()
		d.logf("day two: %s: the command sends the image change (%s)", lws.Key(), strings.Join(keys(fresh), ", "))
	} else {
		if err := d.ap.Apply(ctx, Object{File: lws.File, U: changed}, 20*time.Second); err != nil {
			d.finding("rollout: the changed %s was refused: %v", lws.Key(), err)
			return nil
		}
		d.logf("day two: %s image changed (%s)", lws.Key(), strings.Join(keys(fresh), ", "))
	}
	cmdEnded := func(err error) {
		code := 0
		if err != nil {
			code = -1
			if ee, ok := err.(*exec.ExitError); ok {
				code = ee.ExitCode()
			}
		}
		res.CommandExit, res.CommandSeconds, cmdDone = &code, time.Since(cmdStart).Seconds(), nil
		for _, ln := range strings.Split(cmdOut.String(), "\n") {
			if strings.HasPrefix(ln, "rollout-up:") {
				res.CommandSays = append(res.CommandSays, ln)
			}
		}
		if code != 0 {
			d.finding("rollout: the command that sends the change of %s failed (exit %d): %s", lws.Key(), code,
				strings.Join(res.CommandSays, "; "))
		}
		ri, err := d.ap.resource(lws.U, 10*time.Second)
		var live *unstructured.Unstructured
		if err == nil {
			live, err = ri.Get(ctx, name, metav1.GetOptions{})
		}
		if err != nil {
			d.finding("rollout: %s after the command: %v", lws.Key(), err)
			return
		}
		want := map[string]bool{}
		for _, path := range [][]string{
			{"spec", "leaderWorkerTemplate", "leaderTemplate", "spec", "containers"},
			{"spec", "leaderWorkerTemplate", "workerTemplate", "spec", "containers"},
		} {
			lc, _, _ := unstructured.NestedSlice(live.Object, path...)
			wc, _, _ := unstructured.NestedSlice(changed.Object, path...)
			for i := range lc {
				img, _ := lc[i].(map[string]any)["image"].(string)
				res.LiveImages = append(res.LiveImages, img)
				if i < len(wc) {
					if w, _ := wc[i].(map[string]any)["image"].(string); w != img {
						want[fmt.Sprintf("%s[%d] %s (expected %s)", path[2], i, img, w)] = true
					}
				}
			}
		}
		if len(want) > 0 {
			d.finding("rollout: after the command %s holds images other than the changed stack's: %s", lws.Key(),
				strings.Join(keys(want), ", "))
		}
	}
	firstSeen := map[int]time.Time{}
	limit := 30*time.Second + time.Duration(res.Replicas+res.MaxSurge)*20*time.Second
	last := time.Now()
	var doneSince time.Time
	var final map[int]*groupState
	for deadline := time.Now().Add(limit); time.Now().Before(deadline); time.Sleep(rolloutSample) {
		if cmdDone != nil {
			select {
			case err := <-cmdDone:
				cmdEnded(err)
			default:
				deadline = time.Now().Add(limit) // the roll is judged from the command's end
			}
		}
		gs, err := sample()
		if err != nil {
			return err
		}
		now := time.Now()
		if gap := now.Sub(last).Seconds(); gap > res.LongestGap {
			res.LongestGap = gap
		}
		last = now
		res.Samples++
		final = gs
		if r := readyGroups(gs); r < res.MinReady {
			res.MinReady = r
		}
		for gi, g := range gs {
			if _, ok := firstSeen[gi]; !ok && g.fresh > 0 {
				firstSeen[gi] = now
			}
		}
		done := len(gs) == res.Replicas
		for i := 0; i < res.Replicas && done; i++ {
			g := gs[i]
			done = g != nil && g.pods == res.Size && g.ready == res.Size && g.fresh == res.Size
		}
		if !done {
			doneSince = time.Time{}
		} else if doneSince.IsZero() {
			doneSince = now
		} else if now.Sub(doneSince) >= 2*time.Second {
			res.Completed = true
			break
		}
	}
	if cmdDone != nil {
		// the roll completed before the command returned (the engine does not await custom resources; it may still
		// be writing its state): wait for it, bounded by the box's context
		select {
		case err := <-cmdDone:
			cmdEnded(err)
		case <-ctx.Done():
			d.finding("rollout: the command that sends the change of %s did not end: %v", lws.Key(), ctx.Err())
		}
	}
	idx := keys(func() map[string]bool {
		m := map[string]bool{}
		for gi := range firstSeen {
			m[strconv.Itoa(gi)] = true
		}
		return m
	}())
	sort.Slice(idx, func(i, j int) bool {
		a, _ := strconv.Atoi(idx[i])
		b, _ := strconv.Atoi(idx[j])
		if !firstSeen[a].Equal(firstSeen[b]) {
			return firstSeen[a].Before(firstSeen[b])
		}
		return a > b
	})
	for _, s := range idx {
		gi, _ := strconv.Atoi(s)
		if gi >= res.Replicas {
			s = "surge " + s
		}
		res.ObservedOrder = append(res.ObservedOrder, s)
	}
	var fin []string
	for _, gi := range sortedInts(final) {
		g := final[gi]
		fin = append(fin, fmt.Sprintf("group %d: %d pods, %d ready, %d new", gi, g.pods, g.ready, g.fresh))
	}
	res.Final = strings.Join(fin, "; ")
	d.logf("day two: rollout of %s completed=%v in %.0fs, order %v, fewest ready groups %d (allowed %d), %d samples",
		lws.Key(), res.Completed, time.Since(t0).Seconds(), res.ObservedOrder, res.MinReady, res.AllowedMinReady, res.Samples)
	if !res.Completed {
		var pending []string
		for _, gi := range sortedInts(final) {
			if g := final[gi]; g.ready < res.Size {
				what := "group"
				if gi >= res.Replicas {
					what = "surge group"
				}
				pending = append(pending, fmt.Sprintf("%s %d (%d of %d pods ready)", what, gi, g.ready, res.Size))
			}
		}
		d.finding("rollout: %s did not complete in %s (maxSurge %d, maxUnavailable %d; the pool has %s): %s; %s",
			lws.Key(), limit, res.MaxSurge, res.MaxUnavailable, d.spareText(lws), strings.Join(pending, ", "), res.Final)
	}
	if res.MinReady < res.AllowedMinReady {
		d.finding("rollout: %s had %d ready group(s) at one sample, fewer than its rollout strategy allows (%d of "+
			"%d with maxUnavailable %d)", lws.Key(), res.MinReady, res.AllowedMinReady, res.Replicas, res.MaxUnavailable)
	}
	// the order plan prints: surge groups first, then the old groups from the highest index down
	var old []int
	surgeLast, oldFirst := time.Time{}, time.Time{}
	for _, s := range res.ObservedOrder {
		if strings.HasPrefix(s, "surge ") {
			gi, _ := strconv.Atoi(strings.TrimPrefix(s, "surge "))
			if firstSeen[gi].After(surgeLast) {
				surgeLast = firstSeen[gi]
			}
			continue
		}
		gi, _ := strconv.Atoi(s)
		if oldFirst.IsZero() {
			oldFirst = firstSeen[gi]
		}
		old = append(old, gi)
	}
	inOrder := sort.SliceIsSorted(old, func(i, j int) bool { return old[i] > old[j] })
	if !inOrder || (!surgeLast.IsZero() && !oldFirst.IsZero() && oldFirst.Before(surgeLast)) {
		d.finding("rollout: %s rolled its groups in order %v where plan prints %v: %s", lws.Key(), res.ObservedOrder,
			res.PredictedOrder, res.Predicted)
	}
	return nil
}

func sortedInts[V any](m map[int]V) []int {
	var out []int
	for k := range m {
		out = append(out, k)
	}
	sort.Ints(out)
	return out
}

func (d *dayTwo) spareText(lws *Object) string {
	pool := d.pool[lws.U.GetLabels()["multinode.dev/workload"]]
	size, _ := intField(lws.U.Object, "spec", "leaderWorkerTemplate", "size")
	if s, ok := d.spareOf(pool); ok {
		return fmt.Sprintf("%d spare node(s) in pool %s at peak, a group takes %d", s, pool, size)
	}
	return "no spare count in upgrades.json"
}
