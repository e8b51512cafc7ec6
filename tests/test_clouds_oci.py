"""cloud oci under mocks: cluster network + instance configuration, RDMA VFs, labels/taints, FSS, refusals."""
from __future__ import annotations

import base64
import copy
import subprocess

import pytest

from components.clouds.base import pool_outputs
from multinode import checks, fabric, pools
from multinode.clouds import oci as mock
from multinode.clouds import oci as oke
from multinode.manifests import addons
from multinode.schema_check import validate_object

from .cloudrun import one, refused, run
from .conftest import example_raw

ICONF = "oci:Core/instanceConfiguration:InstanceConfiguration"
CNET = "oci:Core/clusterNetwork:ClusterNetwork"
FS = "oci:FileStorage/fileSystem:FileSystem"
MT = "oci:FileStorage/mountTarget:MountTarget"
EXPORT = "oci:FileStorage/export:Export"
PV = "kubernetes:core/v1:PersistentVolume"
PVC = "kubernetes:core/v1:PersistentVolumeClaim"


def _raw(machine=None, **storage):
    raw, secrets = example_raw("oci-dev")
    if machine:
        raw["nodePools"][0]["machine"] = machine
    if storage:
        raw["storage"] = dict(raw["storage"], **storage)
    return raw, secrets


@pytest.fixture(scope="module")
def h100():
    raw, secrets = _raw()
    return run(raw, secrets, "oci-dev")


def test_bare_metal_gpu_nodes_in_an_rdma_cluster_network(h100):
    ic = one(h100, ICONF)
    launch = ic.inputs["instanceDetails"]["launchDetails"]
    assert ic.inputs["instanceDetails"]["instanceType"] == "compute"
    assert launch["shape"] == "BM.GPU.H100.8"
    assert launch["sourceDetails"] == {"sourceType": "image", "imageId": "ocid1.image.oc1.iad.aaaaaaaaexamplegpuimage",
                                       "bootVolumeSizeInGbs": "500"}
    assert launch["createVnicDetails"] == {"subnetId": "ocid1.subnet.oc1.iad.aaaaaaaaexampleworkersubnet",
                                           "assignPublicIp": False}
    assert launch["availabilityDomain"] == "Uocm:US-ASHBURN-AD-1"
    plugins = {p["name"]: p["desiredState"] for p in launch["agentConfig"]["pluginsConfigs"]}
    assert plugins == {n: "ENABLED" for n in oke.RDMA_PLUGINS}
    assert launch["agentConfig"]["areAllPluginsDisabled"] is False
    assert launch["metadata"]["user_data"] == "[secret]"     # carries the cluster CA: kept secret
    assert "capacityReservationId" not in launch
    cn = one(h100, CNET)
    pool = cn.inputs["instancePools"]
    assert len(pool) == 1 and pool[0]["size"] == 2 and pool[0]["instanceConfigurationId"] == f"{ic.name}-id"
    assert ic.urn in cn.dependencies
    assert cn.inputs["placementConfiguration"] == {
        "availabilityDomain": "Uocm:US-ASHBURN-AD-1",
        "primaryVnicSubnets": {"subnetId": "ocid1.subnet.oc1.iad.aaaaaaaaexampleworkersubnet"}}
    parents = {r.urn: r for r in h100.registrations}
    assert parents[cn.parent].type == parents[ic.parent].type == "multinode:index:GpuNodePool"


def test_node_bootstrap_joins_oke_with_our_labels_and_taints():
    cfg = checks.load(*example_raw("oci-dev"))
    pool = cfg.node_pools[0]
    labels = pools.node_labels(cfg, pool, cfg.machine(pool))
    kc = mock.kube_config({"clusterId": cfg.cluster.cluster_id})["content"]
    script = oke.node_user_data(mock.PRIVATE_ENDPOINT, oke.ca_from_kubeconfig(kc), labels, pools.node_taints(cfg),
                                path="oke-install")
    assert "bash /etc/oke/oke-install.sh" in script
    assert "--apiserver-endpoint 10.0.0.5 " in script          # IP only: oke-install adds the ports
    assert f"--kubelet-ca-cert {mock.FAKE_CA}" in script
    assert "multinode.dev/node-pool=gpu" in script and "multinode.dev/fabric=roce" in script
    assert "--register-with-taints=nvidia.com/gpu=true:NoSchedule" in script
    assert base64.b64decode(oke.user_data_b64(script)).decode() == script


def _bash_syntax_ok(script: str) -> None:
    r = subprocess.run(["bash", "-n"], input=script, text=True, capture_output=True)
    assert r.returncode == 0, r.stderr


def test_default_bootstrap_is_the_oke_package_of_the_ubuntu_doca_images():
    """oci-hpc-oke's RDMA GPU images are Ubuntu + DOCA-OFED and join with oci-oke-node-all and `oke bootstrap`
    retried (files/oke-ubuntu-cloud-init.sh); that is the default path."""
    cfg = checks.load(*example_raw("oci-dev"))
    pool = cfg.node_pools[0]
    assert pool.bootstrap is None and oke.bootstrap_path(pool) == "oke-package"
    labels = pools.node_labels(cfg, pool, cfg.machine(pool))
    kc = mock.kube_config({"clusterId": cfg.cluster.cluster_id})["content"]
    script = oke.node_user_data(mock.PRIVATE_ENDPOINT, oke.ca_from_kubeconfig(kc), labels, pools.node_taints(cfg),
                                kubernetes_version="v1.33.1")
    assert "oke-install.sh" not in script
    assert "printf '%s' 10.0.0.5 > /etc/oke/oke-apiserver" in script                # IP only, as upstream writes it
    assert f"printf '%s' {mock.FAKE_CA} | base64 --decode > /etc/kubernetes/ca.crt" in script
    assert "apt-get -y install oci-oke-node-all-1.33.1" in script
    assert "/ubuntu-$VERSION_CODENAME/kubernetes-1.33" in script
    assert "if ! command -v oke" in script                                   # images that carry `oke` skip it
    assert "for attempt in $(seq 1 20)" in script and "sleep 15" in script
    line = next(ln for ln in script.splitlines() if "oke bootstrap --kubelet-extra-args" in ln)
    assert "multinode.dev/node-pool=gpu" in line and "--register-with-taints=nvidia.com/gpu=true:NoSchedule" in line
    assert '"memlock=-1:-1"' in script and "ManageForeignRoutes=no" in script
    assert script.rstrip().endswith("exit 1")                                 # all attempts failed: cloud-init fails
    _bash_syntax_ok(script)
    with pytest.raises(ValueError, match="vMAJOR.MINOR.PATCH"):
        oke.node_user_data("10.0.0.5", "Y2E=", labels, [], kubernetes_version="")


@pytest.mark.parametrize("path", ["oke-package", "oke-install"])
def test_bootstrap_path_is_rendered_into_the_instance_configuration(path, monkeypatch):
    """The component renders the pool's path with the cluster lookup's version (the recorded user_data is
    "[secret]", so the script is captured where the component builds it)."""
    raw, secrets = _raw()
    raw["nodePools"][0]["bootstrap"] = path
    rendered = []
    real = oke.node_user_data

    def capture(*a, **kw):
        rendered.append(real(*a, **kw))
        return rendered[-1]
    monkeypatch.setattr(oke, "node_user_data", capture)
    r = run(raw, secrets, "oci-dev")
    assert one(r, ICONF).inputs["instanceDetails"]["launchDetails"]["metadata"]["user_data"] == "[secret]"
    (script,) = rendered
    assert ("oke bootstrap" in script) == (path == "oke-package")
    assert ("/etc/oke/oke-install.sh" in script) == (path == "oke-install")
    if path == "oke-package":
        assert "oci-oke-node-all-1.33.1" in script          # the cluster lookup's kubernetesVersion (mock v1.33.1)
    _bash_syntax_ok(script)


def test_unknown_bootstrap_path_is_a_config_error():
    raw, secrets = _raw()
    raw["nodePools"][0]["bootstrap"] = "cloud-init"
    with pytest.raises(Exception) as e:
        checks.load(raw, secrets)
    assert "nodePools[0].bootstrap" in str(e.value)


@pytest.mark.parametrize("machine,vfs", [("BM.GPU.H100.8", 16), ("BM.GPU.H200.8", 8), ("BM.GPU.B200.8", 8),
                                         ("BM.GPU.A100-v2.8", 16)])
def test_rdma_vfs_per_node_come_from_the_catalog(machine, vfs):
    raw, secrets = _raw(machine)
    cfg = checks.load(raw, secrets)
    pool = cfg.node_pools[0]
    assert fabric.profile_for(cfg, pool).devices_per_node == vfs   # what the pool exports as rdmaVfsPerNode
    fab = pool_outputs(cfg, pool)["fabric"]
    assert fab["deviceResource"] == "nvidia.com/rdma-vf" and fab["devicesPerNode"] == vfs
    r = run(raw, secrets, "oci-dev")
    assert one(r, ICONF).inputs["instanceDetails"]["launchDetails"]["shape"] == machine


def test_capacity_reservation_is_used_by_the_instances():
    raw, secrets = _raw()
    raw["nodePools"][0]["capacityReservation"] = {"id": "ocid1.capacityreservation.oc1..x", "nodes": 2}
    launch = one(run(raw, secrets, "oci-dev"), ICONF).inputs["instanceDetails"]["launchDetails"]
    assert launch["capacityReservationId"] == "ocid1.capacityreservation.oc1..x"


def test_file_storage_protected_and_mounted_as_a_retained_static_pv(h100):
    fs, mt, ex = one(h100, FS), one(h100, MT), one(h100, EXPORT)
    assert fs.protect and fs.retain_on_delete
    assert mt.retain_on_delete and ex.retain_on_delete
    assert mt.inputs["subnetId"] == "ocid1.subnet.oc1.iad.aaaaaaaaexampleworkersubnet"
    assert ex.inputs["path"] == "/checkpoints" and ex.inputs["fileSystemId"] == f"{fs.name}-id"
    assert ex.inputs["exportSetId"] == f"ocid1.exportset.oc1.iad.{mt.name}"
    pv, pvc = one(h100, PV), one(h100, PVC)
    spec = pv.inputs["spec"]
    assert spec["csi"] == {"driver": "fss.csi.oraclecloud.com",
                           "volumeHandle": f"{fs.name}-id:10.0.10.20:/checkpoints"}
    assert spec["persistentVolumeReclaimPolicy"] == "Retain" and spec["accessModes"] == ["ReadWriteMany"]
    assert pv.protect and pv.retain_on_delete and pvc.protect
    assert ex.urn in pv.dependencies and pv.urn in pvc.dependencies
    assert pvc.inputs["spec"]["volumeName"] == pv.inputs["metadata"]["name"]
    for obj in (pv.inputs, pvc.inputs):
        assert validate_object(obj) == []


def test_allow_delete_lets_destroy_remove_the_file_system():
    raw, secrets = _raw(allowDelete=True)
    r = run(raw, secrets, "oci-dev")
    assert not one(r, FS).protect and not one(r, FS).retain_on_delete
    assert one(r, PV).inputs["spec"]["persistentVolumeReclaimPolicy"] == "Delete"


def test_kubeconfig_is_secret(h100):
    assert one(h100, "pulumi:providers:kubernetes").inputs["kubeconfig"] == "[secret]"


def test_api_host_strips_scheme_and_port():
    assert oke.api_host("10.0.0.5:6443") == "10.0.0.5"
    assert oke.api_host("https://10.0.0.5:6443") == "10.0.0.5"
    assert oke.api_host("10.0.0.5") == "10.0.0.5"


# ---------------------------------------------------------------- refusals
def test_missing_image_and_subnet_are_refused():
    raw, secrets = _raw()
    del raw["nodePools"][0]["imageId"]
    del raw["nodePools"][0]["subnetId"]
    refused(raw, secrets, "nodePools[0].imageId", "set imageId")
    refused(raw, secrets, "nodePools[0].subnetId", "set subnetId")


def test_bad_availability_domain_is_refused():
    raw, secrets = _raw()
    raw["nodePools"][0]["zone"] = "us-ashburn-1a"
    refused(raw, secrets, "nodePools[0].zone", "is not an availability domain name")
    raw["nodePools"][0]["zone"] = "Uocm:US-CHICAGO-1-AD-1"
    refused(raw, secrets, "nodePools[0].zone", "is not in the cluster's region 'us-ashburn-1'")


# Import isolation (no other cloud's SDK): tests/test_plan.py::test_single_cloud_stack_imports_only_its_cloud_sdk


def _script(kubernetes_version: str = "v1.33.1", path: str = "oke-package") -> str:
    cfg = checks.load(*example_raw("oci-dev"))
    pool = cfg.node_pools[0]
    labels = pools.node_labels(cfg, pool, cfg.machine(pool))
    return oke.node_user_data("10.0.0.5", "Y2E=", labels, pools.node_taints(cfg), path=path,
                              kubernetes_version=kubernetes_version)


@pytest.mark.parametrize("path", ["oke-package", "oke-install"])
def test_rdma_netns_is_exclusive_before_the_node_joins(path):
    """issue 30: the rdma CNI of the VF chain fails unless the RDMA subsystem is in exclusive netns mode
    (rdma-cni cmd/rdma/main.go ensureRdmaSystemMode); set at runtime and for boot, before the kubelet starts."""
    script = _script(path=path)
    lines = script.splitlines()
    set_at = next(i for i, ln in enumerate(lines) if "rdma system set netns exclusive" in ln)
    join_at = next(i for i, ln in enumerate(lines) if "oke bootstrap" in ln or "oke-install.sh" in ln)
    assert set_at < join_at
    assert "echo 'options ib_core netns_mode=0' > /etc/modprobe.d/ib_core.conf" in script
    assert "update-initramfs -u" in script
    _bash_syntax_ok(script)


@pytest.mark.parametrize("version,off", [("v1.33.1", False), ("v1.34.0", True), ("v1.35.2", True), ("", False),
                                         ("v2.0.1", True), ("v1.3.40", False)])
def test_crio_short_name_mode_is_relaxed_from_kubernetes_1_34(version, off):
    """issue 30: CRI-O on OKE >= 1.34 refuses short image names unless short_name_mode is disabled
    (oci-hpc-oke files/oke-ubuntu-cloud-init.sh configure_crio_defaults); written before `oke bootstrap`."""
    assert oke.needs_short_name_mode_off(version) is off
    # the oke-install path may not know the version: nothing is written then, as upstream
    script = _script(version, path="oke-install") if not version else _script(version)
    assert ('short_name_mode = "disabled"' in script) is off
    if off:
        lines = script.splitlines()
        conf = lines.index("cat > /etc/crio/crio.conf.d/11-default.conf <<'EOF'")
        assert lines[conf + 1] == "[crio.image]"
        assert conf < next(i for i, ln in enumerate(lines) if "oke bootstrap --kubelet-extra-args" in ln)
    _bash_syntax_ok(script)


def test_oke_package_falls_back_from_the_local_repository_to_both_mirrors(tmp_path):
    """issue 30: upstream lists two mirrors and falls back from the image's local repository to them; run the
    rendered install block with stub apt-get / fuser / oke and a local repository whose install fails."""
    script = _script()
    start = script.index("if ! command -v oke")
    block = script[start:script.index("for attempt in")]
    assert all(r in block for r in oke.OKE_PACKAGE_REPOS) and len(oke.OKE_PACKAGE_REPOS) == 2
    bin_dir, etc = tmp_path / "bin", tmp_path / "etc"
    bin_dir.mkdir()
    (etc / "apt/sources.list.d").mkdir(parents=True)
    local = tmp_path / "opt/oke-node-client-packages/ubuntu-noble/kubernetes-1.33/dists"
    local.mkdir(parents=True)
    log = tmp_path / "log"
    (bin_dir / "fuser").write_text("#!/bin/sh\nexit 1\n")
    # apt-get install fails while the source is the local file:// repository, succeeds with the mirrors
    (bin_dir / "apt-get").write_text(
        f"#!/bin/sh\necho \"apt-get $* :: $(grep URIs {etc}/apt/sources.list.d/oke-node-client.sources)\" >> {log}\n"
        f"case \"$*\" in *install*) grep -q 'URIs: file://' {etc}/apt/sources.list.d/oke-node-client.sources "
        "&& exit 100;; esac\nexit 0\n")
    for f in bin_dir.iterdir():
        f.chmod(0o755)
    (tmp_path / "os-release").write_text("VERSION_CODENAME=noble\n")
    body = (block.replace("/etc/os-release", str(tmp_path / "os-release"))
            .replace("/etc/apt", str(etc / "apt"))
            .replace("/opt/oke-node-client-packages", str(tmp_path / "opt/oke-node-client-packages"))
            .replace("if ! command -v oke >/dev/null 2>&1; then", "if true; then"))
    r = subprocess.run(["bash", "-euo", "pipefail", "-c", body], text=True, capture_output=True,
                       env={"PATH": f"{bin_dir}:/usr/bin:/bin"})
    assert r.returncode == 0, r.stderr
    installs = [ln for ln in log.read_text().splitlines() if " install " in ln]
    assert len(installs) == 2 and "file://" in installs[0]
    assert all(f"{m}/ubuntu-noble/kubernetes-1.33" in installs[1] for m in oke.OKE_PACKAGE_REPOS)


def test_vf_pods_get_their_rdma_devices_from_the_device_plugin_not_the_host():
    """issue 30, decided: no privileged container and no /dev/infiniband hostPath on the VF path (the SR-IOV
    device plugin with isRdma hands the VF's RDMA character devices to the container)."""
    cfg = checks.load(*example_raw("oci-dev"))
    p = fabric.profile_for(cfg, cfg.node_pools[0])
    assert p.capabilities == ["IPC_LOCK"]
    assert not any("hostPath" in v and "infiniband" in str(v) for v in p.volumes)
    nic = addons.nic_cluster_policy(cfg)
    assert '"isRdma": true' in nic["spec"]["sriovDevicePlugin"]["config"]


def test_a_pod_with_part_of_a_node_is_told_its_vfs_are_not_aligned():
    raw, secrets = example_raw("oci-dev")
    cfg = checks.load(raw, secrets)
    assert not [a for a in checks.advisories(cfg) if a.path.endswith("gpusPerNode")]
    raw = copy.deepcopy(raw)
    raw["workloads"][0].update(gpusPerNode=4, nodes=4, tensorParallel=4, pipelineParallel=4)
    raw["nodePools"][0]["nodeCount"] = 4
    (a,) = [a for a in checks.advisories(checks.load(raw, secrets)) if a.path.endswith("gpusPerNode")]
    assert a.path == "workloads[0].gpusPerNode" and "not the ones beside their GPUs" in a.message
