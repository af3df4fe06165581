"""llmkube ModelPools: pools, their members, and pool membership on workloads and consumers.

Each test writes a small tree; the expectations are read off the manifests and llmkube's
ModelPool API (api/v1alpha1/modelpool_types.go) and pool controller.
"""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import yaml
from hypothesis import given
from hypothesis import strategies as st

from gpushift.gitops import Manifest, ModelPool, Repo, Source, load_repo, summarize
from gpushift.gitops._modelpool import model_pool
from gpushift.rules import run_check


def write(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(textwrap.dedent(text).lstrip("\n"))
    return root


def ks(name: str, path: str, *, namespace: str = "flux-system", **spec: object) -> str:
    body = {
        "apiVersion": "kustomize.toolkit.fluxcd.io/v1",
        "kind": "Kustomization",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "interval": "1h",
            "path": path,
            "prune": True,
            "sourceRef": {"kind": "GitRepository", "name": "flux-system"},
            **spec,
        },
    }
    return yaml.safe_dump(body, sort_keys=False)


def kustomization(*resources: str) -> str:
    items = "\n".join(f"  - {r}" for r in resources)
    return "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n" + items


MODEL = """
apiVersion: inference.llmkube.dev/v1alpha1
kind: Model
metadata:
  name: {name}
spec:
  source: https://example.invalid/{name}.gguf
  hardware:
    accelerator: cuda
    gpu:
      enabled: true
      count: 1
"""

ISVC = """
apiVersion: inference.llmkube.dev/v1alpha1
kind: InferenceService
metadata:
  name: {name}
spec:
  modelRef: {model}
"""

# The member list starts at line 10; members[1] is written at line 13.
POOL = """
apiVersion: inference.llmkube.dev/v1alpha1
kind: ModelPool
metadata:
  name: shared
spec:
  nodeSelector:
    kubernetes.io/hostname: gpu-1
  default: code
  swapBudget: 10m
  members:
    - inferenceServiceRef:
        name: chat
    - inferenceServiceRef:
        name: code
"""

OLD_POOL = """
apiVersion: inference.llmkube.dev/v1alpha1
kind: ModelPool
metadata:
  name: old
spec:
  gpu: 2
  members:
    - inferenceServiceRef:
        name: chat
    - inferenceServiceRef:
        name: retired
"""


def cluster(tmp_path: Path, pool: str = POOL, extra: dict[str, str] | None = None) -> Repo:
    """``apps/ai``: the active app ``llm`` (namespace ``ai``) with the pool, and the app
    ``old`` left out of the parent kustomization (so inactive) with a second pool."""
    files = {
        "apps/ai/kustomization.yaml": kustomization("./llm/ks.yaml", "# - ./old/ks.yaml"),
        "apps/ai/llm/ks.yaml": ks("llm", "./apps/ai/llm/app", targetNamespace="ai"),
        "apps/ai/llm/app/kustomization.yaml": kustomization(
            "models.yaml", "services.yaml", "pool.yaml"
        ),
        "apps/ai/llm/app/models.yaml": "---".join(
            MODEL.format(name=n) for n in ("qwen", "llama", "phi")
        ),
        "apps/ai/llm/app/services.yaml": "---".join(
            [
                ISVC.format(name="chat", model="qwen") + "  nodeSelector:\n    gpu-class: big\n",
                ISVC.format(name="code", model="llama"),
                ISVC.format(name="solo", model="phi"),
            ]
        ),
        "apps/ai/llm/app/pool.yaml": pool,
        "apps/ai/old/ks.yaml": ks("old", "./apps/ai/old/app", targetNamespace="ai"),
        "apps/ai/old/app/kustomization.yaml": kustomization("pool.yaml", "retired.yaml"),
        "apps/ai/old/app/pool.yaml": OLD_POOL,
        "apps/ai/old/app/retired.yaml": ISVC.format(name="retired", model="qwen"),
        **(extra or {}),
    }
    write(tmp_path, files)
    return load_repo([tmp_path])


def pool_named(repo: Repo, name: str) -> ModelPool:
    (pool,) = [p for p in repo.model_pools if p.name == name]
    return pool


def test_pool_with_two_members_default_and_node_selector(tmp_path: Path) -> None:
    r = cluster(tmp_path)
    pool = pool_named(r, "shared")
    assert pool.active and pool.namespace == "ai"
    assert pool.member_names == ("chat", "code")
    assert all(m.found for m in pool.members) and pool.missing == ()
    assert pool.default == "code"
    assert pool.node_selector == {"kubernetes.io/hostname": "gpu-1"}
    # Left out: the CRD defaults.
    assert (pool.gpu, pool.swap_policy, pool.swap_budget) == (1, "sticky", "10m")
    assert pool.source.path == "apps/ai/llm/app/pool.yaml" and pool.source.line == 1
    assert pool.members[1].source.line_of() == 13
    assert pool.source.line_of(("spec", "nodeSelector")) == 6


def test_members_are_marked_and_keep_their_own_pods(tmp_path: Path) -> None:
    r = cluster(tmp_path)
    llm = {w.name: w for w in r.workloads if w.origin_kind == "llmkube"}
    assert {n: (w.active, w.pool) for n, w in llm.items()} == {
        "chat": (True, "shared"),
        "code": (True, "shared"),
        "solo": (True, None),
        # The inactive app's own member belongs to the inactive pool.
        "retired": (False, "old"),
    }
    # llmkube's pool controller only scales members; the pool's nodeSelector is not theirs.
    assert llm["chat"].pod.node_selector == {"gpu-class": "big"}
    assert llm["code"].pod.node_selector == {}
    assert llm["code"].pod.containers[0].limits == {"nvidia.com/gpu": 1}


def test_summary_consumers_carry_their_pool(tmp_path: Path) -> None:
    r = cluster(tmp_path)
    consumers = summarize(r).to_dict()["consumers"]
    # No allocator in the tree: nvidia.com/gpu is an extended request. The inactive app's
    # InferenceService is no consumer.
    assert consumers == [
        {"kind": "Deployment", "namespace": "ai", "name": "chat", "request": "extended",
         "pool": "shared"},
        {"kind": "Deployment", "namespace": "ai", "name": "code", "request": "extended",
         "pool": "shared"},
        {"kind": "Deployment", "namespace": "ai", "name": "solo", "request": "extended"},
    ]  # fmt: skip
    assert [c.pool for c in summarize(r).consumers] == ["shared", "shared", None]


def test_pool_in_an_inactive_app(tmp_path: Path) -> None:
    r = cluster(tmp_path)
    old = pool_named(r, "old")
    assert not old.active and old.namespace == "ai"
    assert old.member_names == ("chat", "retired")
    # Nothing of an undeployed pool is deployed, so both names resolve in the repository.
    assert old.missing == ()
    assert old.gpu == 2 and old.default is None and old.node_selector == {}
    # The active chat stays in the active pool, not the inactive one that also lists it.
    (chat,) = [w for w in r.workloads if w.name == "chat"]
    assert chat.pool == "shared"


def test_missing_members(tmp_path: Path) -> None:
    pool = POOL.replace("name: code", "name: ghost") + (
        "    - inferenceServiceRef:\n        name: retired\n"
        "    - inferenceServiceRef:\n        name: elsewhere\n"
        "    - inferenceServiceRef: {}\n"
    )
    other_ns = ISVC.format(name="elsewhere", model="qwen").replace(
        "  name: elsewhere\n", "  name: elsewhere\n  namespace: other\n"
    )
    r = cluster(tmp_path, pool, {"apps/other/elsewhere.yaml": other_ns})
    shared = pool_named(r, "shared")
    # ghost: written nowhere; retired: only in the inactive app; elsewhere: in another
    # namespace. The entry without a name is skipped, as llmkube's controller skips it.
    assert shared.member_names == ("chat", "ghost", "retired", "elsewhere")
    assert [m.name for m in shared.missing] == ["ghost", "retired", "elsewhere"]
    assert [m.source.line_of() for m in shared.missing] == [13, 15, 17]
    names = {w.name: w.pool for w in r.workloads if w.origin_kind == "llmkube"}
    assert names == {
        "chat": "shared",
        "code": None,
        "solo": None,
        "retired": "old",
        "elsewhere": None,
    }
    # No rule reports a missing member: none of the check rules covers it.
    report = run_check([tmp_path])
    assert not [f for f in report.findings if f.path.endswith("pool.yaml")]


def test_tree_without_namespaces(tmp_path: Path) -> None:
    write(
        tmp_path,
        {
            "pool.yaml": POOL,
            "isvc.yaml": ISVC.format(name="chat", model="qwen"),
            "code.yaml": ISVC.format(name="code", model="llama").replace(
                "  name: code\n", "  name: code\n  namespace: ai\n"
            ),
        },
    )
    r = load_repo([tmp_path])
    (pool,) = r.model_pools
    # An unknown namespace may be any namespace: neither member is taken as missing.
    assert pool.active and pool.namespace is None and pool.missing == ()
    assert {w.name: w.pool for w in r.workloads} == {"chat": "shared", "code": "shared"}


# -- the spec reader --------------------------------------------------------------------------

SRC = Source("pool.yaml", 1, 0, Path("pool.yaml"))
NAMES = st.sampled_from(["a", "b", "c", ""])
SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-2, 4), st.text(max_size=4))
JSONISH = st.recursive(
    SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=4), inner, max_size=3)
    ),
    max_leaves=8,
)
ENTRY = st.one_of(
    NAMES.map(lambda n: {"inferenceServiceRef": {"name": n}}),
    JSONISH,
)


def _text(v: Any) -> str:
    # YAML scalars as the API server would store them in a string field.
    if isinstance(v, bool):
        return "true" if v else "false"
    return "" if v is None else str(v)


def _obj(kind: str, name: str, spec: Any, *, active: bool = True) -> Manifest:
    body = {"apiVersion": "inference.llmkube.dev/v1alpha1", "kind": kind, "spec": spec}
    return Manifest(body["apiVersion"], kind, name, "ai", body, SRC, active)


@given(
    st.one_of(st.lists(ENTRY, max_size=5), JSONISH),
    st.sets(st.sampled_from(["a", "b", "c"])),
    st.one_of(st.none(), st.integers(0, 8), JSONISH),
    st.one_of(st.none(), NAMES, JSONISH),
)
def test_members_read_as_the_controller_reads_them(
    members: Any, services: set[str], gpu: Any, default: Any
) -> None:
    spec = {"members": members, "gpu": gpu, "default": default}
    pool = model_pool(
        _obj("ModelPool", "p", spec),
        {n: [_obj("InferenceService", n, {})] for n in services},
    )
    # Named entries in order (empty names skipped), each found iff its service exists, each
    # pointing at its own entry.
    entries = members if isinstance(members, list) else []
    written = [
        (i, _text(m["inferenceServiceRef"]["name"]))
        for i, m in enumerate(entries)
        if isinstance(m, dict)
        and isinstance(m.get("inferenceServiceRef"), dict)
        and _text(m["inferenceServiceRef"].get("name"))
    ]
    assert list(pool.member_names) == [n for _, n in written]
    assert [m.found for m in pool.members] == [n in services for _, n in written]
    assert [m.source.keys for m in pool.members] == [("spec", "members", i) for i, _ in written]
    expected_gpu = gpu if isinstance(gpu, int) and not isinstance(gpu, bool) else 1
    assert pool.gpu == expected_gpu
    assert pool.default is None or pool.default != ""
