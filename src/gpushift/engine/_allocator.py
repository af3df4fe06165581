"""DRA structured allocation: which devices a pod's ResourceClaims get on one node.

Mirrors ``k8s.io/dynamic-resource-allocation/structured/internal/incubating``
(``allocator_incubating.go``, ``pools_incubating.go``, ``consumable_capacity.go``) and the
scheduler's ``allocateddevices.go`` ledger: pools keep only their newest generation and are
unallocatable while incomplete; pools are tried in (driver, pool) order, slices by name,
devices in list order; the search is first-fit depth-first with backtracking over claims,
requests, ``firstAvailable`` alternatives and device combinations; the first full solution wins.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from gpushift._errors import InputError
from gpushift.engine._capacity import (
    Amount,
    Capacity,
    Number,
    consumed_capacity,
    parse_amount,
    parse_capacity,
    satisfies_requests,
)
from gpushift.engine._cel import (
    CelDevice,
    CelSelectorEvaluator,
    SelectorEvaluationError,
    SelectorEvaluator,
    cel_device,
)
from gpushift.engine._dra_state import AllocatedState, device_key, new_share_id
from gpushift.engine._dra_types import (
    AllocationResult,
    Device,
    DeviceAllocationConfiguration,
    DeviceClass,
    DeviceRequest,
    DeviceRequestAllocationResult,
    DeviceTaint,
    DeviceToleration,
    Node,
    NodeSelector,
    NodeSelectorRequirement,
    NodeSelectorTerm,
    ResourceClaim,
    ResourceSlice,
)
from gpushift.engine._filters import node_selector_matches
from gpushift.engine._inputs import content_key

__all__ = [
    "ALLOCATION_RESULTS_MAX_SIZE",
    "AllocatedState",
    "StructuredAllocator",
    "UnknownDeviceClassError",
    "device_key",
    "new_share_id",
]

#: Upper bound on results per claim (resource/v1 ``AllocationResultsMaxSize``).
ALLOCATION_RESULTS_MAX_SIZE = 32


class UnknownDeviceClassError(InputError):
    """A claim request names a DeviceClass that does not exist.

    ``class_name``, ``claim`` ("namespace/name") and ``request`` identify it; the message uses
    the allocator's wording.
    """

    def __init__(self, class_name: str, *, claim: str, request: str) -> None:
        super().__init__(
            f"claim {claim}, request {request}: could not retrieve device class {class_name}: "
            f'deviceclass.resource.k8s.io "{class_name}" not found',
            obj=f"ResourceClaim {claim}",
        )
        self.class_name = class_name
        self.claim = claim
        self.request = request


# --- static device data ------------------------------------------------------------------------


_NO_TAINT_EFFECTS = frozenset({"", "None"})


@dataclass(slots=True, eq=False)
class _Dev:
    """Per-device data computed once per StructuredAllocator."""

    key: str
    driver: str
    pool: str
    name: str
    multi: bool
    capacity: dict[str, Capacity]
    cap_id: int
    body: Device
    #: taints whose effect keeps untolerating requests off the device
    taints: tuple[DeviceTaint, ...]
    #: the slice's node selection, for the allocation's nodeSelector
    node_name: str | None
    node_selector: NodeSelector | None
    #: minimum amount any allocation consumes, for capacities where it is positive
    min_use: tuple[tuple[str, Number], ...]
    #: ``consumesCounters`` flattened: (counter set, counter, amount)
    counters: tuple[tuple[str, str, Number], ...] = ()
    cel: CelDevice | None = None
    match: dict[int, bool] = field(default_factory=dict)
    attr_cache: dict[str, tuple[str, Any] | None] = field(default_factory=dict)

    def celdev(self) -> CelDevice:
        if self.cel is None:
            self.cel = cel_device(
                driver=self.driver,
                attributes=self.body.get("attributes"),
                capacity=self.body.get("capacity"),
                allow_multiple_allocations=self.multi,
            )
        return self.cel

    def attribute(self, fq_name: str) -> tuple[str, Any] | None:
        """lookupAttribute: a fully-qualified name, or its ID when the domain is the driver."""
        if fq_name in self.attr_cache:
            return self.attr_cache[fq_name]
        attrs = self.body.get("attributes") or {}
        attr = attrs.get(fq_name)
        if attr is None:
            domain, sep, ident = fq_name.partition("/")
            if sep and domain == self.driver:
                attr = attrs.get(ident)
        out: tuple[str, Any] | None = None
        if attr is not None:
            for t in ("string", "bool", "int", "version", "strings", "bools", "ints", "versions"):
                if t in attr:
                    v = attr[t]
                    out = (t, tuple(v) if isinstance(v, list) else v)
                    break
        self.attr_cache[fq_name] = out
        return out


def _min_use(cap: Capacity) -> Number:
    # The least any allocation can consume: a request is rounded up to the range minimum or
    # the smallest valid value, and the default is always allowed.
    lows: list[Number] = []
    if cap.range_min is not None:
        lows.append(cap.range_min.value)
    elif cap.valid_values:
        lows.append(min(v.value for v in cap.valid_values))
    else:
        lows.append(0)
    if cap.default is not None:
        lows.append(cap.default.value)
    return max(0, min(lows))


@dataclass(frozen=True, slots=True)
class _Use:
    """What one allocation of a multi-allocatable device consumes, precomputed per request."""

    #: (capacity name, amount consumed, capacity value) for every capacity of the device
    amounts: tuple[tuple[str, Number, Number], ...]
    #: ``consumedCapacity`` as written to the result
    text: dict[str, str]


@dataclass(slots=True)
class _Pool:
    driver: str
    name: str
    generation: int
    slice_count: int
    slices: list[tuple[str, ResourceSlice, list[_Dev]]]

    @property
    def incomplete(self) -> bool:
        return len(self.slices) != self.slice_count


@dataclass(frozen=True, slots=True)
class _NodeView:
    devices: tuple[_Dev, ...]
    incomplete_pools: tuple[str, ...]
    #: per pool ("driver/pool") with shared counters: (counter set, counter) → total
    counters: dict[str, dict[tuple[str, str], Number]] = field(default_factory=dict)
    #: the slices whose devices are allocatable (complete pools at their newest generation)
    slices: tuple[ResourceSlice, ...] = ()
    #: the other slices offered to the node: (slice name, why its devices are not allocatable)
    ignored: tuple[tuple[str, str], ...] = ()


_EMPTY_VIEW = _NodeView((), ())


@dataclass(frozen=True, slots=True)
class NodePools:
    """What a node's ResourceSlices offer: the slices whose devices can be allocated (complete
    pools at their newest generation), and the others with the reason they are left out."""

    slices: tuple[ResourceSlice, ...]
    ignored: tuple[tuple[str, str], ...]


# --- prepared requests -------------------------------------------------------------------------


@dataclass(slots=True, eq=False)
class _Req:
    """One allocatable request: an ``exactly`` or one ``firstAvailable`` alternative."""

    name: str  # as written to results: "<req>" or "<req>/<sub>"
    parent: str
    sub: str
    class_name: str
    selkey: tuple[str, ...]
    #: how many of ``selkey`` come from the DeviceClass (they are evaluated first)
    n_class: int
    sel_id: int
    cap_id: int
    mode_all: bool
    count: int
    admin: bool
    cap_requests: dict[str, Amount]
    tolerations: tuple[DeviceToleration, ...]
    class_config: tuple[Any, ...]


@dataclass(slots=True)
class _Constraint:
    requests: frozenset[str]
    attribute: str
    distinct: bool
    values: list[tuple[str, Any]] = field(default_factory=list)

    def applies(self, r: _Req) -> bool:
        if not self.requests:
            return True
        return r.parent in self.requests or (bool(r.sub) and r.name in self.requests)

    def add(self, dev: _Dev) -> bool:
        v = dev.attribute(self.attribute)
        if v is None:
            return False
        v = _norm_attr(v)
        if self.distinct:
            if v in self.values:
                return False
        elif self.values and self.values[0] != v:
            return False
        self.values.append(v)
        return True


def _norm_attr(v: tuple[str, Any]) -> tuple[str, Any]:
    if v[0] == "version":
        # semver equality ignores build metadata
        return ("version", str(v[1]).split("+", 1)[0])
    return v


@dataclass(slots=True, eq=False)
class _Pick:
    claim: int
    req: _Req
    dev: _Dev
    use: _Use | None
    constraints: list[_Constraint]
    #: whether this pick took the device's shared counters
    counters: bool = False


class StructuredAllocator:
    """Allocates ResourceClaims on nodes from a fixed set of ResourceSlices and DeviceClasses.

    Pools keep only their highest ``generation``; a pool whose number of slices differs from
    ``resourceSliceCount`` is incomplete and none of its devices are allocated. Slices are
    chosen per node by ``nodeName``, ``nodeSelector`` or ``allNodes`` (and per device with
    ``perDeviceNodeSelection``). Node views are cached by node name: a node's labels are
    assumed not to change during the StructuredAllocator's life.

    Checked per device, in upstream's order: not held whole (unless ``adminAccess``), class
    then request selectors, device taints against the request's tolerations, capacity
    (consumable capacity for multi-allocatable devices, a lower bound otherwise), the pool's
    shared counters (partitionable devices), then the claim's constraints. Not modelled:
    binding conditions (such pools are not ordered last) and DeviceTaintRules.

    Raises QuantityError (an InputError) for an invalid capacity quantity in a slice.
    """

    def __init__(
        self,
        *,
        slices: Iterable[ResourceSlice],
        classes: Iterable[DeviceClass],
        selector: SelectorEvaluator | None = None,
    ) -> None:
        self._selector: SelectorEvaluator = selector or CelSelectorEvaluator()
        self._classes: dict[str, DeviceClass] = {
            c["metadata"]["name"]: c for c in classes if c.get("metadata", {}).get("name")
        }
        self._cap_ids: dict[bytes | str, tuple[int, dict[str, Capacity]]] = {}
        self._by_node: dict[str, list[tuple[ResourceSlice, list[_Dev]]]] = {}
        self._other: list[tuple[ResourceSlice, list[_Dev]]] = []
        for s in slices:
            spec = s["spec"]
            entry = (s, self._devices(s))
            node_name = spec.get("nodeName")
            if node_name:
                self._by_node.setdefault(node_name, []).append(entry)
            else:
                self._other.append(entry)
        self._views: dict[str, _NodeView] = {}
        self._req_cache: dict[str, list[_Req]] = {}
        self._req_by_id: dict[int, tuple[DeviceRequest, list[_Req]]] = {}
        self._sel_ids: dict[tuple[str, ...], int] = {}
        self._capreq_ids: dict[tuple[tuple[str, str], ...], int] = {}
        self._uses: dict[tuple[int, int], _Use | None] = {}
        self._whole: dict[tuple[int, int], bool] = {}
        #: Per (node view, request): the ledger, its release count and the device index a
        #: first-fit walk may start from (see :meth:`_first_fit`).
        self._cursors: dict[tuple[int, int], tuple[AllocatedState, int, int]] = {}
        self._singles: dict[int, tuple[Any, tuple[_Req, list[list[_Req]]] | None]] = {}

    # -- construction helpers --

    def _capacity(self, body: Mapping[str, Any] | None) -> tuple[int, dict[str, Capacity]]:
        # Devices of one model repeat the same capacity body: keyed by its content.
        frozen = content_key(body)
        hit = self._cap_ids.get(frozen)
        if hit is None:
            caps = {name: parse_capacity(c) for name, c in (body or {}).items()}
            hit = (len(self._cap_ids), caps)
            self._cap_ids[frozen] = hit
        return hit

    def _devices(self, s: ResourceSlice) -> list[_Dev]:
        spec = s["spec"]
        driver = spec["driver"]
        pool = spec["pool"]["name"]
        out: list[_Dev] = []
        for d in spec.get("devices") or ():
            cap_id, caps = self._capacity(d.get("capacity"))
            multi = bool(d.get("allowMultipleAllocations"))
            taints = tuple(
                t for t in d.get("taints") or () if t.get("effect", "") not in _NO_TAINT_EFFECTS
            )
            min_use = tuple(
                (name, m) for name, c in caps.items() if multi and (m := _min_use(c)) > 0
            )
            per_device = bool(spec.get("perDeviceNodeSelection"))
            src: Mapping[str, Any] = d if per_device else spec
            out.append(
                _Dev(
                    key=device_key(driver, pool, d["name"]),
                    driver=driver,
                    pool=pool,
                    name=d["name"],
                    multi=multi,
                    capacity=caps,
                    cap_id=cap_id,
                    body=d,
                    taints=taints,
                    node_name=src.get("nodeName") or None,
                    node_selector=src.get("nodeSelector"),
                    min_use=min_use,
                    counters=tuple(
                        (cc["counterSet"], name, parse_amount(c["value"]).value)
                        for cc in d.get("consumesCounters") or ()
                        for name, c in (cc.get("counters") or {}).items()
                    ),
                )
            )
        return out

    def _view(self, node: Node) -> _NodeView:
        meta = node["metadata"]
        name = meta.get("name", "")
        v = self._views.get(name)
        if v is not None:
            return v
        labels = meta.get("labels") or {}
        pools: dict[tuple[str, str], _Pool] = {}
        candidates = list(self._by_node.get(name, ()))
        for s, devs in self._other:
            spec = s["spec"]
            if spec.get("allNodes"):
                candidates.append((s, devs))
            elif "nodeSelector" in spec:
                if node_selector_matches(spec["nodeSelector"], name=name, labels=labels):
                    candidates.append((s, devs))
            elif spec.get("perDeviceNodeSelection"):
                kept = [d for d in devs if _device_on_node(d, name, labels)]
                candidates.append((s, kept))
        # k8s.io/dynamic-resource-allocation structured/internal/stable pools_stable.go
        # GatherPools: a pool keeps only its newest generation, and is incomplete while it has
        # fewer slices than resourceSliceCount.
        stale: list[tuple[str, tuple[str, str], int]] = []
        for s, devs in candidates:
            spec = s["spec"]
            p = spec["pool"]
            pid = (spec["driver"], p["name"])
            gen = int(p.get("generation", 0))
            entry = (s["metadata"].get("name", ""), s, devs)
            pool = pools.get(pid)
            if pool is None or gen > pool.generation:
                if pool is not None:
                    stale += [(e[0], pid, pool.generation) for e in pool.slices]
                pools[pid] = _Pool(
                    pid[0], pid[1], gen, int(p.get("resourceSliceCount", 1)), [entry]
                )
            elif gen == pool.generation:
                pool.slices.append(entry)
            else:
                stale.append((entry[0], pid, gen))
        devices: list[_Dev] = []
        incomplete: list[str] = []
        counters: dict[str, dict[tuple[str, str], Number]] = {}
        usable: list[ResourceSlice] = []
        ignored: list[tuple[str, str]] = []
        for slice_name, spid, gen in stale:
            newest = pools[spid].generation
            ignored.append(
                (slice_name, f"pool {spid[0]}/{spid[1]}: generation {gen}, the newest is {newest}")
            )
        for pid in sorted(pools):
            pool = pools[pid]
            if pool.incomplete:
                incomplete.append(f"{pid[0]}/{pid[1]}")
                reason = (
                    f"pool {pid[0]}/{pid[1]} is incomplete: {len(pool.slices)} of "
                    f"{pool.slice_count} slices at generation {pool.generation}"
                )
                ignored += [(e[0], reason) for e in pool.slices]
                continue
            pool.slices.sort(key=lambda e: e[0])
            for _, sl, devs in pool.slices:
                usable.append(sl)
                devices.extend(devs)
                for cs in sl["spec"].get("sharedCounters") or ():
                    totals = counters.setdefault(f"{pid[0]}/{pid[1]}", {})
                    for cname, c in (cs.get("counters") or {}).items():
                        totals[(cs["name"], cname)] = parse_amount(c["value"]).value
        v = (
            _NodeView(
                tuple(devices),
                tuple(incomplete),
                counters,
                tuple(usable),
                tuple(sorted(ignored)),
            )
            if devices or incomplete or usable or ignored
            else _EMPTY_VIEW
        )
        self._views[name] = v
        return v

    # -- queries --

    def pools(self, *, node: Node) -> NodePools:
        """The node's slices whose devices can be allocated, and the others with the reason
        (an older generation of their pool, or an incomplete pool)."""
        v = self._view(node)
        return NodePools(v.slices, v.ignored)

    def node_names(self) -> frozenset[str]:
        """Nodes named by node-local slices (``spec.nodeName``)."""
        return frozenset(self._by_node)

    def has_network_devices(self) -> bool:
        """Whether any slice uses ``allNodes``, ``nodeSelector`` or per-device selection."""
        return bool(self._other)

    def has_devices(self, *, node: Node) -> bool:
        """Whether any complete pool offers devices to this node (cheap, cached)."""
        return bool(self._view(node).devices)

    def free_devices(self, *, node: Node, state: AllocatedState) -> int:
        """An upper bound on the node's devices that can still take an allocation.

        A device is not counted when it is held whole, or when it is multi-allocatable and
        some capacity cannot take even the smallest amount its policy allows. If this is 0,
        :meth:`allocate` fails for any claim that needs a device on this node (devices shared
        with ``adminAccess`` aside).
        """
        n = 0
        consumed = state.consumed
        exclusive = state.exclusive
        for d in self._view(node).devices:
            if d.key in exclusive:
                continue
            if d.multi:
                agg = consumed.get(d.key)
                if agg and any(agg.get(c, 0) + m > d.capacity[c].value.value for c, m in d.min_use):
                    continue
            elif d.key in state.shared:
                continue
            n += 1
        return n

    def device_class(self, name: str) -> DeviceClass | None:
        """The DeviceClass with this name, if any."""
        return self._classes.get(name)

    # -- request preparation --

    def _requests(self, claim: ResourceClaim) -> list[list[_Req]]:
        spec = claim["spec"].get("devices") or {}
        out: list[list[_Req]] = []
        for r in spec.get("requests") or ():
            # Claims made from one template often share request objects; otherwise repr is a
            # cheap content key (equal requests in another key order just miss the cache).
            hit = self._req_by_id.get(id(r))
            if hit is not None and hit[0] is r:
                out.append(hit[1])
                continue
            key = repr(r)
            reqs = self._req_cache.get(key)
            if reqs is None:
                reqs = self._prepare(claim, r)
                self._req_cache[key] = reqs
            self._req_by_id[id(r)] = (r, reqs)
            out.append(reqs)
        return out

    def _prepare(self, claim: ResourceClaim, r: DeviceRequest) -> list[_Req]:
        name = r["name"]
        alts: list[tuple[str, Mapping[str, Any]]]
        if "firstAvailable" in r:
            alts = [(f"{name}/{s['name']}", s) for s in r["firstAvailable"]]
        else:
            alts = [(name, r.get("exactly") or {})]
        out: list[_Req] = []
        for full, body in alts:
            class_name = body.get("deviceClassName", "")
            cls = self._classes.get(class_name)
            if cls is None:
                raise UnknownDeviceClassError(class_name, claim=_claim_id(claim), request=full)
            exprs = [s["cel"]["expression"] for s in cls.get("spec", {}).get("selectors") or ()]
            n_class = len(exprs)
            exprs += [s["cel"]["expression"] for s in body.get("selectors") or ()]
            for e in exprs:
                self._selector.check(e)
            caps = dict((body.get("capacity") or {}).get("requests") or {})
            selkey = tuple(exprs)
            cap_key = tuple(sorted((k, str(v)) for k, v in caps.items()))
            mode_all = body.get("allocationMode", "ExactCount") == "All"
            out.append(
                _Req(
                    name=full,
                    parent=name,
                    sub=full.partition("/")[2],
                    class_name=class_name,
                    selkey=selkey,
                    n_class=n_class,
                    sel_id=self._sel_ids.setdefault(selkey, len(self._sel_ids)),
                    cap_id=self._capreq_ids.setdefault(cap_key, len(self._capreq_ids)),
                    mode_all=mode_all,
                    count=0 if mode_all else int(body.get("count", 1)),
                    admin=bool(body.get("adminAccess")),
                    cap_requests={k: parse_amount(v) for k, v in caps.items()},
                    tolerations=tuple(body.get("tolerations") or ()),
                    class_config=tuple(cls.get("spec", {}).get("config") or ()),
                )
            )
        return out

    # -- per-device checks --

    def _matches(self, d: _Dev, r: _Req, claim: ResourceClaim) -> bool:
        """Class selectors, then request selectors (cached per device and selector list).

        Raises SelectorEvaluationError naming the class or claim and the selector's index,
        as selectorsMatch does.
        """
        m = d.match.get(r.sel_id)
        if m is None:
            m = True
            celdev = d.celdev()
            for i, e in enumerate(r.selkey):
                try:
                    ok = self._selector.matches(e, celdev)
                except SelectorEvaluationError as err:
                    where = (
                        f"class {r.class_name}: selector #{i}"
                        if i < r.n_class
                        else f"claim {_claim_id(claim)}: selector #{i - r.n_class}"
                    )
                    raise SelectorEvaluationError(
                        err.expression, err.error, context=where
                    ) from None
                if not ok:
                    m = False
                    break
            d.match[r.sel_id] = m
        return m

    def _use(self, d: _Dev, r: _Req) -> _Use | None:
        """What an allocation of multi-allocatable ``d`` for ``r`` consumes (None: unusable)."""
        ck = (d.cap_id, r.cap_id)
        try:
            return self._uses[ck]
        except KeyError:
            pass
        consumed = consumed_capacity(requests=r.cap_requests, capacity=d.capacity)
        use = None
        if consumed is not None:
            use = _Use(
                tuple((n, a.value, d.capacity[n].value.value) for n, a in consumed.items()),
                {n: a.text() for n, a in consumed.items()},
            )
        self._uses[ck] = use
        return use

    def _fits_whole(self, d: _Dev, r: _Req) -> bool:
        """Whether ``d``, allocated whole, has every capacity ``r`` asks for."""
        ck = (d.cap_id, r.cap_id)
        ok = self._whole.get(ck)
        if ok is None:
            ok = satisfies_requests(requests=r.cap_requests, capacity=d.capacity)
            self._whole[ck] = ok
        return ok

    # -- allocation --

    def allocate(
        self,
        *,
        claims: Sequence[ResourceClaim],
        node: Node,
        state: AllocatedState,
    ) -> list[AllocationResult] | None:
        """Allocate all claims of one pod on one node together, as upstream's Allocate does.

        Returns one ``status.allocation`` body per claim, in order, or None if they cannot all
        be allocated on this node. ``state`` is not changed; commit a result with
        :meth:`AllocatedState.add`. A claim that already has ``status.allocation`` is not
        allocated again: its allocation is returned unchanged when its ``nodeSelector``
        admits the node (or it has none), else the call returns None.

        Raises UnknownDeviceClassError for a request naming a missing DeviceClass,
        SelectorError for a selector that does not compile, and SelectorEvaluationError when
        a selector fails at run time or returns a non-bool (upstream aborts the allocation).
        """
        view = self._view(node)
        if len(claims) == 1 and not view.counters:
            claim = claims[0]
            if not claim.get("status", {}).get("allocation"):
                single = self._single(claim)
                if single is not None:
                    pick = self._first_fit(claim, single[0], view, state)
                    return None if pick is None else [_result(claim, single[1], [pick])]
        meta = node["metadata"]
        out: list[AllocationResult | None] = []
        todo: list[int] = []
        requests: list[list[list[_Req]]] = []
        for i, claim in enumerate(claims):
            existing = claim.get("status", {}).get("allocation")
            if existing:
                ns = existing.get("nodeSelector")
                if ns is not None and not node_selector_matches(
                    ns, name=meta.get("name", ""), labels=meta.get("labels") or {}
                ):
                    return None
                out.append(existing)
                continue
            out.append(None)
            todo.append(i)
            requests.append(self._requests(claim))
        if not todo:
            return [a for a in out if a is not None]
        if len(claims) == 1:
            reqs = requests[0]
            if len(reqs) == 1 and len(reqs[0]) == 1:
                r = reqs[0][0]
                devices = claims[0]["spec"].get("devices") or {}
                if (
                    r.count == 1
                    and not r.mode_all
                    and not devices.get("constraints")
                    and not view.counters
                ):
                    pick = self._first_fit(claims[0], r, view, state)
                    return None if pick is None else [_result(claims[0], reqs, [pick])]
        picks = _Search(self, view, state, [claims[i] for i in todo], requests).run()
        if picks is None:
            return None
        for j, i in enumerate(todo):
            out[i] = _result(claims[i], requests[j], [p for p in picks if p.claim == j])
        return [a for a in out if a is not None]

    def _single(self, claim: ResourceClaim) -> tuple[_Req, list[list[_Req]]] | None:
        """The request of a claim for exactly one device without constraints (the walk of
        :meth:`_first_fit` serves it), with the claim's prepared requests; None for any other
        claim. Worked out once per spec object: claims from one template share theirs."""
        spec = claim["spec"]
        hit = self._singles.get(id(spec))
        if hit is not None and hit[0] is spec:
            return hit[1]
        reqs = self._requests(claim)
        out = None
        if len(reqs) == 1 and len(reqs[0]) == 1:
            r = reqs[0][0]
            devices = spec.get("devices") or {}
            if r.count == 1 and not r.mode_all and not devices.get("constraints"):
                out = (r, reqs)
        self._singles[id(spec)] = (spec, out)
        return out

    def _first_fit(
        self, claim: ResourceClaim, r: _Req, view: _NodeView, state: AllocatedState
    ) -> _Pick | None:
        """The search for one single-device request without constraints: the first device
        that passes the same checks as :meth:`_Search._try` (no backtracking is possible).

        Devices a request was turned away from stay unusable for it while ``state`` only
        grows (each check is fixed per device and request, or fails more as use grows), so
        the walk starts where the last one for this node and request stopped, unless
        ``state`` released something since (:attr:`AllocatedState.releases`)."""
        devices = view.devices
        ck = (id(view), id(r))
        hit = self._cursors.get(ck)
        releases = state.releases
        start = hit[2] if hit is not None and hit[0] is state and hit[1] == releases else 0
        exclusive = state.exclusive
        shared = state.shared
        consumed = state.consumed
        admin = r.admin
        for pos in range(start, len(devices)):
            d = devices[pos]
            key = d.key
            if not admin and (key in exclusive or (not d.multi and key in shared)):
                continue
            m = d.match.get(r.sel_id)
            if m is None:
                m = self._matches(d, r, claim)
            if not m:
                continue
            if d.taints and not _tolerated(d.taints, r.tolerations):
                continue
            use: _Use | None = None
            if d.multi:
                use = self._use(d, r)
                if use is None:
                    continue
                if not admin:
                    allocated = consumed.get(key)
                    over = False
                    if allocated:
                        for n, a, lim in use.amounts:
                            if a + allocated.get(n, 0) > lim:
                                over = True
                                break
                    else:
                        for _, a, lim in use.amounts:
                            if a > lim:
                                over = True
                                break
                    if over:
                        continue
            elif r.cap_requests and not self._fits_whole(d, r):
                continue
            self._cursors[ck] = (state, releases, pos)
            return _Pick(0, r, d, use, [])
        self._cursors[ck] = (state, releases, len(devices))
        return None


class _Search:
    """One Allocate call: the depth-first search and its in-flight bookkeeping."""

    def __init__(
        self,
        alloc: StructuredAllocator,
        view: _NodeView,
        state: AllocatedState,
        claims: list[ResourceClaim],
        requests: list[list[list[_Req]]],
    ) -> None:
        self.alloc = alloc
        self.devices = view.devices
        self.incomplete = view.incomplete_pools
        self.state = state
        self.claims = claims
        self.requests = requests
        self.constraints = [_constraints(c) for c in claims]
        self.allocating: set[str] = set()
        self.allocating_cap: dict[str, dict[str, Number]] = {}
        self.picks: list[_Pick] = []
        self.per_claim = [0] * len(claims)
        self.all_devices: dict[int, list[_Dev] | None] = {}
        self.view = view
        self.counter_free: dict[str, dict[tuple[str, str], Number]] = {}
        self.inflight_shares: dict[str, int] = {}

    def run(self) -> list[_Pick] | None:
        if self._request(0, 0):
            return self.picks
        return None

    def _request(self, ci: int, ri: int) -> bool:
        while True:
            if ci == len(self.requests):
                return True
            if ri < len(self.requests[ci]):
                break
            ci, ri = ci + 1, 0
        for r in self.requests[ci][ri]:
            if r.mode_all:
                devs = self._all(ci, r)
                if devs is None:
                    continue
                if self._place_all(ci, ri, r, devs, 0):
                    return True
            elif self._place(ci, ri, r, r.count, 0):
                return True
        return False

    def _all(self, ci: int, r: _Req) -> list[_Dev] | None:
        cached = self.all_devices.get(id(r), False)
        if cached is not False:
            return cached  # type: ignore[return-value]
        # Upstream refuses "all devices" while any pool is being updated, and needs at
        # least one matching device.
        devs: list[_Dev] | None = None
        if not self.incomplete:
            claim = self.claims[ci]
            devs = [d for d in self.devices if self.alloc._matches(d, r, claim)] or None
            if devs is not None and len(devs) > ALLOCATION_RESULTS_MAX_SIZE:
                devs = None
        self.all_devices[id(r)] = devs
        return devs

    def _place_all(self, ci: int, ri: int, r: _Req, devs: list[_Dev], k: int) -> bool:
        if k == len(devs):
            return self._request(ci, ri + 1)
        d = devs[k]
        if not self._try(ci, r, d, check_match=False):
            return False
        if self._place_all(ci, ri, r, devs, k + 1):
            return True
        self._undo()
        return False

    def _place(self, ci: int, ri: int, r: _Req, left: int, start: int) -> bool:
        if left == 0:
            return self._request(ci, ri + 1)
        devices = self.devices
        for pos in range(start, len(devices)):
            d = devices[pos]
            if not self._try(ci, r, d, check_match=True):
                continue
            if self._place(ci, ri, r, left - 1, pos + 1):
                return True
            self._undo()
        return False

    def _try(self, ci: int, r: _Req, d: _Dev, *, check_match: bool) -> bool:
        key = d.key
        state = self.state
        admin = r.admin
        multi = d.multi
        if not admin and (
            key in state.exclusive or key in self.allocating or (not multi and key in state.shared)
        ):
            return False
        if check_match:
            m = d.match.get(r.sel_id)
            if m is None:
                m = self.alloc._matches(d, r, self.claims[ci])
            if not m:
                return False
        if d.taints and not _tolerated(d.taints, r.tolerations):
            return False
        if self.per_claim[ci] >= ALLOCATION_RESULTS_MAX_SIZE:
            return False
        use: _Use | None = None
        if multi:
            use = self.alloc._use(d, r)
            if use is None:
                return False
            if not admin:
                allocated = state.consumed.get(key)
                allocating = self.allocating_cap.get(key)
                for name, amount, limit in use.amounts:
                    total = amount
                    if allocated:
                        total += allocated.get(name, 0)
                    if allocating:
                        total += allocating.get(name, 0)
                    if total > limit:
                        return False
        elif r.cap_requests and not self.alloc._fits_whole(d, r):
            return False
        took_counters = False
        # A shared device consumes its counters once, with its first share.
        if d.counters and not (multi and (key in state.shared or self.inflight_shares.get(key))):
            if not self._take_counters(d):
                return False
            took_counters = True
        added: list[_Constraint] = []
        for c in self.constraints[ci]:
            if c.applies(r):
                if not c.add(d):
                    for a in added:
                        a.values.pop()
                    if took_counters:
                        self._give_counters(d)
                    return False
                added.append(c)
        if not admin:
            if use is not None:
                agg = self.allocating_cap.setdefault(key, {})
                for name, amount, _ in use.amounts:
                    agg[name] = agg.get(name, 0) + amount
            elif not multi:
                self.allocating.add(key)
        if multi:
            self.inflight_shares[key] = self.inflight_shares.get(key, 0) + 1
        self.per_claim[ci] += 1
        self.picks.append(_Pick(ci, r, d, use, added, took_counters))
        return True

    def _free(self, pool_key: str) -> dict[tuple[str, str], Number]:
        """Shared counters of a pool left after the devices the ledger holds."""
        free = self.counter_free.get(pool_key)
        if free is None:
            free = dict(self.view.counters.get(pool_key, {}))
            state = self.state
            for d in self.view.devices:
                if (
                    d.counters
                    and f"{d.driver}/{d.pool}" == pool_key
                    and (d.key in state.exclusive or d.key in state.shared)
                ):
                    for cs, name, amount in d.counters:
                        if (cs, name) in free:
                            free[(cs, name)] -= amount
            self.counter_free[pool_key] = free
        return free

    def _take_counters(self, d: _Dev) -> bool:
        free = self._free(f"{d.driver}/{d.pool}")
        for cs, name, amount in d.counters:
            left = free.get((cs, name))
            if left is None or left < amount:
                return False
        for cs, name, amount in d.counters:
            free[(cs, name)] -= amount
        return True

    def _give_counters(self, d: _Dev) -> None:
        free = self.counter_free[f"{d.driver}/{d.pool}"]
        for cs, name, amount in d.counters:
            free[(cs, name)] += amount

    def _undo(self) -> None:
        p = self.picks.pop()
        self.per_claim[p.claim] -= 1
        for c in p.constraints:
            c.values.pop()
        if p.counters:
            self._give_counters(p.dev)
        if p.dev.multi:
            self.inflight_shares[p.dev.key] -= 1
        if not p.req.admin:
            key = p.dev.key
            if p.use is not None:
                agg = self.allocating_cap[key]
                for name, amount, _ in p.use.amounts:
                    agg[name] -= amount
            elif not p.dev.multi:
                self.allocating.discard(key)


def _tolerated(taints: tuple[DeviceTaint, ...], tolerations: tuple[DeviceToleration, ...]) -> bool:
    # core/v1 toleration matching, as resource/v1 DeviceToleration documents it.
    for t in taints:
        ok = False
        for tol in tolerations:
            if tol.get("effect") and tol["effect"] != t["effect"]:
                continue
            op = tol.get("operator", "Equal")
            if not tol.get("key"):
                ok = op == "Exists"
            elif tol["key"] == t["key"]:
                ok = op == "Exists" or tol.get("value", "") == t.get("value", "")
            if ok:
                break
        if not ok:
            return False
    return True


def _constraints(claim: ResourceClaim) -> list[_Constraint]:
    out: list[_Constraint] = []
    for c in (claim["spec"].get("devices") or {}).get("constraints") or ():
        reqs = frozenset(c.get("requests") or ())
        if c.get("matchAttribute"):
            out.append(_Constraint(reqs, c["matchAttribute"], False))
        elif c.get("distinctAttribute"):
            out.append(_Constraint(reqs, c["distinctAttribute"], True))
    return out


def _result(
    claim: ResourceClaim, requests: list[list[_Req]], picks: list[_Pick]
) -> AllocationResult:
    results: list[DeviceRequestAllocationResult] = []
    for p in picks:
        d = p.dev
        res: DeviceRequestAllocationResult = {
            "request": p.req.name,
            "driver": d.driver,
            "pool": d.pool,
            "device": d.name,
        }
        if p.req.admin:
            res["adminAccess"] = True
        if p.req.tolerations:
            res["tolerations"] = [dict(t) for t in p.req.tolerations]  # type: ignore[misc]
        if d.multi:
            res["shareID"] = new_share_id()
            res["consumedCapacity"] = dict(p.use.text) if p.use is not None else {}
        results.append(res)
    # Class config per request actually allocated (firstAvailable: the chosen alternative),
    # then the claim's own config, as allocator_incubating.go assembles them.
    config: list[DeviceAllocationConfiguration] = []
    if any(p.req.class_config for p in picks):
        chosen: dict[str, _Req] = {}
        for p in picks:
            chosen.setdefault(p.req.parent, p.req)
        for alts in requests:
            r = chosen.get(alts[0].parent)
            if r is None:
                continue
            for c in r.class_config:
                config.append({"source": "FromClass", "requests": [r.name], "opaque": c["opaque"]})
    for c in (claim["spec"].get("devices") or {}).get("config") or ():
        entry: DeviceAllocationConfiguration = {"source": "FromClaim"}
        if c.get("requests"):
            entry["requests"] = list(c["requests"])
        if "opaque" in c:
            entry["opaque"] = c["opaque"]
        config.append(entry)
    devices: dict[str, Any] = {"results": results}
    if config:
        devices["config"] = config
    out: AllocationResult = {"devices": devices}  # type: ignore[typeddict-item]
    ns = _node_selector(picks)
    if ns is not None:
        out["nodeSelector"] = ns
    return out


def _node_selector(picks: list[_Pick]) -> NodeSelector | None:
    # allocator_incubating.go createNodeSelector: a node-local device pins the node; node
    # selectors of other devices are merged into one term; allNodes devices add nothing.
    fields: list[NodeSelectorRequirement] = []
    exprs: list[NodeSelectorRequirement] = []
    for p in picks:
        d = p.dev
        if d.node_name:
            return {
                "nodeSelectorTerms": [
                    {
                        "matchFields": [
                            {"key": "metadata.name", "operator": "In", "values": [d.node_name]}
                        ]
                    }
                ]
            }
        if d.node_selector is not None:
            terms = d.node_selector.get("nodeSelectorTerms") or []
            if len(terms) == 1:
                for src, dst in (
                    (terms[0].get("matchFields"), fields),
                    (terms[0].get("matchExpressions"), exprs),
                ):
                    for req in src or ():
                        if req not in dst:
                            dst.append(req)
    if fields or exprs:
        term: NodeSelectorTerm = {}
        if fields:
            term["matchFields"] = fields
        if exprs:
            term["matchExpressions"] = exprs
        return {"nodeSelectorTerms": [term]}
    return None


def _device_on_node(d: _Dev, name: str, labels: Mapping[str, str]) -> bool:
    body = d.body
    if body.get("allNodes"):
        return True
    if body.get("nodeName"):
        return body["nodeName"] == name
    if "nodeSelector" in body:
        return node_selector_matches(body["nodeSelector"], name=name, labels=labels)
    return False


def _claim_id(claim: ResourceClaim) -> str:
    meta = claim.get("metadata", {})
    ns = meta.get("namespace", "")
    name = meta.get("name") or meta.get("generateName", "")
    return f"{ns}/{name}" if ns else name
