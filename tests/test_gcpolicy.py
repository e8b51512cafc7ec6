"""multinode/gcpolicy.py: batch thresholds and freezing only for the one-shot command."""
from __future__ import annotations

import gc

from multinode import gcpolicy


def test_settle_freezes_only_in_a_batch_process(monkeypatch):
    monkeypatch.setattr(gcpolicy, "_batch", [False])
    before_threshold, before_frozen = gc.get_threshold(), gc.get_freeze_count()
    try:
        gcpolicy.settle()
        assert gc.get_freeze_count() == before_frozen            # not a batch process (tests, the provider...)
        gcpolicy.for_batch()
        assert gc.get_threshold() == gcpolicy.BATCH_THRESHOLDS
        kept = [object() for _ in range(10)] + [[i] for i in range(100)]
        gcpolicy.settle()
        assert gc.get_freeze_count() >= before_frozen + 100 and kept
    finally:
        gc.unfreeze()
        gc.set_threshold(*before_threshold)
