"""Machine catalog: every machine of ../shared/facts/hardware.md, each with its source."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from multinode import catalog

HARDWARE = Path(__file__).resolve().parent.parent.parent / "shared" / "facts" / "hardware.md"

EXPECTED = {
    "aws": ["p4d.24xlarge", "p4de.24xlarge", "p5.48xlarge", "p5e.48xlarge", "p5en.48xlarge", "p6-b200.48xlarge",
            "p6e-gb200.36xlarge", "p6-b300.48xlarge", "g6e.48xlarge", "g5.48xlarge"],
    "azure": ["Standard_ND96asr_v4", "Standard_ND96amsr_A100_v4", "Standard_ND96isr_H100_v5",
              "Standard_ND96isr_H200_v5", "Standard_ND128isr_NDR_GB200_v6"],
    "gcp": ["a2-highgpu-8g", "a2-ultragpu-8g", "a3-highgpu-8g", "a3-megagpu-8g", "a3-ultragpu-8g", "a4-highgpu-8g"],
    "oci": ["BM.GPU4.8", "BM.GPU.A100-v2.8", "BM.GPU.H100.8", "BM.GPU.H200.8", "BM.GPU.B200.8"],
}


@pytest.mark.parametrize("cloud,names", EXPECTED.items())
def test_every_listed_machine_is_in_the_catalog(cloud, names):
    assert sorted(m.name for m in catalog.machines_for(cloud)) == sorted(names)


@pytest.mark.skipif(not HARDWARE.exists(), reason="../shared/facts not beside the clone")
def test_catalog_matches_the_facts_table():
    """Each machine-table row of hardware.md: GPUs and fabric NIC counts agree with the catalog."""
    rows = [ln for ln in HARDWARE.read_text().splitlines() if re.match(r"\| (AWS|Azure|OCI) \|", ln)]
    assert len(rows) >= 20
    for row in rows:
        cells = [c.strip() for c in row.strip("|").split("|")]
        m = catalog.lookup(cells[1])
        assert m.gpus == int(cells[3]), row
        nics = re.match(r"\d+", cells[6])
        if nics and cells[1] != "p6e-gb200.36xlarge":  # p6e: the pod requests 4 of 17 interfaces
            assert m.fabric_nics == int(nics.group()), row


def test_every_entry_cites_a_known_source():
    for m in catalog.MACHINES.values():
        keys = [k.strip() for k in m.source.split(",")]
        assert keys and all(k in catalog.SOURCES for k in keys), m.name
        assert all(s.startswith(("docs.", "cloud.", "Microsoft", "Google", "oracle", "ai2", "aws", "meta"))
                   for s in m.sources), m.name


def test_unconfirmed_values_are_marked_not_guessed():
    b200 = catalog.lookup("BM.GPU.B200.8")
    assert b200.gpu_memory_gb is None and "gpu_memory_gb" in b200.unconfirmed
    for name in ("BM.GPU.H100.8", "BM.GPU4.8"):
        assert catalog.lookup(name).bandwidth_gbps is None
    assert "bandwidth_gbps" in catalog.lookup("a3-megagpu-8g").unconfirmed
    for m in catalog.MACHINES.values():
        for f in m.unconfirmed:
            assert hasattr(m, f), (m.name, f)


def test_devices_per_gpu_and_share():
    p5, p4d = catalog.lookup("p5.48xlarge"), catalog.lookup("p4d.24xlarge")
    assert p5.devices_per_gpu == 4 and p5.devices_for(8) == 32 and p5.devices_for(1) == 4
    assert float(p4d.devices_per_gpu) == 0.5 and p4d.devices_for(8) == 4 and p4d.devices_for(1) == 1
    assert catalog.lookup("a2-highgpu-8g").devices_per_gpu is None


def test_unknown_machine_suggests_closest_names():
    with pytest.raises(catalog.UnknownMachine) as info:
        catalog.lookup("p5.48xl", "aws")
    assert "p5.48xlarge" in info.value.suggestions
    assert "did you mean" in str(info.value)
    with pytest.raises(catalog.UnknownMachine) as info:
        catalog.lookup("ND96isr_H100", "azure")
    assert "Standard_ND96isr_H100_v5" in info.value.suggestions


# ---- node resources (vcpus, memory_gib, local_nvme_gb): issue 14 ----
NODE_FIELDS = ("vcpus", "memory_gib", "local_nvme_gb")


@pytest.mark.parametrize("m", catalog._MACHINES, ids=lambda m: m.name)
def test_node_resources_are_sourced_or_marked_unconfirmed(m):
    for f in NODE_FIELDS:
        value = getattr(m, f)
        if value is None:
            assert f in m.unconfirmed, f"{m.name}.{f} is None but not listed in unconfirmed"
        else:
            assert f not in m.unconfirmed and value > 0
    if any(getattr(m, f) is not None for f in NODE_FIELDS):
        keys = {k.strip() for k in m.source.split(",")}
        assert keys & {"A11", "Z5", "G4", "O3"}, f"{m.name}: node resources without their source key"


@pytest.mark.parametrize("name,vcpus,mem,nvme", [
    ("p5.48xlarge", 192, 2048, 30400),            # A11: 8 x 3800 GB NVMe SSD
    ("p4d.24xlarge", 96, 1152, 8000),
    ("p6e-gb200.36xlarge", 144, 960, 22500),      # A11: 3 x 7500 GB
    ("Standard_ND96isr_H100_v5", 96, 1900, 30786),  # Z5: 28 TiB NVMe -> GB
    ("BM.GPU.H100.8", 224, 2048, 61440),          # O3: 112 OCPU, 16 x 3.84 TB
])
def test_node_resources_spot_values(name, vcpus, mem, nvme):
    m = catalog.MACHINES[name]
    assert (m.vcpus, m.memory_gib, m.local_nvme_gb) == (vcpus, mem, nvme)
