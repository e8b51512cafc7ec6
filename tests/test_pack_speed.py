"""Issue 35: indexes the stack rules use to stay linear in the stack's size give the answers of the plain scan they
replace (including its errors on malformed objects)."""
from __future__ import annotations

import random
from typing import Any

from policy.rules.disruption import Budgets, selects

KEYS = ["app", "role", "leaderworkerset.sigs.k8s.io/name", "leaderworkerset.sigs.k8s.io/group-index", 1, True]
VALUES: list[Any] = ["a", "b", "0", 0, 1, True, None, 1.0, "1"]


def _selector(rng: random.Random) -> Any:
    roll = rng.random()
    if roll < 0.05:
        return rng.choice([None, "app=a", 7, ["x"]])
    sel: dict[str, Any] = {}
    if rng.random() < 0.8:
        sel["matchLabels"] = ({rng.choice(KEYS): rng.choice(VALUES) for _ in range(rng.randint(0, 3))}
                              if rng.random() < 0.95 else rng.choice(["x", 3, [1]]))
    if rng.random() < 0.4:
        exprs: Any = [{"key": rng.choice(KEYS), "operator": rng.choice(["In", "NotIn", "Exists", "DoesNotExist", "Gt"]),
                       "values": (rng.sample(VALUES, rng.randint(0, 3)) if rng.random() < 0.95
                                  else rng.choice([5, True, "ab", {"a": 1}]))}
                      for _ in range(rng.randint(0, 2))]
        if rng.random() < 0.05:
            exprs = rng.choice([3, True, "x", {"key": "app"}, ["not a dict"]])
        sel["matchExpressions"] = exprs
    return sel


def _answer(fn: Any) -> Any:
    try:
        return fn()
    except Exception as e:  # noqa: BLE001 - the error is part of the answer
        return type(e).__name__


def test_budget_index_answers_as_the_scan_over_every_selector():
    rng = random.Random(35)
    covered = raised = 0
    for _ in range(3000):
        selectors = [_selector(rng) for _ in range(rng.randint(0, 6))]
        index = Budgets()
        for s in selectors:
            index.add(s)
        for _ in range(4):
            labels = {rng.choice(KEYS): rng.choice(VALUES) for _ in range(rng.randint(0, 4))}
            want = _answer(lambda: any(selects(s, labels) for s in selectors))
            assert _answer(lambda: index.covers(labels)) == want, (selectors, labels)
            covered += want is True
            raised += isinstance(want, str)
    assert covered > 1000 and raised > 10            # both answers and errors were compared


def test_budget_index_tries_only_the_budgets_a_pod_can_match():
    index = Budgets()
    for i in range(500):
        index.add({"matchLabels": {"leaderworkerset.sigs.k8s.io/name": f"set-{i}", "x": "y"}})
    index.add({"matchExpressions": [{"key": "team", "operator": "Exists"}]})
    assert index.regular and len(index.always) == 1
    assert index.covers({"leaderworkerset.sigs.k8s.io/name": "set-7", "x": "y"})
    assert not index.covers({"leaderworkerset.sigs.k8s.io/name": "set-7"})
    assert index.covers({"team": "t"})
    tried = len(index.by_pair.get(("leaderworkerset.sigs.k8s.io/name", "set-7"), []))
    assert tried == 1
