"""Signs in the tree that the cluster runs k3s or RKE2 (``distribution_evidence``).

Both distributions find the NVIDIA container runtime on a node at start, add it to their
containerd config and create the RuntimeClasses for it (``nvidia`` among them,
k3s-io/k3s#8700), so a RuntimeClass that no manifest defines may still exist there.

What counts, in the order reported:

- a system-upgrade-controller ``Plan`` (``upgrade.cattle.io``) upgrading with
  ``rancher/k3s-upgrade`` or ``rancher/rke2-upgrade``: only those clusters are upgraded so;
- a HelmRelease value naming the distribution's own paths (``/var/lib/rancher/k3s/``,
  ``/run/k3s/``, ``/var/lib/rancher/rke2/``), as gpu-operator's toolkit env does to reach
  their containerd;
- a ``HelmChart`` or ``HelmChartConfig`` (``helm.cattle.io``): the helm-controller both
  embed, so it tells "k3s or RKE2" apart from neither.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

from gpushift.gitops._model import DistributionEvidence, HelmRelease, Manifest

K3S = "k3s"
RKE2 = "RKE2"
EITHER = "k3s or RKE2"

_UPGRADE_IMAGES = {"rancher/k3s-upgrade": K3S, "rancher/rke2-upgrade": RKE2}
_PATHS = (("/var/lib/rancher/k3s/", K3S), ("/run/k3s/", K3S), ("/var/lib/rancher/rke2/", RKE2))
_HELM_CONTROLLER_KINDS = frozenset({"HelmChart", "HelmChartConfig"})


def _image_name(image: str) -> str:
    """``rancher/k3s-upgrade`` for ``docker.io/rancher/k3s-upgrade:v1.31.1-k3s1``."""
    name = image.split("@", 1)[0]
    last = name.rsplit("/", 1)[-1]
    if ":" in last:
        name = name[: len(name) - len(last)] + last.split(":", 1)[0]
    for registry in ("docker.io/", "index.docker.io/"):
        if name.startswith(registry):
            name = name[len(registry) :]
    return name


Keys = tuple[str | int, ...]


def _strings(value: Any, keys: Keys = ()) -> Iterator[tuple[Keys, str]]:
    """Every string in ``value`` with its key path."""
    if isinstance(value, str):
        yield keys, value
    elif isinstance(value, dict):
        for k, v in value.items():
            yield from _strings(v, (*keys, str(k)))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _strings(v, (*keys, i))


def _from_plans(objects: Iterable[Manifest]) -> Iterator[DistributionEvidence]:
    for o in objects:
        if o.kind != "Plan" or not o.api_version.startswith("upgrade.cattle.io/"):
            continue
        spec = o.body.get("spec")
        upgrade = spec.get("upgrade") if isinstance(spec, dict) else None
        image = upgrade.get("image") if isinstance(upgrade, dict) else None
        if not isinstance(image, str):
            continue
        name = _UPGRADE_IMAGES.get(_image_name(image))
        if name is not None:
            yield DistributionEvidence(
                name,
                f"system-upgrade Plan {o.name} upgrades with {_image_name(image)}",
                o.source.child(("spec", "upgrade", "image")),
            )


def _may_name_paths(hr: HelmRelease, texts: Mapping[str, str]) -> bool:
    """Whether a file the release's values come from mentions k3s or rke2 at all: walking
    every value of thousands of releases costs more than looking at their files."""
    paths = {hr.obj.source.path, *(layer.source.path for layer in hr.layers)}
    for path in paths:
        text = texts.get(path)
        if text is None or "k3s" in text or "rke2" in text:
            return True
    return False


def _from_values(
    releases: Iterable[HelmRelease], texts: Mapping[str, str]
) -> Iterator[DistributionEvidence]:
    for hr in releases:
        if not _may_name_paths(hr, texts):
            continue
        for keys, text in _strings(hr.user_values):
            for marker, name in _PATHS:
                if marker in text:
                    where = ".".join(str(k) for k in keys)
                    yield DistributionEvidence(
                        name,
                        f"HelmRelease {hr.name} sets {where} to {text}",
                        hr.values_source.child(keys),
                    )
                    break


def _from_helm_controller(objects: Iterable[Manifest]) -> Iterator[DistributionEvidence]:
    for o in objects:
        if o.kind in _HELM_CONTROLLER_KINDS and o.api_version.startswith("helm.cattle.io/"):
            what = f"{o.kind} {o.name} (helm.cattle.io, their embedded helm-controller)"
            yield DistributionEvidence(EITHER, what, o.source)


def distribution_evidence(
    objects: Sequence[Manifest], releases: Sequence[HelmRelease], texts: Mapping[str, str]
) -> tuple[DistributionEvidence, ...]:
    """Signs of k3s or RKE2 among the deployed ``objects`` and ``releases``, strongest first.
    ``texts`` are the files' texts by path (a release whose files do not mention k3s or rke2
    is not walked)."""
    active = [o for o in objects if o.active]
    return (
        *_from_plans(active),
        *_from_values((hr for hr in releases if hr.active), texts),
        *_from_helm_controller(active),
    )
