"""The CustomResourceDefinitions the twin serves from the start (`gpushift._crds`)."""

from __future__ import annotations

from gpushift.common import FLUX_VERSION, custom_crds
from gpushift_twin.apiserver import ApiError, Store


def install_crds(store: Store, *, flux: str = FLUX_VERSION) -> list[str]:
    """Create every CRD of the kind table that the store does not hold yet, the Flux ones
    serving what Flux release ``flux`` serves; returns their names."""
    crd_kind = store.kind_for("apiextensions.k8s.io", "v1", "customresourcedefinitions")
    made: list[str] = []
    for body in custom_crds(flux=flux):
        try:
            store.create(crd_kind, body, manager="gpushift-twin")
        except ApiError as err:
            if err.code != 409:
                raise
            continue
        made.append(str(body["metadata"]["name"]))  # type: ignore[index]
    return made
