"""realnode_check.py on hand-made observations (no Go, no box): each finding planted, and the agreeing case."""
from __future__ import annotations

import copy
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from realnode_check import real_node_findings, select_real_nodes  # noqa: E402

NETNS = {"inode": "net:[1]", "hostInode": "net:[2]", "links": [{"ifname": "lo", "kind": "loopback"}],
         "routes": [], "defaultRoute": False, "outside": []}
NETNS_END = {"inode": "net:[1]", "hostInode": "net:[2]",
             "links": [{"ifname": "lo"}, {"ifname": "boxnodes"}, {"ifname": "boxbr1"}, {"ifname": "veth1234"}],
             "routes": [{"dst": "10.245.1.0/24", "dev": "boxbr1"}], "defaultRoute": False, "outside": []}


def _pod(name: str, node: str = "gpu-0", **over: Any) -> dict[str, Any]:
    spec = {"initContainers": [{"name": "preflight", "env": []}],
            "containers": [{"name": "main", "env": [
                {"name": "A", "value": "x"},
                {"name": "B", "value": "$(A)-y"},
                {"name": "LIT", "value": "$$(A)"},
                {"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}]}]}
    status = {"phase": "Running",
              "initContainerStatuses": [{"name": "preflight",
                                         "state": {"terminated": {"exitCode": 0, "reason": "Completed"}}}],
              "containerStatuses": [{"name": "main", "state": {"running": {}}}]}
    env = {"main": {"A": "x", "B": "x-y", "LIT": "$(A)", "POD_IP": "10.245.1.2"}}
    p = {"namespace": "multinode", "name": name, "node": node, "owner": "Job multinode/j",
         "pod": {"spec": spec, "status": status}, "env": env}
    for k, v in over.items():
        p[k] = v
    return p


def _obs(pods: list[dict[str, Any]]) -> dict[str, Any]:
    return {"netns": copy.deepcopy(NETNS), "netnsEnd": copy.deepcopy(NETNS_END),
            "realNodes": [{"name": "gpu-0", "ready": True}, {"name": "gpu-1", "ready": True}],
            "phases": [{"name": "services", "pods": pods}]}


def test_agreeing_case_passes():
    findings, report = real_node_findings(_obs([_pod("a"), _pod("b", "gpu-1"), _pod("fake", "cpu-0")]))
    assert findings == []
    assert [p["pod"] for p in report["pods"]] == ["multinode/a", "multinode/b"]   # cpu-0 is a fake node's
    assert all(p["verdict"] == "ok" and p["containersEnvRead"] == 1 for p in report["pods"])


def test_default_route_in_the_namespace():
    obs = _obs([_pod("a")])
    obs["netns"]["defaultRoute"] = True
    obs["netns"]["routes"] = [{"dst": "default", "dev": "eth0"}]
    obs["netns"]["links"].append({"ifname": "eth0"})
    findings, _ = real_node_findings(obs)
    assert len(findings) == 1 and "only the loopback may be there" in findings[0] and "eth0" in findings[0]


def test_interface_not_of_the_box_at_the_end():
    obs = _obs([_pod("a")])
    obs["netnsEnd"]["outside"] = ["link eth0 (veth)", "default route via eth0"]
    findings, _ = real_node_findings(obs)
    assert findings == ["network namespace: link eth0 (veth) (not the loopback or an interface of the box)",
                        "network namespace: default route via eth0 (not the loopback or an interface of the box)"]


def test_preflight_init_container_exits_1():
    p = _pod("a")
    p["pod"]["status"]["phase"] = "Pending"
    p["pod"]["status"]["initContainerStatuses"][0]["state"] = {"terminated": {"exitCode": 1, "reason": "Error"}}
    p["pod"]["status"]["containerStatuses"][0]["state"] = {"waiting": {"reason": "PodInitializing"}}
    p["env"] = {}
    findings, report = real_node_findings(_obs([p]))
    assert findings == ["pod multinode/a on real node gpu-0 (phase services): init container preflight: "
                        "terminated:1: Error"]
    assert report["pods"][0]["verdict"] == "failed"


def _cri(lines: list[str]) -> list[str]:
    return [f"2026-11-29T03:00:{i:02d}.000000000Z stdout F {m}" for i, m in enumerate(lines)]


def test_failing_container_finding_carries_its_last_lines_and_whole_log():
    # existing-dev's NCCL check: its launcher exited 2; what mpirun said was 20 lines above the end, past the 15
    # lines kept then: the finding carries the last 60 of the 80 kept, and the copy of the whole log
    p = _pod("nccl-check-master-0")
    p["pod"]["status"]["phase"] = "Failed"
    p["pod"]["status"]["containerStatuses"][0]["state"] = {"terminated": {"exitCode": 2, "reason": "Error"}}
    p["env"] = {}
    said = [f"line {i}" for i in range(80)]
    said[60] = "ORTE was unable to reliably start one or more daemons."
    p["logs"] = {"main": _cri(said)}
    p["logFiles"] = {"main": "build/existing-dev/pod-logs/multinode_nccl-check-master-0_u1/main/0.log"}
    findings, report = real_node_findings(_obs([p]))
    assert len(findings) == 1
    f = findings[0]
    assert f.startswith("pod multinode/nccl-check-master-0 on real node gpu-0 (phase services): container main: "
                        "terminated:2: Error; its last 60 lines: line 20 | ")
    assert "ORTE was unable to reliably start one or more daemons. | line 61" in f
    assert "line 19 |" not in f and f.count(" | ") == 59
    assert f.endswith("| line 79; its whole log: "
                      "build/existing-dev/pod-logs/multinode_nccl-check-master-0_u1/main/0.log")
    assert report["pods"][0]["logFiles"] == p["logFiles"]
    # a container that is fine carries no lines; one that failed with an empty log says so
    p["logs"] = {"main": []}
    p["logFiles"] = {}
    findings, _ = real_node_findings(_obs([p]))
    assert findings[0].endswith("container main: terminated:2: Error; its log is empty")


VERDICT = {"version": 1, "pass": False, "status": "error", "busbw_GBps": None, "exit_code": 2,
           "reason": "nccl-tests did not produce a result (mpirun exit 0)"}


def _nccl_master(written: bool) -> dict[str, Any]:
    import json
    p = _pod("nccl-check-master-0")
    p["pod"]["metadata"] = {"labels": {"multinode.dev/workload": "nccl-check"}}
    p["logs"] = {"main": _cri(["mpirun ...", "MULTINODE_NCCL_VERDICT " + json.dumps(VERDICT)]
                              + ([] if written else ["urllib.error.URLError: <urlopen error [Errno 101] Network is "
                                                     "unreachable>", "warning: verdict ConfigMap nccl-check-verdict "
                                                     "not written"]))}
    return p


def _verdict_cm(data: dict[str, str]) -> dict[str, Any]:
    return {"namespace": "multinode", "name": "nccl-check-verdict",
            "labels": {"multinode.dev/workload": "nccl-check"}, "data": data}


def test_nccl_verdict_written_to_its_configmap(tmp_path):
    import json
    obs = _obs([_nccl_master(True)])
    obs["configMaps"] = [_verdict_cm({"verdict.json": json.dumps(VERDICT), "status": "error"})]
    findings, report = real_node_findings(obs)
    assert findings == []
    assert report["verdictConfigMaps"] == [{"pod": "multinode/nccl-check-master-0",
                                            "configMap": "multinode/nccl-check-verdict", "status": "error",
                                            "printed": "error", "written": True}]
    # the verdict printed after the phase's snapshot (its workers deleted with the phase) is read from the copy
    # of the whole log; a ConfigMap left "pending" is then a finding
    p = _pod("nccl-check-master-0")
    p["pod"]["metadata"] = {"labels": {"multinode.dev/workload": "nccl-check"}}
    p["logs"] = {"main": _cri(["all_reduce_perf: the ranks stay up 120s"])}
    whole = tmp_path / "0.log"
    whole.write_text("\n".join(_cri(["all_reduce_perf: the ranks stay up 120s", "ORTE has lost communication",
                                     "MULTINODE_NCCL_VERDICT " + json.dumps(VERDICT)])) + "\n")
    p["logFiles"] = {"main": str(whole)}
    obs = _obs([p])
    obs["configMaps"] = [_verdict_cm({"verdict.json": json.dumps(VERDICT), "status": "error"})]
    assert real_node_findings(obs)[0] == []
    obs["configMaps"] = [_verdict_cm({"verdict.json": "", "status": "pending"})]
    findings, _ = real_node_findings(obs)
    assert len(findings) == 1 and "does not hold the verdict it printed" in findings[0]
    # without the copy, the snapshot's lines hold no verdict: nothing to check
    p["logFiles"] = {}
    assert real_node_findings(obs)[0] == []


def test_nccl_verdict_not_written_to_its_configmap():
    # existing-dev's fourth pass: `kubernetes.default.svc` unreachable from the pod, the ConfigMap kept its
    # rendered "pending"
    obs = _obs([_nccl_master(False)])
    obs["configMaps"] = [_verdict_cm({"verdict.json": "", "status": "pending"})]
    findings, report = real_node_findings(obs)
    assert len(findings) == 1
    assert findings[0].startswith("pod multinode/nccl-check-master-0 container main (workload nccl-check): its "
                                  "verdict ConfigMap multinode/nccl-check-verdict does not hold the verdict it "
                                  "printed (status 'pending', verdict.json ''; printed status 'error')")
    assert "Network is unreachable" in findings[0]
    assert report["verdictConfigMaps"][0]["written"] is False
    obs["configMaps"] = []
    findings, _ = real_node_findings(obs)
    assert findings == ["pod multinode/nccl-check-master-0 container main (workload nccl-check): printed its NCCL "
                        "verdict, but no ConfigMap of its workload with a verdict.json key is in the box"]


def test_pod_deleted_by_its_controller_during_the_phase_is_reported_not_judged():
    # volcano-llm-training: the master's end completed the Volcano Job, which deleted a worker still running
    p = _pod("llama-pretrain-worker-0", "gpu-1")
    p["gone"] = "deleted during the phase (by its controller); as last seen before its deletion began"
    p["pod"]["status"]["containerStatuses"][0]["state"] = {"waiting": {"reason": "ContainerCreating"}}
    p["env"] = {}
    p["logFiles"] = {"main": "build/s/pod-logs/multinode_llama-pretrain-worker-0_u/main/0.log"}
    findings, report = real_node_findings(_obs([_pod("a"), p]))
    assert findings == []
    gone = [r for r in report["pods"] if r["pod"] == "multinode/llama-pretrain-worker-0"]
    assert gone == [{"pod": "multinode/llama-pretrain-worker-0", "node": "gpu-1", "phase": "services",
                     "podPhase": "Running", "gone": p["gone"], "problems": [], "verdict": "gone",
                     "logFiles": p["logFiles"]}]
    del p["gone"]   # the same view, not gone: judged
    assert real_node_findings(_obs([p]))[0] != []


def test_env_referring_to_an_undefined_variable():
    p = _pod("a")
    p["pod"]["spec"]["containers"][0]["env"].append({"name": "ADDR", "value": "$(UNDEFINED_HOST):29500"})
    p["env"]["main"]["ADDR"] = "$(UNDEFINED_HOST):29500"
    findings, _ = real_node_findings(_obs([p]))
    assert len(findings) == 1
    assert "env ADDR='$(UNDEFINED_HOST):29500': $(UNDEFINED_HOST) left unexpanded" in findings[0]


def test_env_var_missing_from_the_process():
    p = _pod("a")
    del p["env"]["main"]["POD_IP"]
    findings, _ = real_node_findings(_obs([p]))
    assert findings == ["pod multinode/a on real node gpu-0 (phase services): container main: env POD_IP: not in "
                        "the process's environment (downward API status.podIP)"]


def test_container_that_cannot_start():
    p = _pod("a")
    p["pod"]["status"]["containerStatuses"][0]["state"] = {
        "waiting": {"reason": "CreateContainerConfigError", "message": "secret \"x\" not found"}}
    p["env"] = {}
    findings, _ = real_node_findings(_obs([p]))
    assert findings == ["pod multinode/a on real node gpu-0 (phase services): container main: "
                        "waiting:CreateContainerConfigError: secret \"x\" not found"]


def test_real_node_not_ready_and_no_pods():
    obs = _obs([_pod("fake", "cpu-0")])
    obs["realNodes"][1] = {"name": "gpu-1", "ready": False, "error": "kubelet exited: exit status 1"}
    findings, _ = real_node_findings(obs)
    assert findings == ["real node gpu-1: kubelet exited: exit status 1",
                        "real nodes ['gpu-0', 'gpu-1']: no pod was placed on them"]


def test_completed_job_pod_passes():
    p = _pod("a")
    p["pod"]["status"]["phase"] = "Succeeded"
    p["pod"]["status"]["containerStatuses"][0]["state"] = {"terminated": {"exitCode": 0, "reason": "Completed"}}
    p["env"] = {}
    assert real_node_findings(_obs([p]))[0] == []


def test_select_whole_pools():
    def node(name: str, pool: str) -> dict[str, Any]:
        return {"metadata": {"name": name, "annotations": {"box.multinode.dev/pool": pool}}}
    nodes = [node("cpu-0", "cpu"), node("gpu-0", "gpu"), node("gpu-1", "gpu"), node("gpu-2", "gpu"),
             node("sys-0", "sys")]
    assert select_real_nodes(nodes, 4) == ["cpu-0", "gpu-0", "gpu-1", "gpu-2"]
    assert select_real_nodes(nodes, 2) == ["cpu-0", "sys-0"]
    assert select_real_nodes(nodes, 0) == []


def test_command_line_reference_left_unexpanded():
    p = _pod("a")
    p["pod"]["spec"]["containers"][0]["args"] = ["torchrun --node_rank=$(JOB_COMPLETION_INDEX) train.py"]
    p["cmdline"] = {"main": ["/bin/bash", "-c", "torchrun --node_rank=$(JOB_COMPLETION_INDEX) train.py"]}
    findings, _ = real_node_findings(_obs([p]))
    assert findings == ["pod multinode/a on real node gpu-0 (phase services): container main: command line: "
                        "$(JOB_COMPLETION_INDEX) left unexpanded (no env var JOB_COMPLETION_INDEX in the "
                        "container's spec)"]
    p["cmdline"] = {"main": ["/bin/bash", "-c", "torchrun --node_rank=3 train.py"]}   # expanded: passes
    assert real_node_findings(_obs([p]))[0] == []


# names resolved from inside the pod (names.go): the agreeing case and each planted way to fail
_LEADER = {"name": "lws-0.lws", "from": "container main env LWS_LEADER_ADDRESS", "container": "main",
           "resolved": ["10.245.1.5"], "target": "pod multinode/lws-0 (hostname lws-0, subdomain lws)",
           "expect": ["10.245.1.5"]}
_SVC = {"name": "api", "from": "Service multinode/api", "container": "main", "resolved": ["10.0.0.20"],
        "target": "Service multinode/api (ClusterIP)", "expect": ["10.0.0.20"]}


def test_names_that_resolve_to_what_they_name_pass():
    idle = {"name": "idle", "from": "Service multinode/idle", "container": "main", "resolved": [],
            "error": "getent ahostsv4 idle: exit status 2",
            "target": "Service multinode/idle (headless: its endpoints)", "expect": []}
    findings, report = real_node_findings(_obs([_pod("a", names=[_LEADER, _SVC, idle])]))
    assert findings == [] and report["pods"][0]["namesResolved"] == 3


def test_leader_address_taken_by_a_client_service():
    leader = dict(_LEADER, resolved=[], error="getent ahostsv4 lws-0.lws: exit status 2",
                  hint="Service multinode/lws (not headless, clusterIP 10.96.0.9, selector map[role:client], owners "
                       "none) has the subdomain's name but no endpoint with hostname lws-0 (...): CoreDNS has no "
                       "record for lws-0.lws")
    findings, _ = real_node_findings(_obs([_pod("a", names=[leader, _SVC])]))
    assert len(findings) == 1, findings
    assert "name 'lws-0.lws' (container main env LWS_LEADER_ADDRESS) does not resolve from inside the pod" \
        in findings[0]
    assert "Service multinode/lws (not headless" in findings[0]
    assert "no endpoint with hostname lws-0" in findings[0]


def test_name_resolving_to_another_address():
    findings, _ = real_node_findings(_obs([_pod("a", names=[dict(_SVC, resolved=["10.0.0.99"])])]))
    assert len(findings) == 1 and "resolves to ['10.0.0.99'], not to Service multinode/api (ClusterIP)" in findings[0]


def test_name_that_names_nothing_of_the_box():
    typo = {"name": "trainer-0.trainr", "from": "container main command line --rdzv_endpoint", "container": "main",
            "resolved": [], "error": "getent ahostsv4 trainer-0.trainr: exit status 2", "expect": []}
    findings, _ = real_node_findings(_obs([_pod("a", names=[typo])]))
    assert len(findings) == 1 and "it names no Service or pod of the box" in findings[0]


def _probed(listening: list[int] | None) -> dict[str, Any]:
    p = _pod("a", listening=listening)
    main = p["pod"]["spec"]["containers"][0]
    main["ports"] = [{"name": "http", "containerPort": 8000}]
    main["readinessProbe"] = {"httpGet": {"path": "/health", "port": "http"}}
    main["livenessProbe"] = {"tcpSocket": {"port": 8001}}
    return p


def test_probes_on_ports_that_listen_pass():
    findings, _ = real_node_findings(_obs([_probed([8000, 8001])]))
    assert findings == []


def test_probe_on_a_port_nobody_listens_on():
    findings, _ = real_node_findings(_obs([_probed([8000])]))
    assert len(findings) == 1, findings
    assert "container main: livenessProbe tcpSocket on port 8001: nothing listens on it in the pod " \
        "(listening: [8000])" in findings[0]


def test_probe_naming_an_undeclared_port_and_unread_ports():
    p = _probed([8000, 8001])
    p["pod"]["spec"]["containers"][0]["readinessProbe"]["httpGet"]["port"] = "metrics"
    findings, _ = real_node_findings(_obs([p]))
    assert len(findings) == 1 and "names port 'metrics', which the container does not declare" in findings[0]
    assert real_node_findings(_obs([_probed(None)]))[0] == []    # ports not read (no running process): no judgement


# a hostNetwork pod with dnsPolicy ClusterFirst gets its node's resolv.conf (oci-dev's rdma-cni DaemonSet in
# kube-system): the box's lookup of every Service of its namespace is not held against it, a name it carries is
_KUBE_DNS = {"name": "kube-dns", "from": "Service kube-system/kube-dns", "container": "main", "resolved": [],
             "error": "getent ahostsv4 kube-dns: exit status 2", "target": "Service kube-system/kube-dns (ClusterIP)",
             "expect": ["10.96.0.10"]}


def _host_network(policy: str | None, names: list[dict[str, Any]]) -> dict[str, Any]:
    p = _pod("rdma-cni-x", namespace="kube-system", names=names)
    p["pod"]["spec"]["hostNetwork"] = True
    if policy:
        p["pod"]["spec"]["dnsPolicy"] = policy
    return p


def test_host_network_pod_is_not_held_to_its_namespaces_services():
    findings, report = real_node_findings(_obs([_host_network(None, [_KUBE_DNS])]))
    assert findings == []
    assert report["pods"][0]["namesResolved"] == 0
    assert any("1 lookups of their namespace's Services from pods on their node's DNS" in n
               for n in report["notChecked"])
    assert real_node_findings(_obs([_host_network("Default", [_KUBE_DNS])]))[0] == []


def test_host_network_pod_on_the_cluster_dns_or_naming_a_cluster_host_is():
    findings, _ = real_node_findings(_obs([_host_network("ClusterFirstWithHostNet", [_KUBE_DNS])]))
    assert len(findings) == 1 and "name 'kube-dns' (Service kube-system/kube-dns) does not resolve" in findings[0]
    leader = dict(_LEADER, resolved=[], error="getent ahostsv4 lws-0.lws: exit status 2")
    findings, _ = real_node_findings(_obs([_host_network(None, [leader, _KUBE_DNS])]))
    assert len(findings) == 1, findings
    assert "name 'lws-0.lws' (container main env LWS_LEADER_ADDRESS) does not resolve" in findings[0]
    assert "needs dnsPolicy ClusterFirstWithHostNet" in findings[0]


def test_no_pod_on_real_nodes_when_no_workload_can_run():
    """compare.py passes why when every workload is of a kind the box does not run (dynamo-dev's Dynamo graph)."""
    findings, report = real_node_findings(_obs([_pod("fake", "cpu-0")]), "every workload ... (DynamoGraphDeployment x)")
    assert findings == []
    assert "real nodes ['gpu-0', 'gpu-1']: no pod was placed on them: every workload ... (DynamoGraphDeployment x)" \
        in report["notChecked"]


def test_container_completed_in_a_pod_not_yet_succeeded():
    """Exit 0 under restartPolicy Never is final: aws-dev's Volcano Job worker was read Running (or being deleted by
    Volcano once the job completed) with its trainer terminated 0. Under restartPolicy Always it is a finding (the
    kubelet restarts a server that exited)."""
    p = _pod("a")
    p["pod"]["status"]["phase"] = "Running"
    p["pod"]["spec"]["restartPolicy"] = "Never"
    p["pod"]["status"]["containerStatuses"][0]["state"] = {"terminated": {"exitCode": 0, "reason": "Completed"}}
    p["env"] = {}
    assert real_node_findings(_obs([p]))[0] == []
    p["pod"]["spec"]["restartPolicy"] = "Always"
    findings = real_node_findings(_obs([p]))[0]
    assert len(findings) == 1 and "terminated:0" in findings[0], findings


_GIB = 1 << 30


def _tmpfs(peak_gib: float, size_gib: int = 8) -> dict[str, Any]:
    return {"path": "/tmp/multinode-box-1/try1/nodes", "sizeBytes": size_gib * _GIB,
            "why": "1 GiB + 2 GiB x 8 real nodes", "memAvailableBytes": 19 * _GIB,
            "peakUsedBytes": int(peak_gib * _GIB), "endUsedBytes": int(peak_gib * _GIB)}


def test_nodes_tmpfs_that_filled_up():
    """existing-dev (8 real nodes, 2026-11-28): the nodes' 8 GiB tmpfs filled and the preflight's image could not be
    unpacked; the finding names the tmpfs and the pods, as an error of the box."""
    p = _pod("train-indexed-0-6fk2z")
    p["pod"]["status"]["phase"] = "Pending"
    p["pod"]["status"]["initContainerStatuses"][0]["state"] = {"waiting": {
        "reason": "ImagePullBackOff", "message": 'Back-off pulling image "x": ErrImagePull: failed to pull and unpack '
        "image: failed to extract layer sha256:f465: write /tmp/multinode-box-1/try1/nodes/gpu-5/containerd/root/x: "
        "no space left on device: unknown"}}
    p["pod"]["status"]["containerStatuses"][0]["state"] = {"waiting": {"reason": "PodInitializing"}}
    p["env"] = {}
    obs = _obs([p])
    obs["nodesTmpfs"] = _tmpfs(7.99)
    findings, report = real_node_findings(obs)
    assert len(findings) == 2, findings
    assert findings[0].startswith("pod multinode/train-indexed-0-6fk2z on real node gpu-0 (phase services): init "
                                  "container preflight: waiting:ImagePullBackOff")
    assert findings[1].startswith("the real nodes' tmpfs /tmp/multinode-box-1/try1/nodes filled up: 8.0 GiB of its "
                                  "8.0 GiB in use at the most")
    assert "pods that could not start for want of space on it: ['multinode/train-indexed-0-6fk2z']" in findings[1]
    assert "--nodes-tmpfs-gib" in findings[1]
    assert report["nodesTmpfs"]["sizeBytes"] == 8 * _GIB
    # the peak alone (a pull's partial layer removed before any pod's status said why)
    obs = _obs([_pod("a")])
    obs["nodesTmpfs"] = _tmpfs(7.97)
    findings, _ = real_node_findings(obs)
    assert len(findings) == 1 and "filled up: 8.0 GiB of its 8.0 GiB" in findings[0]
    assert "want of space" not in findings[0]
    # the message alone, the peak missed between two reads
    obs = _obs([p])
    obs["nodesTmpfs"] = _tmpfs(3)
    findings, _ = real_node_findings(obs)
    assert len(findings) == 2 and "3.0 GiB of its 8.0 GiB" in findings[1]


def test_nodes_tmpfs_with_room_passes():
    obs = _obs([_pod("a"), _pod("b", "gpu-1")])
    obs["nodesTmpfs"] = _tmpfs(9.6, 17)
    findings, report = real_node_findings(obs)
    assert findings == [] and report["nodesTmpfs"]["peakUsedBytes"] == int(9.6 * _GIB)
