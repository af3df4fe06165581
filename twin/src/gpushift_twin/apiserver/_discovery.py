"""Discovery documents: ``/version``, ``/api``, ``/apis``, group-version resource lists and the
aggregated form (``apidiscovery.k8s.io/v2``) kubectl asks for first.

Shapes mirror k8s.io/apimachinery/pkg/apis/meta/v1 (APIVersions, APIGroupList, APIResourceList)
and k8s.io/api/apidiscovery/v2.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable

from gpushift.common import Kind, Obj, UsageError

#: The Kubernetes release the twin answers as, by default: the release the move targets
#: (DRA extended-resource bridging is GA in 1.37). API server and kubelets report the same.
DEFAULT_KUBERNETES_VERSION = "1.37.0"
_RELEASE = re.compile(r"^v?1\.(?P<minor>[0-9]{1,3})(?:\.(?P<patch>[0-9]{1,3}))?$")


def parse_kubernetes_version(text: str) -> str:
    """``1.N.P`` from ``1.N``, ``1.N.P`` or ``v1.N.P``; resource.k8s.io/v1 needs 1.34 or later.

    Raises ``UsageError`` for anything else.
    """
    m = _RELEASE.match(text.strip())
    if m is None or int(m.group("minor")) < 34:
        raise UsageError(
            f"--kubernetes-version: want 1.N or 1.N.P with N >= 34 (resource.k8s.io/v1), "
            f"got {text!r}"
        )
    return f"1.{int(m.group('minor'))}.{int(m.group('patch') or 0)}"


def version_info(version: str = DEFAULT_KUBERNETES_VERSION) -> Obj:
    """The ``/version`` body of a release (k8s.io/apimachinery/pkg/version.Info)."""
    minor = version.split(".")[1]
    return {
        "major": "1",
        "minor": minor,
        "emulationMajor": "1",
        "emulationMinor": minor,
        "minCompatibilityMajor": "1",
        "minCompatibilityMinor": str(int(minor) - 1),
        "gitVersion": f"v{version}",
        "gitCommit": "0000000000000000000000000000000000000000",
        "gitTreeState": "clean",
        "buildDate": "2026-08-26T00:00:00Z",
        "goVersion": "go1.25.0",
        "compiler": "gc",
        "platform": "linux/amd64",
    }


VERSION: Obj = version_info()

#: Served at ``/twin/v1`` by every twin and by no Kubernetes API server: the twin-only
#: commands (``twin git-set``, ``twin check-invariants``, ``twin export``) read it first and
#: refuse a server that does not answer it.
TWIN_MARKER_PATH = "/twin/v1"
TWIN_MARKER: Obj = {"kind": "TwinInfo", "apiVersion": "twin.gpushift.dev/v1", "twin": True}

AGGREGATED_V2 = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
VERBS = ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]
_SUB_VERBS = {
    "status": ["get", "patch", "update"],
    "scale": ["get", "patch", "update"],
    "binding": ["create"],
    "log": ["get"],
}

# Groups in the order kube-apiserver lists them (legacy first, then by priority), CRDs after.
_ORDER = [
    "",
    "apps",
    "events.k8s.io",
    "authentication.k8s.io",
    "authorization.k8s.io",
    "autoscaling",
    "batch",
    "certificates.k8s.io",
    "networking.k8s.io",
    "policy",
    "rbac.authorization.k8s.io",
    "storage.k8s.io",
    "admissionregistration.k8s.io",
    "apiextensions.k8s.io",
    "scheduling.k8s.io",
    "coordination.k8s.io",
    "node.k8s.io",
    "discovery.k8s.io",
    "flowcontrol.apiserver.k8s.io",
    "resource.k8s.io",
]


def wants_aggregated(accept: str) -> bool:
    """Whether an ``Accept`` header asks for aggregated discovery (v2)."""
    return "as=APIGroupDiscoveryList" in accept and "v=v2;" in accept.replace(" ", "") + ";"


def _group_versions(kinds: Iterable[Kind]) -> dict[str, dict[str, list[Kind]]]:
    groups: dict[str, dict[str, list[Kind]]] = {}
    for kind in kinds:
        groups.setdefault(kind.group, {}).setdefault(kind.version, []).append(kind)
    order = {g: i for i, g in enumerate(_ORDER)}
    return dict(sorted(groups.items(), key=lambda item: (order.get(item[0], len(order)), item[0])))


def _sub_kind(kind: Kind, sub: str) -> tuple[str, str, str]:
    if sub == "scale":
        return ("autoscaling", "v1", "Scale")
    if sub == "binding":
        return ("", "v1", "Binding")
    return (kind.group, kind.version, kind.kind)


def _hash(kind: Kind) -> str:
    return hashlib.sha256(f"{kind.group}/{kind.version}/{kind.kind}".encode()).digest()[:8].hex()


def _version_order(versions: Iterable[str]) -> list[str]:
    # k8s.io/apimachinery/pkg/version.CompareKubeAwareVersionStrings: GA > beta > alpha.
    def rank(v: str) -> tuple[int, int, int]:
        import re

        m = re.fullmatch(r"v(\d+)(?:(alpha|beta)(\d+))?", v)
        if m is None:
            return (3, 0, 0)
        stage = {None: 0, "beta": 1, "alpha": 2}[m.group(2)]
        return (stage, -int(m.group(1)), -int(m.group(3) or 0))

    return sorted(versions, key=rank)


def api_versions(*, server_address: str) -> Obj:
    """``GET /api``."""
    return {
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [
            {"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}
        ],
    }


def _group(name: str, versions: list[str]) -> Obj:
    ordered = _version_order(versions)
    gvs = [{"groupVersion": f"{name}/{v}", "version": v} for v in ordered]
    return {"name": name, "versions": gvs, "preferredVersion": gvs[0]}


def api_group_list(kinds: Iterable[Kind]) -> Obj:
    """``GET /apis``."""
    groups = [_group(g, list(vs)) for g, vs in _group_versions(kinds).items() if g]
    return {"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}


def api_group(kinds: Iterable[Kind], group: str) -> Obj | None:
    """``GET /apis/{group}``, or None when the group is not served."""
    versions = _group_versions(kinds).get(group)
    if not versions:
        return None
    return {"kind": "APIGroup", "apiVersion": "v1", **_group(group, list(versions))}


def resource_list(kinds: Iterable[Kind], group: str, version: str) -> Obj | None:
    """``GET /api/v1`` or ``/apis/{group}/{version}``, or None when not served."""
    served = _group_versions(kinds).get(group, {}).get(version)
    if served is None:
        return None
    resources: list[Obj] = []
    for kind in sorted(served, key=lambda k: k.plural):
        entry: Obj = {
            "name": kind.plural,
            "singularName": kind.singular_name,
            "namespaced": kind.namespaced,
            "kind": kind.kind,
            "verbs": VERBS,
        }
        if kind.short_names:
            entry["shortNames"] = list(kind.short_names)
        if kind.categories:
            entry["categories"] = list(kind.categories)
        entry["storageVersionHash"] = _hash(kind)
        resources.append(entry)
        for sub in kind.subresources:
            g, v, k = _sub_kind(kind, sub)
            sub_entry: Obj = {
                "name": f"{kind.plural}/{sub}",
                "singularName": "",
                "namespaced": kind.namespaced,
                "kind": k,
                "verbs": _SUB_VERBS.get(sub, ["get", "patch", "update"]),
            }
            if (g, v) != (kind.group, kind.version):
                sub_entry["group"], sub_entry["version"] = g, v
            resources.append(sub_entry)
    gv = f"{group}/{version}" if group else version
    return {
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": gv,
        "resources": resources,
    }


def _aggregated_resource(kind: Kind) -> Obj:
    entry: Obj = {
        "resource": kind.plural,
        "responseKind": {"group": kind.group, "version": kind.version, "kind": kind.kind},
        "scope": "Namespaced" if kind.namespaced else "Cluster",
        "singularResource": kind.singular_name,
        "verbs": VERBS,
    }
    if kind.short_names:
        entry["shortNames"] = list(kind.short_names)
    if kind.categories:
        entry["categories"] = list(kind.categories)
    subs = []
    for sub in kind.subresources:
        g, v, k = _sub_kind(kind, sub)
        subs.append(
            {
                "subresource": sub,
                "responseKind": {"group": g, "version": v, "kind": k},
                "verbs": _SUB_VERBS.get(sub, ["get", "patch", "update"]),
            }
        )
    if subs:
        entry["subresources"] = subs
    return entry


def aggregated(kinds: Iterable[Kind], *, legacy: bool) -> Obj:
    """``APIGroupDiscoveryList`` for ``/api`` (``legacy``) or ``/apis``."""
    items: list[Obj] = []
    for group, versions in _group_versions(kinds).items():
        if (group == "") != legacy:
            continue
        vlist = []
        for version in _version_order(versions):
            resources = [
                _aggregated_resource(k) for k in sorted(versions[version], key=lambda k: k.plural)
            ]
            vlist.append({"version": version, "resources": resources, "freshness": "Current"})
        meta: Obj = {"creationTimestamp": None}
        if group:
            meta["name"] = group
        items.append({"metadata": meta, "versions": vlist})
    return {
        "kind": "APIGroupDiscoveryList",
        "apiVersion": "apidiscovery.k8s.io/v2",
        "metadata": {},
        "items": items,
    }
