"""The JSON Schema of ``gpushift.yaml``, generated from the pydantic model."""

from __future__ import annotations

import json
from typing import Any

from gpushift.render._config import GpushiftConfig

SCHEMA_ID = "https://gpushift.dev/schemas/gpushift.schema.json"


def config_schema() -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) that ``docs/gpushift.schema.json`` publishes."""
    schema = GpushiftConfig.model_json_schema(by_alias=True, mode="validation")
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": SCHEMA_ID,
        **schema,
    }


def config_schema_text() -> str:
    """``config_schema()`` as the committed file holds it (sorted keys, 2-space indent)."""
    return json.dumps(config_schema(), indent=2, sort_keys=True) + "\n"
