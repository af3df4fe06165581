"""Property tests: whatever the slices and claims, the allocator never overcommits a device."""

from __future__ import annotations

from collections import Counter, defaultdict
from fractions import Fraction
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpushift._quantity import parse
from gpushift.engine import AllocatedState, StructuredAllocator

DRV = "dra.example.com"
NODE = {"metadata": {"name": "n1"}}
CLASS = {"metadata": {"name": "any"}, "spec": {}}


@st.composite
def devices(draw: st.DrawFn) -> list[dict[str, Any]]:
    out = []
    for i in range(draw(st.integers(1, 5))):
        d: dict[str, Any] = {
            "name": f"d{i}",
            "attributes": {"numa": {"int": draw(st.integers(0, 1))}},
        }
        if draw(st.booleans()):
            d["allowMultipleAllocations"] = True
            shares = draw(st.integers(1, 6))
            mem = draw(st.integers(1, 8))
            policy = draw(st.sampled_from(["none", "default", "range", "values"]))
            cap: dict[str, Any] = {"shares": {"value": str(shares)}}
            if policy == "default":
                cap["shares"]["requestPolicy"] = {"default": "1"}
            elif policy == "range":
                cap["shares"]["requestPolicy"] = {
                    "default": "1",
                    "validRange": {"min": "1", "max": str(shares), "step": "1"},
                }
            elif policy == "values":
                cap["shares"]["requestPolicy"] = {"default": "1", "validValues": ["1", "2", "4"]}
            cap["memory"] = {
                "value": f"{mem}Gi",
                "requestPolicy": {
                    "default": "0",
                    "validRange": {"min": "0", "max": f"{mem}Gi", "step": "1Gi"},
                },
            }
            d["capacity"] = cap
        else:
            d["capacity"] = {"memory": {"value": f"{draw(st.integers(1, 8))}Gi"}}
        out.append(d)
    return out


@st.composite
def claims(draw: st.DrawFn) -> dict[str, Any]:
    reqs = []
    for j in range(draw(st.integers(1, 3))):
        e: dict[str, Any] = {"deviceClassName": "any", "count": draw(st.integers(1, 2))}
        caps = {}
        if draw(st.booleans()):
            caps["shares"] = str(draw(st.integers(1, 3)))
        if draw(st.booleans()):
            caps["memory"] = f"{draw(st.integers(0, 4))}Gi"
        if caps:
            e["capacity"] = {"requests": caps}
        reqs.append({"name": f"r{j}", "exactly": e})
    spec: dict[str, Any] = {"requests": reqs}
    kind = draw(st.sampled_from(["", "matchAttribute", "distinctAttribute"]))
    if kind:
        spec["constraints"] = [{kind: f"{DRV}/numa"}]
    return {"metadata": {"name": "c", "namespace": "ns"}, "spec": {"devices": spec}}


def _value(d: dict[str, Any], name: str) -> Fraction:
    return parse(d["capacity"][name]["value"])


def _check_claim(
    c: dict[str, Any], allocation: dict[str, Any], by_name: dict[str, dict[str, Any]]
) -> None:
    results = allocation["devices"]["results"]
    spec = c["spec"]["devices"]
    # every request gets exactly `count` devices
    per_req = Counter(r["request"] for r in results)
    assert per_req == Counter({r["name"]: r["exactly"]["count"] for r in spec["requests"]})
    # the claim's constraint holds over its devices
    numas = [by_name[r["device"]]["attributes"]["numa"]["int"] for r in results]
    for k in spec.get("constraints", ()):
        if "matchAttribute" in k:
            assert len(set(numas)) == 1
        else:
            assert len(set(numas)) == len(numas)
    wanted = {
        r["name"]: r["exactly"].get("capacity", {}).get("requests", {}) for r in spec["requests"]
    }
    for r in results:
        d = by_name[r["device"]]
        if d.get("allowMultipleAllocations"):
            assert r["shareID"]
            assert set(r["consumedCapacity"]) == set(d["capacity"])
            for name, amount in wanted[r["request"]].items():
                assert parse(r["consumedCapacity"][name]) >= parse(amount)
        else:
            assert "shareID" not in r and "consumedCapacity" not in r


@settings(
    max_examples=80,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(
    devs=devices(),
    sequence=st.lists(
        st.tuples(st.lists(claims(), min_size=1, max_size=2), st.booleans()), max_size=10
    ),
)
def test_never_overcommits(
    devs: list[dict[str, Any]], sequence: list[tuple[list[dict[str, Any]], bool]]
) -> None:
    """Pods of one or two claims come and go; no device is ever overcommitted."""
    s = {
        "metadata": {"name": "s"},
        "spec": {
            "driver": DRV,
            "nodeName": "n1",
            "pool": {"name": "n1", "generation": 1, "resourceSliceCount": 1},
            "devices": devs,
        },
    }
    by_name = {d["name"]: d for d in devs}
    alloc = StructuredAllocator(slices=[s], classes=[CLASS])
    state = AllocatedState()
    held: list[dict[str, Any]] = []
    for pod_claims, release_one in sequence:
        got = alloc.allocate(claims=pod_claims, node=NODE, state=state)
        if got is not None:
            assert len(got) == len(pod_claims)
            for c, allocation in zip(pod_claims, got, strict=True):
                _check_claim(c, allocation, by_name)
                state.add(allocation)
                held.append(allocation)
        if release_one and held:
            state.remove(held.pop(0))
        # Independent ledger from the held allocations alone.
        whole: Counter[str] = Counter()
        used: dict[str, dict[str, Fraction]] = defaultdict(lambda: defaultdict(Fraction))
        share_ids: Counter[str] = Counter()
        for h in held:
            for r in h["devices"]["results"]:
                if "shareID" in r:
                    share_ids[r["shareID"]] += 1
                    for name, q in r["consumedCapacity"].items():
                        used[r["device"]][name] += parse(q)
                else:
                    whole[r["device"]] += 1
        assert all(n == 1 for n in share_ids.values())
        for name, n in whole.items():
            assert n == 1, f"{name} handed out whole {n} times"
            assert name not in used, f"{name} both whole and shared"
        for name, caps in used.items():
            for cap, total in caps.items():
                assert total <= _value(by_name[name], cap), (name, cap)


def _oracle_consumption(d: dict[str, Any], wanted: dict[str, str]) -> dict[str, Fraction] | None:
    """Consumption for the policies `devices()` generates, written out case by case."""
    if any(name not in d["capacity"] for name in wanted):
        return None
    out: dict[str, Fraction] = {}
    for name, cap in d["capacity"].items():
        policy = cap.get("requestPolicy")
        ask = parse(wanted[name]) if name in wanted else None
        if policy is None:
            amount = parse(cap["value"]) if ask is None else ask
        elif ask is None:
            amount = parse(policy["default"])
        elif "validValues" in policy:
            bigger = [parse(v) for v in policy["validValues"] if parse(v) >= ask]
            if not bigger:
                return None
            amount = bigger[0]
        elif "validRange" in policy:
            rng = policy["validRange"]
            lo, step = parse(rng["min"]), parse(rng["step"])
            amount = max(ask, lo)
            amount = lo + -(-(amount - lo) // step) * step
            if amount > parse(rng["max"]):
                return None
        else:
            amount = ask
        out[name] = amount
    return out


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(devs=devices(), sequence=st.lists(claims(), max_size=10))
def test_single_device_claims_take_the_first_device_that_fits(
    devs: list[dict[str, Any]], sequence: list[dict[str, Any]]
) -> None:
    s = {
        "metadata": {"name": "s"},
        "spec": {
            "driver": DRV,
            "nodeName": "n1",
            "pool": {"name": "n1", "generation": 1, "resourceSliceCount": 1},
            "devices": devs,
        },
    }
    alloc = StructuredAllocator(slices=[s], classes=[CLASS])
    state = AllocatedState()
    whole: set[str] = set()
    used: dict[str, dict[str, Fraction]] = defaultdict(lambda: defaultdict(Fraction))
    for c in sequence:
        r0 = c["spec"]["devices"]["requests"][0]
        r0["exactly"]["count"] = 1
        one = {"metadata": c["metadata"], "spec": {"devices": {"requests": [r0]}}}
        wanted = r0["exactly"].get("capacity", {}).get("requests", {})
        expect = None
        for d in devs:
            name = d["name"]
            if name in whole:
                continue
            if d.get("allowMultipleAllocations"):
                use = _oracle_consumption(d, wanted)
                if use is None or any(
                    used[name][k] + v > parse(d["capacity"][k]["value"]) for k, v in use.items()
                ):
                    continue
            elif name in used or any(
                k not in d["capacity"] or parse(v) > parse(d["capacity"][k]["value"])
                for k, v in wanted.items()
            ):
                continue
            expect = name
            break
        got = alloc.allocate(claims=[one], node=NODE, state=state)
        if expect is None:
            assert got is None
            continue
        assert got is not None
        (r,) = got[0]["devices"]["results"]
        assert r["device"] == expect
        if "shareID" in r:
            for k, v in r["consumedCapacity"].items():
                used[expect][k] += parse(v)
        else:
            whole.add(expect)
        state.add(got[0])


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(devs=devices(), sequence=st.lists(claims(), max_size=8))
def test_single_device_shortcut_agrees_with_the_full_search(
    devs: list[dict[str, Any]], sequence: list[dict[str, Any]]
) -> None:
    s = {
        "metadata": {"name": "s"},
        "spec": {
            "driver": DRV,
            "nodeName": "n1",
            "pool": {"name": "n1", "generation": 1, "resourceSliceCount": 1},
            "devices": devs,
        },
    }
    alloc = StructuredAllocator(slices=[s], classes=[CLASS])
    state = AllocatedState()
    for c in sequence:
        r0 = dict(c["spec"]["devices"]["requests"][0])
        r0["exactly"] = dict(r0["exactly"], count=1)
        plain = {"metadata": c["metadata"], "spec": {"devices": {"requests": [r0]}}}
        # A constraint on a request that does not exist changes nothing but forces the search.
        searched = {
            "metadata": c["metadata"],
            "spec": {
                "devices": {
                    "requests": [r0],
                    "constraints": [{"requests": ["absent"], "matchAttribute": f"{DRV}/numa"}],
                }
            },
        }
        a = alloc.allocate(claims=[plain], node=NODE, state=state)
        b = alloc.allocate(claims=[searched], node=NODE, state=state)
        assert (a is None) == (b is None)
        if a is not None and b is not None:
            ra, rb = a[0]["devices"]["results"][0], b[0]["devices"]["results"][0]
            assert ra["device"] == rb["device"]
            assert ra.get("consumedCapacity") == rb.get("consumedCapacity")
            state.add(a[0])


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    total=st.integers(1, 8),
    parts=st.lists(st.tuples(st.integers(1, 8), st.booleans()), min_size=1, max_size=5),
    sequence=st.lists(st.tuples(st.integers(1, 2), st.booleans()), max_size=10),
)
def test_shared_counters_are_never_overdrawn(
    total: int, parts: list[tuple[int, bool]], sequence: list[tuple[int, bool]]
) -> None:
    """Partitions drawing on one counter set never take more than the set holds."""
    devs: list[dict[str, Any]] = []
    for i, (need, multi) in enumerate(parts):
        d: dict[str, Any] = {
            "name": f"p{i}",
            "consumesCounters": [{"counterSet": "cs", "counters": {"mem": {"value": str(need)}}}],
        }
        if multi:
            d["allowMultipleAllocations"] = True
            d["capacity"] = {"shares": {"value": "2", "requestPolicy": {"default": "1"}}}
        devs.append(d)
    s = {
        "metadata": {"name": "s"},
        "spec": {
            "driver": DRV,
            "nodeName": "n1",
            "pool": {"name": "n1", "generation": 1, "resourceSliceCount": 1},
            "sharedCounters": [{"name": "cs", "counters": {"mem": {"value": str(total)}}}],
            "devices": devs,
        },
    }
    need = {f"p{i}": n for i, (n, _) in enumerate(parts)}
    alloc = StructuredAllocator(slices=[s], classes=[CLASS])
    state = AllocatedState()
    held: list[dict[str, Any]] = []
    for count, release in sequence:
        c = {
            "metadata": {"name": "c", "namespace": "ns"},
            "spec": {
                "devices": {
                    "requests": [
                        {"name": "r", "exactly": {"deviceClassName": "any", "count": count}}
                    ]
                }
            },
        }
        got = alloc.allocate(claims=[c], node=NODE, state=state)
        if got is not None:
            state.add(got[0])
            held.append(got[0])
        if release and held:
            state.remove(held.pop())
        # Each distinct device in use draws its counters once, however many shares it has.
        in_use = {r["device"] for h in held for r in h["devices"]["results"]}
        assert sum(need[d] for d in in_use) <= total


@st.composite
def one_device_claims(draw: st.DrawFn) -> dict[str, Any]:
    """Mostly claims the single-device walk serves (one request for one device, no
    constraint), now and then one for two devices, which takes the full search."""
    e: dict[str, Any] = {"deviceClassName": "any", "count": draw(st.sampled_from([1, 1, 1, 2]))}
    caps = {}
    if draw(st.booleans()):
        caps["shares"] = str(draw(st.integers(1, 3)))
    if draw(st.booleans()):
        caps["memory"] = f"{draw(st.integers(0, 4))}Gi"
    if caps:
        e["capacity"] = {"requests": caps}
    return {
        "metadata": {"name": "c", "namespace": "ns"},
        "spec": {"devices": {"requests": [{"name": "r", "exactly": e}]}},
    }


def _picked(got: list[dict[str, Any]] | None) -> list[tuple[str, str, Any]] | None:
    if got is None:
        return None
    return [
        (r["request"], r["device"], sorted((r.get("consumedCapacity") or {}).items()))
        for a in got
        for r in a["devices"]["results"]
    ]


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    devs=devices(),
    sequence=st.lists(
        st.tuples(one_device_claims(), st.integers(0, 3), st.booleans()), max_size=25
    ),
)
def test_the_remembered_walk_picks_what_a_fresh_allocator_picks(
    devs: list[dict[str, Any]], sequence: list[tuple[dict[str, Any], int, bool]]
) -> None:
    """Claims come and go; one allocator, which remembers where each single-device walk
    stopped, picks the same devices and amounts as a new allocator for every call."""
    s = {
        "metadata": {"name": "s"},
        "spec": {
            "driver": DRV,
            "nodeName": "n1",
            "pool": {"name": "n1", "generation": 1, "resourceSliceCount": 1},
            "devices": devs,
        },
    }
    kept = StructuredAllocator(slices=[s], classes=[CLASS])
    state = AllocatedState()
    held: list[dict[str, Any]] = []
    for claim, release, release_first in sequence:
        if release_first and held:
            state.remove(held.pop(release % len(held)))
        fresh = StructuredAllocator(slices=[s], classes=[CLASS])
        want = fresh.allocate(claims=[claim], node=NODE, state=state)
        got = kept.allocate(claims=[claim], node=NODE, state=state)
        assert _picked(got) == _picked(want)
        if got is not None:
            state.add(got[0])
            held.append(got[0])
