"""Every cloud's pure module (multinode/clouds/<cloud>.py) has the same shape, and stays pure."""
from __future__ import annotations

import subprocess
import sys
from typing import get_args

import pytest

from components import clouds as component_clouds
from multinode import clouds, config

from .conftest import ROOT

SHAPE = ("CLUSTER_KEYS", "STORAGE_KINDS", "REQUIRED_FABRIC", "CAPACITY_BLOCKS", "CREATES_POOLS", "config_problems",
         "advisories", "FABRICS", "NCCL_NET", "MOCK_CALLS", "MOCK_OUTPUTS")


def test_registry_covers_every_cloud_the_config_accepts():
    assert set(clouds.MODULES) == set(get_args(config.CloudName)) == set(component_clouds.REGISTRY)


@pytest.mark.parametrize("cloud", sorted(clouds.MODULES))
def test_every_cloud_module_has_the_same_sections(cloud):
    module = clouds.module(cloud)
    missing = [name for name in SHAPE if not hasattr(module, name)]
    assert not missing, missing
    assert set(module.NCCL_NET) <= set(module.FABRICS)
    if module.FABRICS:
        assert callable(module.fabric_settings)


def test_each_fabric_and_storage_kind_has_one_owner():
    fabrics = [k for c in clouds.MODULES for k in clouds.module(c).FABRICS]
    storage = [k for c in clouds.MODULES for k in clouds.module(c).STORAGE_KINDS]
    assert len(fabrics) == len(set(fabrics)) and len(storage) == len(set(storage))
    assert set(storage) == set(get_args(config.StorageKind))


@pytest.mark.parametrize("cloud", sorted(clouds.MODULES))
def test_a_cloud_module_imports_no_pulumi(cloud):
    code = (f"import sys; import multinode.clouds.{cloud}; "
            f"bad = sorted(m for m in sys.modules if m == 'pulumi' or m.startswith('pulumi_') "
            f"or m.startswith('pulumi.')); print(bad); sys.exit(1 if bad else 0)")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                          env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stdout + done.stderr
