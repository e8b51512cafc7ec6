"""The topology contract: pure functions, numbers quoted in every message."""
from multinode import topology


def test_parallelism_ok_and_suggestion():
    assert topology.check_parallelism(8, 2, 2, 8) == []
    (f,) = topology.check_parallelism(4, 1, 2, 8, "p5.48xlarge")
    assert f.field == "tensorParallel"
    assert f.message == ("tensorParallel 4 x pipelineParallel 1 = 4 GPUs, but 2 nodes x 8 GPUs (p5.48xlarge) = 16; "
                         "use tensorParallel 8 with pipelineParallel 2")


def test_suggestion_keeps_a_dividing_pipeline_size():
    assert topology.suggest_parallel(4, 8, 4) == (8, 4)
    assert topology.suggest_parallel(4, 8, 3) == (8, 4)
    assert topology.suggest_parallel(1, 8) == (8, 1)


def test_gpus_per_pod_not_above_machine():
    assert topology.check_gpus_per_pod(8, 8) == []
    (f,) = topology.check_gpus_per_pod(16, 8, "p5.48xlarge")
    assert "16 GPUs per pod, but p5.48xlarge has 8" in f.message


def test_tensor_parallel_across_nodes_without_fabric_is_advisory():
    (f,) = topology.check_tensor_parallel_span(16, 8, "none", "a2-highgpu-8g")
    assert f.severity == topology.ADVISORY and "tensorParallel 16" in f.message
    assert topology.check_tensor_parallel_span(16, 8, "infiniband") == []
    assert topology.check_tensor_parallel_span(8, 8, "none") == []


def test_model_fit():
    assert topology.check_model_fit(405, "bf16", 2, 8, 80) == []          # 810 GB in 1280 GB
    (f,) = topology.check_model_fit(405, "bf16", 1, 8, 80, "p5.48xlarge")  # 810 GB in 640 GB
    assert "810 GB" in f.message and "use 2 nodes" in f.message
    assert topology.check_model_fit(405, "fp8", 1, 8, 80) == []           # FP8 fits one node
    assert topology.check_model_fit(None, "bf16", 1, 8, 80) == []         # unknown size: not sized


def test_training_world_size():
    assert topology.check_training(2, 8, 2, 8, 8, 2) == []
    msgs = [f.message for f in topology.check_training(3, 4, 2, 8)]
    assert any("--nnodes 3, but the job runs 2 pods" in m for m in msgs)
    assert any("--nproc_per_node 4, but each pod has 8 GPUs" in m for m in msgs)
    (f,) = topology.check_training(2, 8, 2, 8, 3, 1)
    assert "16 is not divisible by tensorParallel 3" in f.message
