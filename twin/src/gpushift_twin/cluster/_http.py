"""The cluster twin's HTTP endpoints beside the Kubernetes API.

``GET /twin/v1/violations`` (the invariant monitor's record),
``POST /twin/v1/nodes/<node>/restart-kubelet`` (a kubelet restart) and the Prometheus HTTP API
subset ``/api/v1/query`` and ``/api/v1/query_range`` (GET or form POST), answered in
Prometheus' JSON shapes and error types. Both need the twin's bearer token.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import datetime
from typing import Any

from aiohttp import web

from gpushift_twin.apiserver import check_bearer
from gpushift_twin.cluster._dcgm import Metrics
from gpushift_twin.cluster._monitor import Monitor
from gpushift_twin.cluster._promql import QueryError, parse

_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d|w|y)")
_UNITS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800, "y": 31536000}
#: Prometheus' limit on points per series in a range query (web/api/v1 api.go).
MAX_POINTS = 11000


def _error(kind: str, message: str, status: int = 400) -> web.Response:
    return web.json_response(
        {"status": "error", "errorType": kind, "error": message}, status=status
    )


def _time(raw: str, name: str) -> float:
    # web/api/v1 api.go parseTime: Unix seconds (float) or RFC 3339.
    try:
        return float(raw)
    except ValueError:
        pass
    try:
        return datetime.fromisoformat(raw.replace("Z", "+00:00")).timestamp()
    except ValueError:
        raise QueryError(
            f'invalid parameter "{name}": cannot parse "{raw}" to a valid timestamp'
        ) from None


def _duration(raw: str, name: str) -> float:
    try:
        return float(raw)
    except ValueError:
        pass
    parts = _DURATION.findall(raw)
    if not parts or "".join(a + b for a, b in parts) != raw:
        raise QueryError(f'invalid parameter "{name}": cannot parse "{raw}" to a valid duration')
    return sum(float(n) * _UNITS[u] for n, u in parts)


def routes(
    *,
    monitor: Monitor,
    metrics: Metrics,
    token: Callable[[], str | None],
    restart_kubelet: Callable[[str], bool],
) -> Callable[[web.Application], None]:
    """A hook adding the endpoints to the twin's application (see ``run_twin(routes=…)``)."""

    def authorised(request: web.Request) -> bool:
        want = token()
        return want is None or check_bearer(request.headers.get("Authorization"), want)

    async def params(request: web.Request) -> dict[str, str]:
        out = dict(request.query)
        if request.method == "POST":
            out.update({k: str(v) for k, v in (await request.post()).items()})
        return out

    async def violations(request: web.Request) -> web.Response:
        if not authorised(request):
            return web.json_response({"message": "Unauthorized"}, status=401)
        return web.json_response(monitor.as_json())

    async def restart(request: web.Request) -> web.Response:
        if not authorised(request):
            return web.json_response({"message": "Unauthorized"}, status=401)
        node = request.match_info["node"]
        if not restart_kubelet(node):
            return web.json_response({"message": f'node "{node}" has no kubelet'}, status=404)
        return web.json_response({"node": node, "restarted": True})

    async def query(request: web.Request) -> web.Response:
        if not authorised(request):
            return _error("unauthorized", "Unauthorized", 401)
        p = await params(request)
        try:
            if not p.get("query"):
                raise QueryError(
                    'invalid parameter "query": unknown position: parse error: '
                    "no expression found in input"
                )
            expr = parse(p["query"])
            when = _time(p["time"], "time") if p.get("time") else metrics.now()
        except QueryError as err:
            return _error("bad_data", str(err))
        data: dict[str, Any] = {"resultType": "vector", "result": metrics.instant(expr, when)}
        return web.json_response({"status": "success", "data": data})

    async def query_range(request: web.Request) -> web.Response:
        if not authorised(request):
            return _error("unauthorized", "Unauthorized", 401)
        p = await params(request)
        try:
            for name in ("query", "start", "end", "step"):
                if not p.get(name):
                    raise QueryError(f'invalid parameter "{name}": missing')
            expr = parse(p["query"])
            start, end = _time(p["start"], "start"), _time(p["end"], "end")
            step = _duration(p["step"], "step")
            if end < start:
                raise QueryError(
                    'invalid parameter "end": end timestamp must not be before start time'
                )
            if step <= 0:
                raise QueryError(
                    'invalid parameter "step": zero or negative query resolution '
                    "step widths are not accepted. Try a positive integer"
                )
            if (end - start) / step > MAX_POINTS:
                raise QueryError(
                    "exceeded maximum resolution of 11,000 points per timeseries. "
                    "Try decreasing the query resolution (?step=XX)"
                )
        except QueryError as err:
            return _error("bad_data", str(err))
        data = {"resultType": "matrix", "result": metrics.range(expr, start, end, step)}
        return web.json_response({"status": "success", "data": data})

    def add(app: web.Application) -> None:
        app.router.add_get("/twin/v1/violations", violations)
        app.router.add_post("/twin/v1/nodes/{node}/restart-kubelet", restart)
        for path, handler in (("/api/v1/query", query), ("/api/v1/query_range", query_range)):
            app.router.add_get(path, handler)
            app.router.add_post(path, handler)

    return add
