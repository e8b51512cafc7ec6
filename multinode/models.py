"""Known model sizes (billions of parameters) and bytes per parameter by precision.

Sources (../shared/facts/hardware.md section 5): M1 vLLM blog llama31/llama4; M2 SGLang DeepSeek
docs; M3 NIM support matrix; M4 vllm-project/recipes Qwen. A model not listed here is not sized
unless the workload gives `modelParamsB`.
"""
from __future__ import annotations

BYTES_PER_PARAM = {"fp32": 4.0, "bf16": 2.0, "fp16": 2.0, "fp8": 1.0, "int8": 1.0, "fp4": 0.5, "int4": 0.5}

# Hugging Face ids (lowercased) -> parameters in billions.
MODEL_PARAMS_B = {
    "meta-llama/llama-3.1-405b": 405, "meta-llama/llama-3.1-405b-instruct": 405,
    "meta-llama/meta-llama-3.1-405b-instruct": 405, "meta-llama/llama-3.1-405b-instruct-fp8": 405,
    "meta-llama/llama-3.1-70b": 70, "meta-llama/llama-3.1-70b-instruct": 70,
    "meta-llama/llama-3.1-8b-instruct": 8, "meta-llama/llama-3.1-8b": 8,
    "deepseek-ai/deepseek-v3": 671, "deepseek-ai/deepseek-r1": 671, "deepseek-ai/deepseek-r1-0528": 671,
    "qwen/qwen3-coder-480b-a35b-instruct": 480,
}

# Share of total GPU memory the weights may take; the rest is left for KV cache and activations.
WEIGHTS_SHARE = 0.9


def params_b(model: str, explicit: float | None = None) -> float | None:
    if explicit is not None:
        return explicit
    key = model.lower()
    if key.startswith("hf://"):
        key = key[5:]
    return MODEL_PARAMS_B.get(key)


def weights_gb(params: float, precision: str) -> float:
    return params * BYTES_PER_PARAM[precision]


# Hugging Face model families whose files download only with a token of a user who accepted the family's licence
# ("gated models": the Hub answers 401/403 without one; https://huggingface.co/docs/hub/models-gated, "Access
# gated models as a user": to download a gated model you must be authenticated). Organisation prefix (lowercase)
# -> the model card stating the gate. Not a complete list of gated repositories: the families of this catalog.
GATED_FAMILIES = {
    "meta-llama/": "https://huggingface.co/meta-llama/Llama-3.1-405B-Instruct (licence acceptance required)",
    "google/gemma": "https://huggingface.co/google/gemma-2-27b (Gemma licence acceptance required)",
}


def gated_family(model: str | None) -> str | None:
    """The GATED_FAMILIES prefix a Hugging Face model id belongs to, or None."""
    if not model:
        return None
    key = model.lower().removeprefix("hf://")
    return next((p for p in GATED_FAMILIES if key.startswith(p)), None)
