"""Canned provider-function results for offline runs, one module per cloud.

`multinode.mockdata.<cloud>` registers into `multinode.recording.CALLS` when imported;
`recording.run_program` imports only the module of the stack's cloud, so planning one cloud's
stack never imports another cloud's SDK.
"""
import importlib
import importlib.util


def load_for(cloud: str) -> None:
    # azure's canned answers moved to multinode.clouds.azure (the per-cloud module)
    for name in (f"{__name__}.{cloud}", f"multinode.clouds.{cloud}"):
        if cloud and importlib.util.find_spec(name) is not None:
            importlib.import_module(name)
