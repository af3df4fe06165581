"""Decoding the protobuf bodies kubectl's typed create commands send."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpushift_twin.apiserver._protobuf import ProtobufError, decode


def _field(number: int, payload: bytes) -> bytes:
    # A length-delimited field; every length here is below 128, so one byte.
    assert len(payload) < 128
    return bytes([number << 3 | 2, len(payload)]) + payload


def _varint_field(number: int, value: int) -> bytes:
    assert value < 128
    return bytes([number << 3, value])


def _envelope(api_version: bytes, kind: bytes, raw: bytes) -> bytes:
    type_meta = _field(1, api_version) + _field(2, kind)
    return b"k8s\x00" + _field(1, type_meta) + _field(2, raw) + _field(3, b"") + _field(4, b"")


def test_configmap_with_labels_and_empty_fields() -> None:
    label = _field(1, b"app") + _field(2, b"web")
    meta = (
        _field(1, b"c1")
        + _field(2, b"")
        + _field(3, b"team")
        + _field(4, b"")
        + _field(8, b"")
        + _field(11, label)
    )
    data = _field(1, b"a") + _field(2, b"b")
    raw = _field(1, meta) + _field(2, data) + _varint_field(4, 1)
    assert decode(_envelope(b"v1", b"ConfigMap", raw)) == {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "c1", "namespace": "team", "labels": {"app": "web"}},
        "data": {"a": "b"},
        "immutable": True,
    }


def test_secret_bytes_become_base64() -> None:
    raw = (
        _field(1, _field(1, b"s"))
        + _field(2, _field(1, b"p") + _field(2, b"q"))
        + _field(3, b"Opaque")
    )
    assert decode(_envelope(b"v1", b"Secret", raw)) == {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "s"},
        "data": {"p": "cQ=="},
        "type": "Opaque",
    }


def test_unknown_field_refuses_the_whole_body() -> None:
    raw = _field(1, _field(1, b"c")) + _field(9, b"?")
    with pytest.raises(ProtobufError, match="field 9 is not known"):
        decode(_envelope(b"v1", b"ConfigMap", raw))


def test_unsupported_kind_and_missing_magic() -> None:
    with pytest.raises(ProtobufError, match="apps/v1 Deployment are not supported"):
        decode(_envelope(b"apps/v1", b"Deployment", b""))
    with pytest.raises(ProtobufError, match="magic"):
        decode(b"{}")


def _long_field(number: int, payload: bytes) -> bytes:
    # Length as a varint, for payloads of any size.
    length, out = len(payload), bytearray()
    while True:
        byte = length & 0x7F
        length >>= 7
        out.append(byte | (0x80 if length else 0))
        if not length:
            break
    return bytes([number << 3 | 2]) + bytes(out) + payload


_text = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=40)
_names = st.from_regex(r"[a-z][a-z0-9-]{0,20}", fullmatch=True)


@given(
    name=_names,
    data=st.dictionaries(_names, _text, max_size=6),
    labels=st.dictionaries(_names, _names, max_size=4),
)
def test_configmaps_decode_to_what_was_encoded(
    name: str, data: dict[str, str], labels: dict[str, str]
) -> None:
    def entry(key: str, value: str) -> bytes:
        return _long_field(1, key.encode()) + _long_field(2, value.encode())

    meta = _long_field(1, name.encode()) + b"".join(
        _long_field(11, entry(k, v)) for k, v in labels.items()
    )
    raw = _long_field(1, meta) + b"".join(_long_field(2, entry(k, v)) for k, v in data.items())
    type_meta = _long_field(1, b"v1") + _long_field(2, b"ConfigMap")
    body = b"k8s\x00" + _long_field(1, type_meta) + _long_field(2, raw)
    expected_meta: dict[str, object] = {"name": name}
    if labels:
        expected_meta["labels"] = labels
    expected: dict[str, object] = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": expected_meta,
    }
    if data:
        expected["data"] = data
    assert decode(body) == expected
