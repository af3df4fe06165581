"""Server-side printing: the ``meta.k8s.io/v1`` Table that ``kubectl get`` asks for.

Columns and cells follow k8s.io/kubernetes pkg/printers/internalversion/printers.go for
built-in kinds (the server always fills the wide, priority-1 cells; kubectl hides them), and
apiextensions-apiserver's table convertor (``additionalPrinterColumns``) for custom resources.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, NotRequired, TypedDict

from gpushift.common import Kind, Obj
from gpushift_twin.apiserver._jsonpath import JsonPathError, find, go_text, parse
from gpushift_twin.apiserver._selectors import selector_string

__all__ = [
    "Table",
    "TableColumnDefinition",
    "TableRow",
    "human_duration",
    "printer_columns",
    "to_table",
]


class TableColumnDefinition(TypedDict):
    """meta/v1 TableColumnDefinition."""

    name: str
    type: str
    format: str
    description: str
    priority: int


class TableRow(TypedDict):
    """meta/v1 TableRow; ``object`` is None for ``includeObject=None``."""

    cells: list[Any]
    conditions: NotRequired[list[dict[str, str]]]
    object: dict[str, Any] | None


class Table(TypedDict):
    """meta/v1 Table."""

    kind: str
    apiVersion: str
    metadata: dict[str, Any]
    columnDefinitions: list[TableColumnDefinition]
    rows: list[TableRow]


# --- durations and timestamps -----------------------------------------------------------


def human_duration(seconds: float) -> str:
    """A duration the way kubectl prints ages (apimachinery ``duration.HumanDuration``).

    Returns e.g. ``"5s"``, ``"3m2s"``, ``"5h"``, ``"2d"``; ``"0s"`` for up to 2 s in the
    future (clock skew) and ``"<invalid>"`` beyond that.
    """
    whole = int(seconds)  # Go's int(d.Seconds()) truncates toward zero
    if whole < -1:
        return "<invalid>"
    if whole < 0:
        return "0s"
    if whole < 60 * 2:
        return f"{whole}s"
    minutes = whole // 60
    if minutes < 10:
        rest = whole % 60
        return f"{minutes}m" if rest == 0 else f"{minutes}m{rest}s"
    if minutes < 60 * 3:
        return f"{minutes}m"
    hours = whole // 3600
    if hours < 8:
        rest = minutes % 60
        return f"{hours}h" if rest == 0 else f"{hours}h{rest}m"
    if hours < 48:
        return f"{hours}h"
    if hours < 24 * 8:
        rest = hours % 24
        return f"{hours // 24}d" if rest == 0 else f"{hours // 24}d{rest}h"
    if hours < 24 * 365 * 2:
        return f"{hours // 24}d"
    if hours < 24 * 365 * 8:
        rest = (hours // 24) % 365
        years = hours // 24 // 365
        return f"{years}y" if rest == 0 else f"{years}y{rest}d"
    return f"{hours // 24 // 365}y"


def _parse_time(value: Any) -> datetime | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def _since(value: Any, now: datetime) -> str:
    """translateTimestampSince: ``<unknown>`` for a missing timestamp."""
    then = _parse_time(value)
    if then is None:
        return "<unknown>"
    return human_duration((now - then).total_seconds())


# --- column definitions -----------------------------------------------------------------

# Descriptions from the API types' swagger docs (metav1.ObjectMeta{}.SwaggerDoc()).
_NAME_DOC = (
    "Name must be unique within a namespace. Is required when creating resources, although "
    "some resources may allow a client to request the generation of an appropriate name "
    "automatically. Name is primarily intended for creation idempotence and configuration "
    "definition. Cannot be updated. More info: "
    "https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names"
)
_AGE_DOC = (
    "CreationTimestamp is a timestamp representing the server time when this object was "
    "created. It is not guaranteed to be set in happens-before order across separate "
    "operations. Clients may not set this value. It is represented in RFC3339 form and is "
    "in UTC.\n\nPopulated by the system. Read-only. Null for lists. More info: "
    "https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata"
)


def _col(
    name: str, description: str, *, type_: str = "string", fmt: str = "", priority: int = 0
) -> TableColumnDefinition:
    return {
        "name": name,
        "type": type_,
        "format": fmt,
        "description": description,
        "priority": priority,
    }


_NAME = _col("Name", _NAME_DOC, fmt="name")
_AGE = _col("Age", _AGE_DOC)
_CONTAINERS = _col("Containers", "Names of each container in the template.", priority=1)
_IMAGES = _col("Images", "Images referenced by each container in the template.", priority=1)
_SELECTOR = _col(
    "Selector",
    "Label selector for pods. Existing ReplicaSets whose pods are selected by "
    "this will be the ones affected by this deployment.",
    priority=1,
)

RowCells = Callable[[Obj, datetime], list[Any]]


@dataclass(frozen=True, slots=True)
class _Printer:
    columns: tuple[TableColumnDefinition, ...]
    cells: RowCells
    conditions: Callable[[Obj], list[dict[str, str]]] | None = None


def _get(obj: Any, *keys: str | int) -> Any:
    """A nested value, or None when any step is missing."""
    for key in keys:
        if isinstance(key, int):
            if not isinstance(obj, list) or len(obj) <= key:
                return None
            obj = obj[key]
        else:
            if not isinstance(obj, dict):
                return None
            obj = obj.get(key)
    return obj


def _list(obj: Any, *keys: str) -> list[Any]:
    value = _get(obj, *keys)
    return value if isinstance(value, list) else []


def _map(obj: Any, *keys: str) -> dict[str, Any]:
    value = _get(obj, *keys)
    return value if isinstance(value, dict) else {}


def _int(value: Any, default: int = 0) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else default


def _name(obj: Obj) -> str:
    return str(_get(obj, "metadata", "name") or "")


def _age(obj: Obj, now: datetime) -> str:
    return _since(_get(obj, "metadata", "creationTimestamp"), now)


def _format_labels(labels: dict[str, Any]) -> str:
    """labels.FormatLabels: sorted ``k=v`` pairs, ``<none>`` when empty."""
    if not labels:
        return "<none>"
    return ",".join(f"{k}={labels[k]}" for k in sorted(labels))


def _containers(template_spec: Any) -> tuple[str, str]:
    """layoutContainerCells: container names and images, comma-separated."""
    containers = _list(template_spec, "containers")
    names = ",".join(str(_get(c, "name") or "") for c in containers)
    images = ",".join(str(_get(c, "image") or "") for c in containers)
    return names, images


# --- built-in printers ------------------------------------------------------------------


def _restartable_init(container: Any) -> bool:
    return bool(_get(container, "restartPolicy") == "Always")


def _pod_cells(pod: Obj, now: datetime) -> list[Any]:
    # printPod in pkg/printers/internalversion/printers.go
    spec, status = _map(pod, "spec"), _map(pod, "status")
    containers = _list(spec, "containers")
    init_specs = {str(_get(c, "name")): c for c in _list(spec, "initContainers")}
    total = len(containers) + sum(1 for c in init_specs.values() if _restartable_init(c))
    ready = 0
    restarts = 0
    restartable_restarts = 0
    last_restart: datetime | None = None
    last_restartable: datetime | None = None
    phase = str(status.get("phase") or "")
    reason = str(status.get("reason") or phase)
    conditions = _list(status, "conditions")
    for condition in conditions:
        if _get(condition, "type") == "PodScheduled" and _get(condition, "reason") == (
            "SchedulingGated"
        ):
            reason = "SchedulingGated"

    def later(current: datetime | None, container: Any) -> datetime | None:
        finished = _parse_time(_get(container, "lastState", "terminated", "finishedAt"))
        if finished is not None and (current is None or finished > current):
            return finished
        return current

    initializing = False
    init_statuses = _list(status, "initContainerStatuses")
    for index, container in enumerate(init_statuses):
        restarts += _int(_get(container, "restartCount"))
        last_restart = later(last_restart, container)
        restartable = _restartable_init(init_specs.get(str(_get(container, "name"))))
        if restartable:
            restartable_restarts += _int(_get(container, "restartCount"))
            last_restartable = later(last_restartable, container)
        terminated = _get(container, "state", "terminated")
        waiting = _get(container, "state", "waiting")
        if isinstance(terminated, dict) and _int(terminated.get("exitCode")) == 0:
            continue
        if restartable and _get(container, "started") is True:
            if _get(container, "ready") is True:
                ready += 1
            continue
        if isinstance(terminated, dict):
            if terminated.get("reason"):
                reason = f"Init:{terminated['reason']}"
            elif _int(terminated.get("signal")):
                reason = f"Init:Signal:{terminated['signal']}"
            else:
                reason = f"Init:ExitCode:{_int(terminated.get('exitCode'))}"
        elif (
            isinstance(waiting, dict)
            and waiting.get("reason")
            and waiting.get("reason") != "PodInitializing"
        ):
            reason = f"Init:{waiting['reason']}"
        else:
            reason = f"Init:{index}/{len(init_specs)}"
        initializing = True
        break

    initialized = any(
        _get(c, "type") == "Initialized" and _get(c, "status") == "True" for c in conditions
    )
    if not initializing or initialized:
        restarts = restartable_restarts
        last_restart = last_restartable
        has_running = False
        for container in reversed(_list(status, "containerStatuses")):
            restarts += _int(_get(container, "restartCount"))
            last_restart = later(last_restart, container)
            waiting = _get(container, "state", "waiting")
            terminated = _get(container, "state", "terminated")
            if isinstance(waiting, dict) and waiting.get("reason"):
                reason = str(waiting["reason"])
            elif isinstance(terminated, dict) and terminated.get("reason"):
                reason = str(terminated["reason"])
            elif isinstance(terminated, dict):
                if _int(terminated.get("signal")):
                    reason = f"Signal:{terminated['signal']}"
                else:
                    reason = f"ExitCode:{_int(terminated.get('exitCode'))}"
            elif _get(container, "ready") is True and isinstance(
                _get(container, "state", "running"), dict
            ):
                has_running = True
                ready += 1
        if reason == "Completed" and has_running:
            pod_ready = any(
                _get(c, "type") == "Ready" and _get(c, "status") == "True" for c in conditions
            )
            reason = "Running" if pod_ready else "NotReady"

    deleting = _get(pod, "metadata", "deletionTimestamp") is not None
    if deleting and status.get("reason") == "NodeLost":
        reason = "Unknown"
    elif deleting and phase not in ("Succeeded", "Failed"):
        reason = "Terminating"

    restarts_cell = str(restarts)
    if restarts and last_restart is not None:
        restarts_cell = f"{restarts} ({human_duration((now - last_restart).total_seconds())} ago)"

    pod_ips = _list(status, "podIPs")
    ip = str(_get(pod_ips, 0, "ip") or "") or "<none>"
    node = str(spec.get("nodeName") or "") or "<none>"
    nominated = str(status.get("nominatedNodeName") or "") or "<none>"
    gates = _list(spec, "readinessGates")
    readiness = "<none>"
    if gates:
        true_count = 0
        for gate in gates:
            wanted = _get(gate, "conditionType")
            for condition in conditions:
                if _get(condition, "type") == wanted:
                    true_count += _get(condition, "status") == "True"
                    break
        readiness = f"{true_count}/{len(gates)}"
    return [
        _name(pod),
        f"{ready}/{total}",
        reason,
        restarts_cell,
        _age(pod, now),
        ip,
        node,
        nominated,
        readiness,
    ]


def _pod_conditions(pod: Obj) -> list[dict[str, str]]:
    # podSuccessConditions / podFailedConditions
    phase = _get(pod, "status", "phase")
    if phase == "Succeeded":
        return [
            {
                "type": "Completed",
                "status": "True",
                "reason": "Succeeded",
                "message": "The pod has completed successfully.",
            }
        ]
    if phase == "Failed":
        return [
            {
                "type": "Completed",
                "status": "True",
                "reason": "Failed",
                "message": "The pod failed.",
            }
        ]
    return []


def _node_cells(node: Obj, now: datetime) -> list[Any]:
    status: list[str] = []
    for condition in _list(node, "status", "conditions"):
        if _get(condition, "type") == "Ready":
            status = ["Ready" if _get(condition, "status") == "True" else "NotReady"]
    if not status:
        status = ["Unknown"]
    if _get(node, "spec", "unschedulable") is True:
        status.append("SchedulingDisabled")
    roles: set[str] = set()
    for key, value in _map(node, "metadata", "labels").items():
        if key.startswith("node-role.kubernetes.io/"):
            role = key[len("node-role.kubernetes.io/") :]
            if role:
                roles.add(role)
        elif key == "kubernetes.io/role" and value:
            roles.add(str(value))
    info = _map(node, "status", "nodeInfo")

    def address(kind: str) -> str:
        for item in _list(node, "status", "addresses"):
            if _get(item, "type") == kind:
                return str(_get(item, "address") or "")
        return "<none>"

    return [
        _name(node),
        ",".join(status),
        ",".join(sorted(roles)) or "<none>",
        _age(node, now),
        str(info.get("kubeletVersion") or ""),
        address("InternalIP"),
        address("ExternalIP"),
        str(info.get("osImage") or "") or "<unknown>",
        str(info.get("kernelVersion") or "") or "<unknown>",
        str(info.get("containerRuntimeVersion") or "") or "<unknown>",
    ]


def _replicas(obj: Obj) -> int:
    # The server defaults spec.replicas to 1.
    return _int(_get(obj, "spec", "replicas"), 1)


def _deployment_cells(obj: Obj, now: datetime) -> list[Any]:
    status = _map(obj, "status")
    names, images = _containers(_get(obj, "spec", "template", "spec"))
    return [
        _name(obj),
        f"{_int(status.get('readyReplicas'))}/{_replicas(obj)}",
        _int(status.get("updatedReplicas")),
        _int(status.get("availableReplicas")),
        _age(obj, now),
        names,
        images,
        selector_string(_get(obj, "spec", "selector")),
    ]


def _replicaset_cells(obj: Obj, now: datetime) -> list[Any]:
    status = _map(obj, "status")
    names, images = _containers(_get(obj, "spec", "template", "spec"))
    return [
        _name(obj),
        _replicas(obj),
        _int(status.get("replicas")),
        _int(status.get("readyReplicas")),
        _age(obj, now),
        names,
        images,
        selector_string(_get(obj, "spec", "selector")),
    ]


def _statefulset_cells(obj: Obj, now: datetime) -> list[Any]:
    names, images = _containers(_get(obj, "spec", "template", "spec"))
    ready = _int(_get(obj, "status", "readyReplicas"))
    return [_name(obj), f"{ready}/{_replicas(obj)}", _age(obj, now), names, images]


def _daemonset_cells(obj: Obj, now: datetime) -> list[Any]:
    status = _map(obj, "status")
    names, images = _containers(_get(obj, "spec", "template", "spec"))
    return [
        _name(obj),
        _int(status.get("desiredNumberScheduled")),
        _int(status.get("currentNumberScheduled")),
        _int(status.get("numberReady")),
        _int(status.get("updatedNumberScheduled")),
        _int(status.get("numberAvailable")),
        _format_labels(_map(obj, "spec", "template", "spec", "nodeSelector")),
        _age(obj, now),
        names,
        images,
        selector_string(_get(obj, "spec", "selector")),
    ]


def _namespace_cells(obj: Obj, now: datetime) -> list[Any]:
    return [_name(obj), str(_get(obj, "status", "phase") or ""), _age(obj, now)]


def _configmap_cells(obj: Obj, now: datetime) -> list[Any]:
    count = len(_map(obj, "data")) + len(_map(obj, "binaryData"))
    return [_name(obj), count, _age(obj, now)]


def _secret_cells(obj: Obj, now: datetime) -> list[Any]:
    # stringData is folded into data on write; count each key once.
    keys = set(_map(obj, "data")) | set(_map(obj, "stringData"))
    return [_name(obj), str(obj.get("type") or "Opaque"), len(keys), _age(obj, now)]


def _service_cells(obj: Obj, now: datetime) -> list[Any]:
    spec = _map(obj, "spec")
    kind = str(spec.get("type") or "ClusterIP")
    cluster_ips = _list(spec, "clusterIPs") or (
        [spec["clusterIP"]] if spec.get("clusterIP") else []
    )
    internal = str(cluster_ips[0]) if cluster_ips else "<none>"
    external_ips = [str(ip) for ip in _list(spec, "externalIPs")]
    if kind in ("ClusterIP", "NodePort"):
        external = ",".join(external_ips) or "<none>"
    elif kind == "LoadBalancer":
        ingress = [
            str(_get(i, "ip") or _get(i, "hostname") or "")
            for i in _list(obj, "status", "loadBalancer", "ingress")
        ]
        ingress = [i for i in ingress if i]
        external = ",".join(ingress + external_ips) or "<pending>"
    elif kind == "ExternalName":
        external = str(spec.get("externalName") or "")
    else:
        external = "<unknown>"
    ports = []
    for port in _list(spec, "ports"):
        protocol = str(_get(port, "protocol") or "TCP")
        node_port = _int(_get(port, "nodePort"))
        number = _int(_get(port, "port"))
        ports.append(
            f"{number}:{node_port}/{protocol}" if node_port > 0 else f"{number}/{protocol}"
        )
    return [
        _name(obj),
        kind,
        internal,
        external,
        ",".join(ports) or "<none>",
        _age(obj, now),
        _format_labels(_map(spec, "selector")),
    ]


def _event_view(obj: Obj) -> Obj:
    """An events.k8s.io/v1 Event seen through core/v1 field names (the internal type)."""
    if "regarding" not in obj and "note" not in obj and "deprecatedSource" not in obj:
        return obj
    return {
        "metadata": obj.get("metadata"),
        "involvedObject": obj.get("regarding") or {},
        "reason": obj.get("reason"),
        "message": obj.get("note"),
        "type": obj.get("type"),
        "source": obj.get("deprecatedSource") or {},
        "firstTimestamp": obj.get("deprecatedFirstTimestamp"),
        "lastTimestamp": obj.get("deprecatedLastTimestamp"),
        "count": obj.get("deprecatedCount"),
        "eventTime": obj.get("eventTime"),
        "series": obj.get("series"),
        "reportingComponent": obj.get("reportingController"),
        "reportingInstance": obj.get("reportingInstance"),
    }


def _event_cells(raw: Obj, now: datetime) -> list[Any]:
    obj = _event_view(raw)
    first = _since(obj.get("firstTimestamp"), now)
    if _parse_time(obj.get("firstTimestamp")) is None:
        first = _since(obj.get("eventTime"), now)
    last = _since(obj.get("lastTimestamp"), now)
    if _parse_time(obj.get("lastTimestamp")) is None:
        last = first
    count = _int(obj.get("count"))
    series = obj.get("series")
    if isinstance(series, dict):
        last = _since(series.get("lastObservedTime"), now)
        count = _int(series.get("count"))
    elif count == 0:
        count = 1  # singleton events carry no count in the new API
    involved = _map(obj, "involvedObject")
    kind = str(involved.get("kind") or "").lower()
    target = f"{kind}/{involved['name']}" if involved.get("name") else kind
    component = str(_get(obj, "source", "component") or obj.get("reportingComponent") or "")
    instance = str(_get(obj, "source", "host") or obj.get("reportingInstance") or "")
    source = f"{component}, {instance}" if instance else component
    return [
        last,
        str(obj.get("type") or ""),
        str(obj.get("reason") or ""),
        target,
        str(involved.get("fieldPath") or ""),
        source,
        str(obj.get("message") or "").strip(),
        first,
        count,
        _name(raw),
    ]


def _claim_state(obj: Obj) -> str:
    states: list[str] = []
    deleting = _get(obj, "metadata", "deletionTimestamp") is not None
    if deleting:
        states.append("deleted")
    if _get(obj, "status", "allocation") is None:
        if not deleting:
            states.append("pending")
    else:
        states.append("allocated")
        if _list(obj, "status", "reservedFor"):
            states.append("reserved")
        elif deleting:
            states.append("deallocating")
    return ",".join(states)


def _claim_cells(obj: Obj, now: datetime) -> list[Any]:
    return [_name(obj), _claim_state(obj), _age(obj, now)]


def _slice_cells(obj: Obj, now: datetime) -> list[Any]:
    spec = _map(obj, "spec")
    return [
        _name(obj),
        str(spec.get("nodeName") or ""),
        str(spec.get("driver") or ""),
        str(_get(spec, "pool", "name") or ""),
        _age(obj, now),
    ]


def _name_age(obj: Obj, now: datetime) -> list[Any]:
    return [_name(obj), _age(obj, now)]


def _created_at(obj: Obj, now: datetime) -> list[Any]:
    # rest.defaultTableConvertor: the creation time in RFC 3339, not an age.
    created = _parse_time(_get(obj, "metadata", "creationTimestamp"))
    stamp = (
        created.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        if created
        else "0001-01-01T00:00:00Z"
    )
    return [_name(obj), stamp]


def _serviceaccount_cells(obj: Obj, now: datetime) -> list[Any]:
    return [_name(obj), len(_list(obj, "secrets")), _age(obj, now)]


def _endpoints_cells(obj: Obj, now: datetime) -> list[Any]:
    # formatEndpoints: up to three addresses, then "+ N more...".
    shown: list[str] = []
    count = 0
    for subset in _list(obj, "subsets"):
        addresses = [str(_get(a, "ip") or "") for a in _list(subset, "addresses")]
        ports = _list(subset, "ports")
        pairs = (
            [(ip, None) for ip in addresses]
            if not ports
            else [(ip, _int(_get(p, "port"))) for p in ports for ip in addresses]
        )
        count += len(pairs)
        for ip, port in pairs:
            if len(shown) < 3:
                host = f"[{ip}]" if ":" in ip and port is not None else ip
                shown.append(host if port is None else f"{host}:{port}")
    if not _list(obj, "subsets"):
        text = "<none>"
    else:
        text = ",".join(shown) + (f" + {count - 3} more..." if count > 3 else "")
    return [_name(obj), text, _age(obj, now)]


def _lease_cells(obj: Obj, now: datetime) -> list[Any]:
    return [_name(obj), str(_get(obj, "spec", "holderIdentity") or ""), _age(obj, now)]


def _runtimeclass_cells(obj: Obj, now: datetime) -> list[Any]:
    return [_name(obj), str(obj.get("handler") or ""), _age(obj, now)]


def _binding_cells(obj: Obj, now: datetime) -> list[Any]:
    ref = _map(obj, "roleRef")
    users, groups, accounts = [], [], []
    for subject in _list(obj, "subjects"):
        kind, name = _get(subject, "kind"), str(_get(subject, "name") or "")
        if kind == "User":
            users.append(name)
        elif kind == "Group":
            groups.append(name)
        elif kind == "ServiceAccount":
            accounts.append(f"{_get(subject, 'namespace') or ''}:{name}")
    return [
        _name(obj),
        f"{ref.get('kind', '')}/{ref.get('name', '')}",
        _age(obj, now),
        ", ".join(users),
        ", ".join(groups),
        ", ".join(accounts),
    ]


_WORKLOAD_READY = _col("Ready", "Number of the pod with ready state")
_CREATED_AT = _col("Created At", _AGE_DOC, type_="date")

_PRINTERS: dict[tuple[str, str], _Printer] = {
    ("", "Pod"): _Printer(
        (
            _NAME,
            _col("Ready", "The aggregate readiness state of this pod for accepting traffic."),
            _col("Status", "The aggregate status of the containers in this pod."),
            _col(
                "Restarts",
                "The number of times the containers in this pod have been restarted and when "
                "the last container in this pod has restarted.",
            ),
            _AGE,
            _col(
                "IP",
                "IP address allocated to the pod. Routable at least within the cluster.",
                priority=1,
            ),
            _col("Node", "Name of the node this pod is scheduled to.", priority=1),
            _col(
                "Nominated Node",
                "Name of the node the scheduler nominated for preemption.",
                priority=1,
            ),
            _col("Readiness Gates", "Pod readiness gates that are true, of all.", priority=1),
        ),
        _pod_cells,
        _pod_conditions,
    ),
    ("", "Node"): _Printer(
        (
            _NAME,
            _col("Status", "The status of the node"),
            _col("Roles", "The roles of the node"),
            _AGE,
            _col("Version", "Kubelet Version reported by the node."),
            _col("Internal-IP", "List of addresses reachable to the node.", priority=1),
            _col("External-IP", "List of addresses reachable to the node.", priority=1),
            _col("OS-Image", "OS Image reported by the node from /etc/os-release.", priority=1),
            _col("Kernel-Version", "Kernel Version reported by the node.", priority=1),
            _col("Container-Runtime", "ContainerRuntime Version reported by the node.", priority=1),
        ),
        _node_cells,
    ),
    ("apps", "Deployment"): _Printer(
        (
            _NAME,
            _WORKLOAD_READY,
            _col(
                "Up-to-date",
                "Total number of non-terminated pods targeted by this deployment that have the "
                "desired template spec.",
            ),
            _col(
                "Available",
                "Total number of available pods (ready for at least minReadySeconds) targeted by "
                "this deployment.",
            ),
            _AGE,
            _CONTAINERS,
            _IMAGES,
            _SELECTOR,
        ),
        _deployment_cells,
    ),
    ("apps", "ReplicaSet"): _Printer(
        (
            _NAME,
            _col("Desired", "Replicas is the number of desired pods.", type_="integer"),
            _col(
                "Current",
                "Replicas is the most recently observed number of replicas.",
                type_="integer",
            ),
            _col("Ready", "The number of ready replicas for this replica set.", type_="integer"),
            _AGE,
            _CONTAINERS,
            _IMAGES,
            _SELECTOR,
        ),
        _replicaset_cells,
    ),
    ("apps", "StatefulSet"): _Printer(
        (_NAME, _WORKLOAD_READY, _AGE, _CONTAINERS, _IMAGES), _statefulset_cells
    ),
    ("apps", "DaemonSet"): _Printer(
        (
            _NAME,
            _col(
                "Desired",
                "The total number of nodes that should be running the daemon pod.",
                type_="integer",
            ),
            _col(
                "Current",
                "The number of nodes that are running at least 1 daemon pod and are supposed to "
                "run the daemon pod.",
                type_="integer",
            ),
            _col(
                "Ready",
                "The number of nodes that should be running the daemon pod and have one or more "
                "of the daemon pod running and ready.",
                type_="integer",
            ),
            _col(
                "Up-to-date",
                "The total number of nodes that are running updated daemon pod",
                type_="integer",
            ),
            _col(
                "Available",
                "The number of nodes that should be running the daemon pod and have one or more "
                "of the daemon pod running and available.",
                type_="integer",
            ),
            _col(
                "Node Selector",
                "NodeSelector is a selector which must be true for the pod to fit on a node.",
            ),
            _AGE,
            _CONTAINERS,
            _IMAGES,
            _SELECTOR,
        ),
        _daemonset_cells,
    ),
    ("", "Namespace"): _Printer(
        (_NAME, _col("Status", "The status of the namespace"), _AGE), _namespace_cells
    ),
    ("", "ConfigMap"): _Printer(
        (_NAME, _col("Data", "Data contains the configuration data."), _AGE), _configmap_cells
    ),
    ("", "Secret"): _Printer(
        (
            _NAME,
            _col("Type", "Used to facilitate programmatic handling of secret data."),
            _col("Data", "Data contains the secret data."),
            _AGE,
        ),
        _secret_cells,
    ),
    ("", "Service"): _Printer(
        (
            _NAME,
            _col("Type", "type determines how the Service is exposed."),
            _col("Cluster-IP", "clusterIP is the IP address of the service."),
            _col(
                "External-IP",
                "externalIPs is a list of IP addresses for which nodes in the cluster will also "
                "accept traffic for this service.",
            ),
            _col("Port(s)", "The list of ports that are exposed by this service."),
            _AGE,
            _col(
                "Selector",
                "Route service traffic to pods with label keys and values matching this selector.",
                priority=1,
            ),
        ),
        _service_cells,
    ),
    ("", "ServiceAccount"): _Printer(
        (
            _NAME,
            _col(
                "Secrets",
                "Secrets is a list of the secrets in the same namespace that pods running using "
                "this ServiceAccount are allowed to use.",
            ),
            _AGE,
        ),
        _serviceaccount_cells,
    ),
    ("", "Endpoints"): _Printer(
        (_NAME, _col("Endpoints", "Endpoints of this service"), _AGE), _endpoints_cells
    ),
    ("coordination.k8s.io", "Lease"): _Printer(
        (_NAME, _col("Holder", "The holder of the lease"), _AGE), _lease_cells
    ),
    ("node.k8s.io", "RuntimeClass"): _Printer(
        (
            _NAME,
            _col(
                "Handler",
                "Handler specifies the underlying runtime and configuration that the CRI "
                "implementation will use to handle pods of this class.",
            ),
            _AGE,
        ),
        _runtimeclass_cells,
    ),
    ("resource.k8s.io", "ResourceClaim"): _Printer(
        (
            _NAME,
            _col("State", "A summary of the current state (allocated, pending, reserved, etc.)."),
            _AGE,
        ),
        _claim_cells,
    ),
    ("resource.k8s.io", "ResourceSlice"): _Printer(
        (
            _NAME,
            _col("Node", "The node running the driver."),
            _col("Driver", "The driver that produced this ResourceSlice."),
            _col("Pool", "The pool that this ResourceSlice belongs to."),
            _AGE,
        ),
        _slice_cells,
    ),
    ("resource.k8s.io", "DeviceClass"): _Printer((_NAME, _AGE), _name_age),
    ("resource.k8s.io", "ResourceClaimTemplate"): _Printer((_NAME, _AGE), _name_age),
    ("apiextensions.k8s.io", "CustomResourceDefinition"): _Printer(
        (_NAME, _CREATED_AT), _created_at
    ),
    ("rbac.authorization.k8s.io", "ClusterRole"): _Printer((_NAME, _CREATED_AT), _created_at),
    ("rbac.authorization.k8s.io", "Role"): _Printer((_NAME, _CREATED_AT), _created_at),
}

_EVENT = _Printer(
    (
        _col(
            "Last Seen", "The time at which the most recent occurrence of this event was recorded."
        ),
        _col(
            "Type", "Type of this event (Normal, Warning), new types could be added in the future"
        ),
        _col(
            "Reason",
            "This should be a short, machine understandable string that gives the reason for the "
            "transition into the object's current status.",
        ),
        _col("Object", "The object that this event is about."),
        _col(
            "Subobject",
            "If referring to a piece of an object instead of an entire object, this string "
            "should contain a valid JSON/Go field access statement.",
            priority=1,
        ),
        _col(
            "Source",
            "The component reporting this event. Should be a short machine understandable string.",
            priority=1,
        ),
        _col("Message", "A human-readable description of the status of this operation."),
        _col(
            "First Seen",
            "The time at which the event was first recorded. (Time of server receipt is in "
            "TypeMeta.)",
            priority=1,
        ),
        _col("Count", "The number of times this event has occurred.", priority=1),
        _col("Name", _NAME_DOC, fmt="name", priority=1),
    ),
    _event_cells,
)
_PRINTERS[("", "Event")] = _EVENT
_PRINTERS[("events.k8s.io", "Event")] = _EVENT

_BINDING = _Printer(
    (
        _NAME,
        _col(
            "Role",
            "RoleRef can reference a Role in the current namespace or a ClusterRole in the "
            "global namespace.",
        ),
        _AGE,
        _col("Users", "Users in the binding", priority=1),
        _col("Groups", "Groups in the binding", priority=1),
        _col("ServiceAccounts", "ServiceAccounts in the binding", priority=1),
    ),
    _binding_cells,
)
_PRINTERS[("rbac.authorization.k8s.io", "RoleBinding")] = _BINDING
_PRINTERS[("rbac.authorization.k8s.io", "ClusterRoleBinding")] = _BINDING

# pkg/printers/internalversion/printers.go: storage and batch kinds.
_MODES = {
    "ReadWriteOnce": "RWO",
    "ReadOnlyMany": "ROX",
    "ReadWriteMany": "RWX",
    "ReadWriteOncePod": "RWOP",
}


def _access_modes(modes: Any) -> str:
    return ",".join(_MODES.get(str(m), str(m)) for m in modes or [])


def _pvc_cells(obj: Obj, now: datetime) -> list[Any]:
    st = _map(obj, "status")
    bound = st.get("phase") == "Bound"
    return [
        _name(obj),
        str(st.get("phase") or "Pending"),
        str(_get(obj, "spec", "volumeName") or ""),
        str(_map(st, "capacity").get("storage", "")) if bound else "",
        _access_modes(st.get("accessModes")) if bound else "",
        str(_get(obj, "spec", "storageClassName") or ""),
        str(_get(obj, "spec", "volumeAttributesClassName") or "<unset>"),
        _age(obj, now),
        str(_get(obj, "spec", "volumeMode") or "Filesystem"),
    ]


def _pv_cells(obj: Obj, now: datetime) -> list[Any]:
    ref = _map(obj, "spec", "claimRef")
    claim = f"{ref.get('namespace')}/{ref.get('name')}" if ref.get("name") else ""
    return [
        _name(obj),
        str(_map(obj, "spec", "capacity").get("storage", "")),
        _access_modes(_get(obj, "spec", "accessModes")),
        str(_get(obj, "spec", "persistentVolumeReclaimPolicy") or ""),
        str(_get(obj, "status", "phase") or ""),
        claim,
        str(_get(obj, "spec", "storageClassName") or ""),
        str(_get(obj, "spec", "volumeAttributesClassName") or "<unset>"),
        str(_get(obj, "status", "reason") or ""),
        _age(obj, now),
        str(_get(obj, "spec", "volumeMode") or "Filesystem"),
    ]


def _job_status(obj: Obj) -> str:
    for c in _list(obj, "status", "conditions"):
        if c.get("status") == "True" and c.get("type") in ("Complete", "Failed"):
            return str(c["type"])
    return "Running"


def _job_cells(obj: Obj, now: datetime) -> list[Any]:
    st = _map(obj, "status")
    want = _get(obj, "spec", "completions")
    done = _int(st.get("succeeded"))
    parallelism = _int(_get(obj, "spec", "parallelism"))
    if want is not None:
        completions = f"{done}/{want}"
    else:
        completions = f"{done}/1 of {parallelism}" if parallelism > 1 else f"{done}/1"
    start, end = _parse_time(st.get("startTime")), _parse_time(st.get("completionTime"))
    duration = human_duration(((end or now) - start).total_seconds()) if start else ""
    names, images = _containers(_get(obj, "spec", "template", "spec"))
    return [
        _name(obj),
        _job_status(obj),
        completions,
        duration,
        _age(obj, now),
        names,
        images,
        selector_string(_get(obj, "spec", "selector")),
    ]


def _cronjob_cells(obj: Obj, now: datetime) -> list[Any]:
    spec = _map(obj, "spec")
    last = _map(obj, "status").get("lastScheduleTime")
    names, images = _containers(_get(spec, "jobTemplate", "spec", "template", "spec"))
    return [
        _name(obj),
        str(spec.get("schedule") or ""),
        str(spec.get("timeZone") or "<none>"),
        "True" if spec.get("suspend") is True else "False",
        len(_list(obj, "status", "active")),
        _since(last, now) if last else "<none>",
        _age(obj, now),
        names,
        images,
        selector_string(_get(spec, "jobTemplate", "spec", "selector")),
    ]


_VAC = _col("VolumeAttributesClass", "VolumeAttributesClass of the volume.")
_VOLUME_MODE = _col("VolumeMode", "The volume mode of the volume.", priority=1)
_PRINTERS[("", "PersistentVolumeClaim")] = _Printer(
    (
        _NAME,
        _col("Status", "The status of the claim."),
        _col("Volume", "The volume bound to the claim."),
        _col("Capacity", "The capacity of the volume."),
        _col("Access Modes", "The access modes of the volume."),
        _col("StorageClass", "The storage class of the claim."),
        _VAC,
        _AGE,
        _VOLUME_MODE,
    ),
    _pvc_cells,
)
_PRINTERS[("", "PersistentVolume")] = _Printer(
    (
        _NAME,
        _col("Capacity", "The capacity of the volume."),
        _col("Access Modes", "The access modes of the volume."),
        _col("Reclaim Policy", "What happens to the volume when its claim goes."),
        _col("Status", "The phase of the volume."),
        _col("Claim", "The claim bound to the volume."),
        _col("StorageClass", "The storage class of the volume."),
        _VAC,
        _col("Reason", "Why the volume is in its phase."),
        _AGE,
        _VOLUME_MODE,
    ),
    _pv_cells,
)
_PRINTERS[("batch", "Job")] = _Printer(
    (
        _NAME,
        _col("Status", "Status of the job."),
        _col("Completions", "The completion status of the job."),
        _col("Duration", "Time required to complete the job."),
        _AGE,
        _CONTAINERS,
        _IMAGES,
        _col("Selector", "Label selector for the job's pods.", priority=1),
    ),
    _job_cells,
)
_PRINTERS[("batch", "CronJob")] = _Printer(
    (
        _NAME,
        _col("Schedule", "The schedule in Cron format."),
        _col("Timezone", "The time zone of the schedule."),
        _col("Suspend", "Whether later runs are suspended."),
        _col("Active", "The number of running jobs."),
        _col("Last Schedule", "When the job was last scheduled."),
        _AGE,
        _CONTAINERS,
        _IMAGES,
        _col("Selector", "Label selector for the jobs' pods.", priority=1),
    ),
    _cronjob_cells,
)

# Built-in kinds without a printer above: name and age.
_DEFAULT = _Printer((_NAME, _AGE), _name_age)


# --- custom resources -------------------------------------------------------------------

_DEFAULT_CR_COLUMN = {
    "name": "Age",
    "type": "date",
    "description": _AGE_DOC,
    "jsonPath": ".metadata.creationTimestamp",
}


def printer_columns(crd: dict[str, Any], version: str) -> list[dict[str, Any]]:
    """The ``additionalPrinterColumns`` a CRD declares for ``version``.

    Returns upstream's default (one ``Age`` date column on ``.metadata.creationTimestamp``)
    when the version declares none (serveDefaultColumnsIfEmpty), and an empty list when
    the CRD does not serve ``version``.
    """
    for entry in _list(crd, "spec", "versions"):
        if _get(entry, "name") == version:
            columns = [c for c in _list(entry, "additionalPrinterColumns") if isinstance(c, dict)]
            if columns:
                return columns
            return [dict(_DEFAULT_CR_COLUMN)]
    return []


def _custom_cell(column: dict[str, Any], obj: Obj, now: datetime) -> Any:
    """One cell of an additional printer column (tableconvertor.cellForJSONValue)."""
    try:
        results = find(obj, parse(str(column.get("jsonPath") or "")))
    except JsonPathError:
        return None
    if not results or results[0] is None:
        return None
    value = results[0]
    kind = column.get("type")
    if kind == "string":
        return go_text(value)
    if kind == "integer" and isinstance(value, (int, float)) and not isinstance(value, bool):
        return int(value)
    if kind == "number" and isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    if kind == "boolean" and isinstance(value, bool):
        return value
    if kind == "date" and isinstance(value, str):
        then = _parse_time(value)
        return "<invalid>" if then is None else human_duration((now - then).total_seconds())
    return None


def _custom_printer(columns: list[dict[str, Any]]) -> _Printer:
    definitions: list[TableColumnDefinition] = [_NAME]
    for column in columns:
        description = str(column.get("description") or "") or (
            f"Custom resource definition column (in JSONPath format): {column.get('jsonPath')}"
        )
        definitions.append(
            _col(
                str(column.get("name") or ""),
                description,
                type_=str(column.get("type") or "string"),
                fmt=str(column.get("format") or ""),
                priority=_int(column.get("priority")),
            )
        )

    def cells(obj: Obj, now: datetime) -> list[Any]:
        return [_name(obj), *(_custom_cell(c, obj, now) for c in columns)]

    return _Printer(tuple(definitions), cells)


# --- the table --------------------------------------------------------------------------


def to_table(
    kind: Kind,
    objects: list[dict[str, Any]],
    *,
    now: datetime,
    include_object: str = "Metadata",
    columns: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """The Table for ``objects`` of ``kind``, as of ``now`` (for the ages).

    Built-in kinds use their kubectl printer; a custom resource uses ``columns`` (its CRD's
    printer columns, see ``printer_columns``), or upstream's default Age column. Cells of
    priority-1 columns are always filled, as the server does. ``include_object`` is the
    ``includeObject`` parameter: ``Metadata`` puts a PartialObjectMetadata in each row,
    ``Object`` the object, ``None`` nothing. Returns the Table body with empty ``metadata``
    for the caller to fill (resourceVersion, continue).
    """
    if now.tzinfo is None:
        now = now.replace(tzinfo=UTC)
    if kind.builtin:
        printer = _PRINTERS.get((kind.group, kind.kind), _DEFAULT)
    else:
        printer = _custom_printer(columns or [dict(_DEFAULT_CR_COLUMN)])
    rows: list[TableRow] = []
    for obj in objects:
        row: TableRow = {
            "cells": printer.cells(obj, now),
            "object": _row_object(obj, include_object),
        }
        conditions = printer.conditions(obj) if printer.conditions else []
        if conditions:
            row = {"cells": row["cells"], "conditions": conditions, "object": row["object"]}
        rows.append(row)
    table: Table = {
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": {},
        "columnDefinitions": [dict(c) for c in printer.columns],  # type: ignore[misc]
        "rows": rows,
    }
    return dict(table)


def _row_object(obj: Obj, include: str) -> dict[str, Any] | None:
    if include == "None":
        return None
    if include == "Object":
        return obj
    return {
        "kind": "PartialObjectMetadata",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": obj.get("metadata") or {},
    }
