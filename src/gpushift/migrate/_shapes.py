"""New files in the shapes ``render`` gives them: the DRA driver app, claim templates, RBAC.

``render`` already knows what these look like (chart 0.5+, the ConsumableShares gate, the
driver root per platform, the Kustomization's dependsOn and health check, claim templates with
``force: true``), so a migration renders a config describing the repository and takes the
files it needs, through render's public API only.
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError
from ruamel.yaml import YAML

from gpushift._errors import InputError
from gpushift._sharing import Allocator, Sharing
from gpushift._yamlout import dump_documents
from gpushift.render import (
    Chart,
    Charts,
    Cluster,
    Consumer,
    ConsumerStyle,
    GpushiftConfig,
    bridge_device_class,
    kustomization_ref,
    render_tree,
)

DRA_APP = "dra-driver-nvidia-gpu"
DEVICE_PLUGIN_APP = "nvidia-device-plugin"
OPERATOR_APP = "gpu-operator"
CLAIM_TEMPLATES_APP = "gpu-claim-templates"
CLAIM_TEMPLATE = "any-nvidia-gpu"
DCGM_RBAC_FILE = "dcgm-exporter-rbac.yaml"
TIME_SLICING_FILE = "time-slicing-config.yaml"
BRIDGE_CLASS_FILE = "deviceclass-extended-resource.yaml"
#: The first gpu-operator with the GPUCluster; render refuses older versions for it.
GPUCLUSTER_OPERATOR = "26.7.0"

_UNSIGNED = (
    "registry.k8s.io is where the dra-driver-nvidia-gpu chart is published, and it carries\n"
    "no cosign signature, so there is no verify block."
)


@dataclass(frozen=True, slots=True)
class Layout:
    """What a rendered tree needs to know about the repository.

    ``apps`` is the apps directory (``kubernetes/apps``), ``gpu_namespace`` where the GPU stack
    runs; ``source`` the Flux source (kind, name, namespace) its Kustomizations read.
    """

    apps: str
    gpu_namespace: str
    talos: bool
    preinstalled_driver: bool
    source: tuple[str, str, str]
    #: Where the driver is on the nodes, as the tree says (None: the platform's default).
    driver_root: str | None = None
    #: The one namespace the tree keeps its Flux Kustomizations in (None: each app's own).
    flux_namespace: str | None = None


def _config(
    layout: Layout,
    *,
    allocator: Allocator,
    sharing: Sharing,
    namespaces: tuple[str, ...],
    memory_per_claim: str | None = None,
) -> GpushiftConfig:
    kind, name, ns = layout.source
    cluster = Cluster.model_validate(
        {
            "talos": layout.talos,
            "preinstalledDriver": layout.preinstalled_driver,
            "driverRoot": layout.driver_root,
            "gpuNamespace": layout.gpu_namespace,
            "appsPath": "./" + layout.apps,
            "source": {"kind": kind, "name": name, "namespace": ns},
            "fluxNamespace": layout.flux_namespace,
        }
    )
    consumers = [
        Consumer(namespace=n, name=f"gpushift-consumer-{i}", style=ConsumerStyle.APP_TEMPLATE)
        for i, n in enumerate(namespaces)
    ]
    charts = Charts()
    if allocator is Allocator.GPUCLUSTER:
        operator = Chart(url=charts.gpu_operator.url, version=GPUCLUSTER_OPERATOR)
        charts = Charts(gpu_operator=operator)
    try:
        return GpushiftConfig(
            cluster=cluster,
            charts=charts,
            allocator=allocator,
            sharing=sharing,
            consumers=consumers,
            memory_per_claim=memory_per_claim,
        )
    except ValidationError as err:
        # render's own combination rules (memory needs memoryPerClaim, bounds): one line each.
        problems = "; ".join(str(e["msg"]).removeprefix("Value error, ") for e in err.errors())
        raise InputError(problems) from None


def _pick(tree: dict[str, str], prefix: str) -> dict[str, str]:
    return {p[len(prefix) :]: t for p, t in tree.items() if p.startswith(prefix)}


def dra_files(
    layout: Layout,
    *,
    sharing: Sharing,
    namespaces: tuple[str, ...],
    template: str,
    memory_per_claim: str | None = None,
) -> tuple[dict[str, str], dict[str, dict[str, str]], str]:
    """The DRA driver app, each namespace's claim-template app, and the dcgm-exporter RBAC.

    Returns ``(driver, templates, rbac)``: ``driver`` maps paths below the app folder
    (``ks.yaml``, ``app/…``) to text; ``templates`` maps each namespace to its app's files;
    ``rbac`` is the text of the ClusterRole and binding that let gpu-operator's dcgm-exporter
    read ResourceSlices.
    """
    tree = render_tree(
        _config(
            layout,
            allocator=Allocator.DRA,
            sharing=sharing,
            namespaces=namespaces,
            memory_per_claim=memory_per_claim,
        )
    )
    gpu = f"{layout.apps}/{layout.gpu_namespace}"
    driver = _pick(tree, f"{gpu}/{DRA_APP}/")
    driver["app/ocirepository.yaml"] = _comment_spec(driver["app/ocirepository.yaml"], _UNSIGNED)
    templates: dict[str, dict[str, str]] = {}
    for ns in namespaces:
        files = _pick(tree, f"{layout.apps}/{ns}/{CLAIM_TEMPLATES_APP}/")
        if template != CLAIM_TEMPLATE:
            key = "app/resourceclaimtemplate.yaml"
            files[key] = _rename_template(files[key], template)
        templates[ns] = files
    rbac = tree.get(f"{gpu}/gpu-operator/app/{DCGM_RBAC_FILE}", "")
    return driver, templates, rbac


def gpucluster_files(
    layout: Layout,
    *,
    sharing: Sharing,
    namespaces: tuple[str, ...],
    template: str,
    memory_per_claim: str | None = None,
) -> tuple[dict[str, dict[str, str]], str]:
    """Each namespace's claim-template app under gpu-operator's GPUCluster (its Kustomization
    waits for ``gpu-operator`` in the GPU namespace), and the DeviceClass that bridges
    ``nvidia.com/gpu`` to the GPUCluster's GPUs."""
    tree = render_tree(
        _config(
            layout,
            allocator=Allocator.GPUCLUSTER,
            sharing=sharing,
            namespaces=namespaces,
            memory_per_claim=memory_per_claim,
        )
    )
    templates: dict[str, dict[str, str]] = {}
    for ns in namespaces:
        files = _pick(tree, f"{layout.apps}/{ns}/{CLAIM_TEMPLATES_APP}/")
        if template != CLAIM_TEMPLATE:
            key = "app/resourceclaimtemplate.yaml"
            files[key] = _rename_template(files[key], template)
        templates[ns] = files
    return templates, dump_documents([bridge_device_class()])


def device_plugin_files(layout: Layout, *, replicas: int) -> tuple[dict[str, str], str]:
    """The standalone device plugin app (paths below its folder) and a time-slicing ConfigMap
    as gpu-operator reads it (``time-slicing-config``, key ``any``)."""
    plugin_tree = render_tree(
        _config(layout, allocator=Allocator.DEVICE_PLUGIN, sharing=replicas, namespaces=())
    )
    gpu = f"{layout.apps}/{layout.gpu_namespace}"
    plugin = _pick(plugin_tree, f"{gpu}/{DEVICE_PLUGIN_APP}/")
    operator_tree = render_tree(
        _config(layout, allocator=Allocator.GPU_OPERATOR, sharing=replicas, namespaces=())
    )
    config = operator_tree.get(f"{gpu}/gpu-operator/app/{TIME_SLICING_FILE}", "")
    return plugin, config


def _yaml() -> YAML:
    out = YAML(typ="rt")
    out.preserve_quotes = True
    out.width = 4096
    out.indent(mapping=2, sequence=4, offset=2)
    out.explicit_start = True
    return out


def _roundtrip(text: str, edit: Any) -> str:
    yaml = _yaml()
    docs = list(yaml.load_all(text))
    edit(docs)
    buf = io.StringIO()
    yaml.dump_all(docs, buf)
    return buf.getvalue()


def _comment_spec(text: str, comment: str) -> str:
    def edit(docs: list[Any]) -> None:
        spec = docs[0]["spec"]
        spec.yaml_set_comment_before_after_key(next(iter(spec)), before=comment, indent=2)

    return _roundtrip(text, edit)


def _rename_template(text: str, name: str) -> str:
    def edit(docs: list[Any]) -> None:
        docs[0]["metadata"]["name"] = name

    return _roundtrip(text, edit)


def depending_on(text: str, *, name: str, namespace: str | None) -> str:
    """A rendered Flux Kustomization that waits for the repository's own Kustomization ``name``
    (in ``namespace``, None: its own) instead of the one render names; its comment stays."""

    def edit(docs: list[Any]) -> None:
        entry = docs[0]["spec"]["dependsOn"][0]
        entry["name"] = name
        entry.pop("namespace", None)
        if namespace is not None:
            entry["namespace"] = namespace

    return _roundtrip(text, edit)


def claim_templates_ref(layout: Layout, namespace: str) -> tuple[str, str]:
    """``(name, namespace)`` of the Kustomization of ``namespace``'s claim templates."""
    return kustomization_ref(CLAIM_TEMPLATES_APP, namespace, flux_namespace=layout.flux_namespace)


def without_depends_on(text: str) -> str:
    """A rendered Flux Kustomization without its ``dependsOn`` and the comment explaining it
    (there is no gpu-operator to wait for)."""
    lines = text.splitlines(keepends=True)
    start = next(i for i, line in enumerate(lines) if line == "  dependsOn:\n")
    end = start + 1
    while end < len(lines) and lines[end].startswith("    "):
        end += 1
    while start > 0 and lines[start - 1].startswith("  #"):
        start -= 1
    return "".join(lines[:start] + lines[end:])
