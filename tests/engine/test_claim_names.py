"""Claims made from a template are named as the resourceclaim controller names them, with a
suffix that is a pure function of the pod and the claim."""

from __future__ import annotations

import hashlib

from hypothesis import given, settings
from hypothesis import strategies as st

from gpushift.engine import from_objects, nvidia_device_classes, simulate

# k8s.io/apimachinery pkg/util/rand: the alphabet of generated names.
ALPHABET = "bcdfghjklmnpqrstvwxz2456789"


def suffix(seed: str) -> str:
    # One character per SHA-256 byte of the seed, modulo the alphabet's length.
    return "".join(ALPHABET[b % len(ALPHABET)] for b in hashlib.sha256(seed.encode()).digest()[:5])


@settings(max_examples=40, deadline=None)
@given(
    st.from_regex(r"[a-z][a-z0-9-]{0,20}", fullmatch=True),
    st.from_regex(r"[a-z][a-z0-9]{0,10}", fullmatch=True),
)
def test_template_claim_names(pod: str, claim: str) -> None:
    objects = [
        *nvidia_device_classes(),
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaimTemplate",
            "metadata": {"name": "t", "namespace": "ns"},
            "spec": {
                "spec": {
                    "devices": {
                        "requests": [
                            {"name": "g", "exactly": {"deviceClassName": "gpu.nvidia.com"}}
                        ]
                    }
                }
            },
        },
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": pod, "namespace": "ns"},
            "spec": {
                "resourceClaims": [{"name": claim, "resourceClaimTemplateName": "t"}],
                "containers": [{"name": "c", "resources": {"claims": [{"name": claim}]}}],
            },
        },
    ]
    sim = simulate(from_objects(objects))
    (made,) = sim.outcome.claims
    assert made["metadata"]["generateName"] == f"{pod}-{claim}-"
    assert made["metadata"]["name"] == f"{pod}-{claim}-" + suffix(f"ns/{pod}/{claim}")
