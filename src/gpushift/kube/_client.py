"""gpushift's Kubernetes client: a dozen keyword-only verbs over lightkube, returning dicts.

Every verb retries 429 and 5xx answers (and dropped connections) with exponential backoff,
waiting what ``Retry-After`` asks for when the server says; every change it makes to a
cluster is logged as one line (verb, resource, namespace/name, resourceVersion). Credentials
never reach the log: only the server URL does.
"""

from __future__ import annotations

import builtins
import contextlib
import functools
import json
import logging
import os
import ssl
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, TypeVar

import httpx2
import lightkube
from lightkube import generic_resource
from lightkube.config.kubeconfig import KubeConfig
from lightkube.core.exceptions import ConfigError
from lightkube.types import CascadeType, PatchType

from gpushift._errors import InputError
from gpushift._kinds import Kind, by_kind, lookup
from gpushift._obj import Obj

T = TypeVar("T")
log = logging.getLogger("gpushift.kube")

#: Status codes worth retrying: throttling and server-side failures (client-go's
#: rest.Request retries 429 and 5xx with Retry-After the same way).
RETRYABLE = frozenset({429, 500, 502, 503, 504})
PatchKind = Literal["merge", "json", "strategic", "apply"]
Propagation = Literal["Background", "Foreground", "Orphan"]
_PATCH = {
    "merge": PatchType.MERGE,
    "json": PatchType.JSON,
    "strategic": PatchType.STRATEGIC,
    "apply": PatchType.APPLY,
}
_CASCADE = {
    "Background": CascadeType.BACKGROUND,
    "Foreground": CascadeType.FOREGROUND,
    "Orphan": CascadeType.ORPHAN,
}


#: ``KubeError.reason`` when the server could not be reached at all (the CLI's exit 3).
UNREACHABLE = "Unreachable"
#: ``KubeError.reason`` when the server answered, but not as a Kubernetes API server does (a
#: wrong port, a web proxy, an ingress): also the CLI's exit 3, as nothing reached a cluster.
NOT_KUBERNETES = "NotKubernetes"


class KubeError(Exception):
    """A request the cluster refused or that could not be completed.

    ``code`` is the HTTP status (0 when the server was unreachable), ``reason`` the Status
    reason (``NotFound``, ``Conflict``, ``AlreadyExists``, …, or :data:`UNREACHABLE`),
    ``message`` the server's words. ``user`` is the kubeconfig user entry the request was
    sent as, set on a 401 so that a message can say whose credentials were refused.
    """

    def __init__(self, message: str, *, code: int = 0, reason: str = "", user: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.code = code
        self.reason = reason
        self.user = user


class _RetryableStatusError(KubeError):
    """A throttled or failed answer to a raw request, which :meth:`Kube._call` retries."""

    def __init__(self, message: str, *, code: int, reason: str, retry_after: float | None) -> None:
        super().__init__(message, code=code, reason=reason)
        self.retry_after = retry_after


def _raw_refusal(response: Any, message: str, *, reason: str = "") -> KubeError:
    """The error for a raw request's error ``response``: retryable for 429 and 5xx."""
    code = int(response.status_code)
    if code in RETRYABLE:
        return _RetryableStatusError(
            message, code=code, reason=reason, retry_after=_retry_after_of(response)
        )
    return KubeError(message, code=code, reason=reason)


def _retry_after_of(response: Any) -> float | None:
    header = response.headers.get("Retry-After")
    if not header:
        return None
    try:
        return max(float(header), 0.0)
    except ValueError:
        return None


@dataclass(frozen=True, slots=True)
class ResourceRef:
    """One resource type of the API, as the kinds table describes it."""

    group: str
    version: str
    kind: str
    plural: str
    namespaced: bool

    @classmethod
    def of(cls, kind: Kind) -> ResourceRef:
        """The reference for a kind of the kinds table."""
        return cls(kind.group, kind.version, kind.kind, kind.plural, kind.namespaced)

    @classmethod
    def named(cls, kind: str, api_version: str | None = None) -> ResourceRef:
        """The reference for a kind name (``"Deployment"``), optionally with its apiVersion.

        Raises:
            KeyError: gpushift does not know that kind.
        """
        if api_version is None:
            return cls.of(by_kind(kind))
        found = lookup(api_version, kind)
        if found is None:
            raise KeyError(f"{api_version} {kind}")
        return cls.of(found)

    @property
    def api_version(self) -> str:
        """``apiVersion`` of its objects."""
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def qualified(self) -> str:
        """``deployments.apps``-style name used in messages and logs."""
        return f"{self.plural}.{self.group}" if self.group else self.plural

    def describe(self, name: str, namespace: str | None) -> str:
        """``deployments.apps default/web`` for logs."""
        return f"{self.qualified} {namespace}/{name}" if namespace else f"{self.qualified} {name}"

    @property
    def model(self) -> Any:
        """The lightkube resource class (generic, dict-like) for this reference."""
        return _model(self)


@functools.cache
def _model(ref: ResourceRef) -> Any:
    make = (
        generic_resource.create_namespaced_resource
        if ref.namespaced
        else generic_resource.create_global_resource
    )
    return make(ref.group, ref.version, ref.kind, ref.plural)


def _to_dict(obj: Any) -> Obj:
    if obj is None:
        return {}
    if isinstance(obj, dict) and not hasattr(obj, "to_dict"):
        return obj
    out: Obj = obj.to_dict()
    return out


def _retry_after(err: Exception) -> float | None:
    response = getattr(err, "response", None)
    if response is not None and response.headers.get("Retry-After"):
        return _retry_after_of(response)
    status = getattr(err, "status", None)
    details = getattr(status, "details", None)
    seconds = getattr(details, "retryAfterSeconds", None)
    return float(seconds) if seconds else None


def _tls_failure(err: BaseException) -> bool:
    """Whether a transport error comes from a failed TLS handshake."""
    seen: BaseException | None = err
    for _ in range(8):
        if seen is None:
            return False
        if isinstance(seen, ssl.SSLError):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def _kube_error(err: lightkube.ApiError) -> KubeError:
    status = err.status
    return KubeError(
        str(status.message or err), code=int(status.code or 0), reason=str(status.reason or "")
    )


class Kube:
    """Keyword-only verbs on one cluster; objects go in and come out as plain dicts."""

    def __init__(
        self,
        client: lightkube.Client,
        *,
        field_manager: str = "gpushift",
        retries: int = 6,
        backoff: float = 0.2,
        max_backoff: float = 10.0,
        sleep: Callable[[float], None] = time.sleep,
        deadline: float | None = None,
        user: str = "",
    ) -> None:
        self.client = client
        self.deadline = deadline
        self.user = user  # the kubeconfig user entry's name, for messages (never its secret)
        self.field_manager = field_manager
        self.retries = retries
        self.backoff = backoff
        self.max_backoff = max_backoff
        self._sleep = sleep
        self.attempts = 0  # requests sent, retries included

    @property
    def server(self) -> str:
        """The API server's base URL (no credentials)."""
        return str(self.client._client._client.base_url).rstrip("/")

    def close(self) -> None:
        """Release the connection pool."""
        self.client.close()

    def __enter__(self) -> Kube:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- plumbing ----------------------------------------------------------------------------

    def _call(self, what: str, fn: Callable[[], T]) -> T:
        try:
            return self._retrying(what, fn)
        except KubeError as err:
            if err.code == 401 and not err.user:
                err.user = self.user
            raise
        except httpx2.HTTPStatusError as err:
            # lightkube raises this for an error answer that is not a Kubernetes Status.
            raise self._not_kubernetes(what, err.response) from None
        except json.JSONDecodeError:
            # ... and a JSON decoding error for a success answer that is not JSON.
            raise KubeError(
                f"{self.server} does not answer as a Kubernetes API server: {what}: not JSON",
                reason=NOT_KUBERNETES,
            ) from None

    def _not_kubernetes(self, what: str, response: Any) -> KubeError:
        """The error for an answer no Kubernetes API server gives, naming what it was."""
        status = int(response.status_code)
        phrase = getattr(response, "reason_phrase", "") or ""
        ctype = (response.headers.get("content-type") or "").split(";")[0].strip()
        return KubeError(
            f"{self.server} does not answer as a Kubernetes API server: {what}: "
            f"{status} {phrase}".rstrip()
            + f" ({ctype or 'no Content-Type'})",
            reason=NOT_KUBERNETES,
        )

    def check_server(self) -> Obj:
        """GET ``/version`` and make sure a Kubernetes API server answered; its version document.

        Every cluster-facing command calls this first, so a kubeconfig naming something else (a
        wrong port, a web proxy, an ingress's 404 page) fails at once, in one way.

        Raises:
            KubeError: reason :data:`NOT_KUBERNETES` (code 0) when the answer is not a
                Kubernetes version document nor a Kubernetes Status; code 401 (``user`` set)
                when the credentials were refused; :data:`UNREACHABLE` as every verb.
        """
        http: Any = self.client._client._client

        def fetch() -> Obj:
            response = http.get("/version")
            code = int(response.status_code)
            try:
                body = response.json()
            except ValueError:
                body = None
            is_status = isinstance(body, dict) and body.get("kind") == "Status"
            if code == 401:
                raise KubeError("401 Unauthorized", code=401, reason="Unauthorized")
            if code in RETRYABLE and is_status:
                raise _raw_refusal(response, f"GET /version: {code}")
            if code in RETRYABLE:  # a proxy's own error page: retried, then named
                what = self._not_kubernetes("GET /version", response).message
                raise _raw_refusal(response, what, reason=NOT_KUBERNETES)
            if code < 400 and isinstance(body, dict) and "gitVersion" in body:
                return body
            if code >= 400 and is_status:
                return {}  # a Kubernetes answer all the same (/version forbidden to this user)
            raise self._not_kubernetes("GET /version", response)

        return self._call("GET /version", fetch)

    def _retrying(self, what: str, fn: Callable[[], T]) -> T:
        delay = self.backoff
        for attempt in range(self.retries + 1):
            self.attempts += 1
            try:
                return fn()
            except lightkube.ApiError as err:
                code = int(err.status.code or 0)
                if code not in RETRYABLE or attempt == self.retries:
                    raise _kube_error(err) from None
                wait = _retry_after(err)
                why = f"{code} {err.status.reason or ''}".strip()
            except _RetryableStatusError as err:
                if attempt == self.retries:
                    raise KubeError(err.message, code=err.code, reason=err.reason) from None
                wait, why = err.retry_after, f"{err.code} {err.reason}".strip()
            except httpx2.HTTPStatusError as err:
                # An error answer that is not a Kubernetes Status (a load balancer's 503 page):
                # retried like any 429 or 5xx; :meth:`_call` says what answered if it persists.
                code = int(err.response.status_code)
                if code not in RETRYABLE or attempt == self.retries:
                    raise
                wait, why = _retry_after_of(err.response), f"{code} (not a Kubernetes Status)"
            except httpx2.TransportError as err:
                if attempt == self.retries or _tls_failure(err):
                    # A TLS handshake that failed (HTTPS to a plain-HTTP port, an untrusted
                    # certificate) fails the same way every time: no retry.
                    raise KubeError(
                        f"{what}: cannot reach the API server {self.server}: {err}",
                        reason=UNREACHABLE,
                    ) from None
                wait, why = None, type(err).__name__
            wait = delay if wait is None else wait
            delay = min(delay * 2, self.max_backoff)
            if self.deadline is not None and time.monotonic() + wait >= self.deadline:
                raise KubeError(
                    f"{what}: no answer from the API server before the deadline ({why})",
                    reason=UNREACHABLE,
                )
            log.warning(
                "%s: %s, retrying in %.1fs (%d/%d)", what, why, wait, attempt + 1, self.retries
            )
            self._sleep(wait)
        raise AssertionError("unreachable")  # pragma: no cover

    @staticmethod
    def _changed(
        verb: str,
        ref: ResourceRef,
        obj: Obj,
        *,
        name: str = "",
        namespace: str | None = None,
        dry_run: bool = False,
        note: str = "",
    ) -> None:
        meta = obj.get("metadata") or {}
        who = ref.describe(meta.get("name") or name, meta.get("namespace") or namespace)
        rv = meta.get("resourceVersion")
        extra = ", ".join(
            x for x in (note, f"rv {rv}" if rv else "", "dry run" if dry_run else "") if x
        )
        log.info("%s %s%s", verb, who, f" ({extra})" if extra else "")

    # --- reads -------------------------------------------------------------------------------

    def get_path(self, path: str) -> Obj:
        """GET a non-resource path (``/version``, ``/twin/v1``) as JSON, retried like every verb.

        Raises:
            KubeError: the server answered an error status, or not with a JSON object.
        """
        # lightkube serves resources only; its httpx client carries the auth and base URL.
        http: Any = self.client._client._client

        def fetch() -> Obj:
            response = http.get(path)
            if response.status_code >= 400:
                reason = "NotFound" if response.status_code == 404 else ""
                raise _raw_refusal(response, f"GET {path}: {response.status_code}", reason=reason)
            try:
                body = response.json()
            except ValueError:
                body = None
            if not isinstance(body, dict):
                raise KubeError(f"GET {path}: not a JSON object", code=response.status_code)
            return body

        return self._call(f"GET {path}", fetch)

    def get(self, ref: ResourceRef, *, name: str, namespace: str | None = None) -> Obj:
        """One object.

        Raises:
            KubeError: NotFound (404) and every other refusal.
        """
        kw = {"namespace": namespace} if ref.namespaced else {}
        return _to_dict(
            self._call(
                f"get {ref.describe(name, namespace)}",
                lambda: self.client.get(ref.model, name, **kw),
            )
        )

    def list(
        self,
        ref: ResourceRef,
        *,
        namespace: str | None = None,
        labels: Mapping[str, Any] | None = None,
        fields: Mapping[str, Any] | None = None,
        chunk_size: int | None = None,
    ) -> list[Obj]:
        """Objects of a type (all namespaces unless ``namespace``), selectors as lightkube takes
        them (``{"app": "web", "tier": ("a", "b")}``)."""
        kw: dict[str, Any] = {"labels": labels, "fields": fields, "chunk_size": chunk_size}
        if ref.namespaced:
            kw["namespace"] = namespace or "*"
        return self._call(
            f"list {ref.qualified}",
            lambda: [_to_dict(o) for o in self.client.list(ref.model, **kw)],
        )

    def watch(
        self,
        ref: ResourceRef,
        *,
        namespace: str | None = None,
        labels: Mapping[str, Any] | None = None,
        fields: Mapping[str, Any] | None = None,
        resource_version: str | None = None,
        server_timeout: int | None = None,
    ) -> Iterator[tuple[str, Obj]]:
        """``(type, object)`` changes; when the server ends the stream it watches again from
        the last resourceVersion seen.

        Every stream is closed when it ends or fails, so reconnects never leak connections
        from the pool; a stream silent past ``server_timeout`` (plus a margin) is cut.

        Raises:
            KubeError: an ERROR event (410 Expired: relist and watch from the new version),
                a refused request, or a lost connection (code 0).
        """
        from lightkube.core.selector import build_selector

        generic = self.client._client  # lightkube's GenericSyncClient: auth, URL building
        version = resource_version
        timeout = httpx2.Timeout(30.0, read=None if server_timeout is None else server_timeout + 30)
        while True:
            params: dict[str, Any] = {
                "timeoutSeconds": server_timeout,
                "resourceVersion": version,
                "labelSelector": build_selector(dict(labels)) if labels else None,
                "fieldSelector": build_selector(dict(fields), for_fields=True) if fields else None,
            }
            br = generic.prepare_request(
                "list",
                res=ref.model,
                namespace=(namespace or "*") if ref.namespaced else None,
                watch=True,
                params={k: v for k, v in params.items() if v is not None},
            )
            self.attempts += 1
            try:
                req = generic._client.build_request(
                    br.method, br.url, params=br.params, timeout=timeout
                )
                resp = generic.send(req, stream=True)
            except httpx2.TransportError as err:
                raise KubeError(
                    f"watch {ref.qualified}: cannot reach the API server: {err}"
                ) from None
            try:
                if resp.status_code >= 400:
                    resp.read()
                    raise KubeError(
                        f"watch {ref.qualified}: {resp.status_code}", code=resp.status_code
                    )
                for line in resp.iter_lines():
                    if not line.strip():
                        continue
                    event = json.loads(line)
                    obj = event.get("object") or {}
                    if event.get("type") == "ERROR":
                        raise KubeError(
                            str(obj.get("message") or "watch error"),
                            code=int(obj.get("code") or 0),
                            reason=str(obj.get("reason") or ""),
                        )
                    version = str((obj.get("metadata") or {}).get("resourceVersion") or version)
                    yield str(event.get("type")), obj
            except (httpx2.TransportError, httpx2.StreamError) as err:
                raise KubeError(f"watch {ref.qualified}: connection lost: {err}") from None
            except ValueError as err:
                raise KubeError(f"watch {ref.qualified}: bad event: {err}") from None
            finally:
                resp.close()

    def list_at(
        self,
        ref: ResourceRef,
        *,
        namespace: str | None = None,
        labels: Mapping[str, Any] | None = None,
    ) -> tuple[builtins.list[Obj], str]:
        """Objects of a type and the list's resourceVersion, to start a watch from."""
        kw: dict[str, Any] = {"labels": labels}
        if ref.namespaced:
            kw["namespace"] = namespace or "*"

        def read() -> tuple[builtins.list[Obj], str]:
            found = self.client.list(ref.model, **kw)
            items = [_to_dict(o) for o in found]
            try:
                version = str(found.resourceVersion)
            except Exception:  # an empty list without metadata
                version = ""
            return items, version

        return self._call(f"list {ref.qualified}", read)

    def wait(
        self,
        ref: ResourceRef,
        *,
        name: str,
        namespace: str | None = None,
        until: Callable[[Obj], bool],
        timeout: float = 60.0,
        poll: float = 0.5,
    ) -> Obj:
        """Block until the object satisfies ``until``, reading it every ``poll`` seconds (as
        the flux CLI polls readiness); returns it.

        Raises:
            KubeError: NotFound when the object is gone, or ``timeout`` seconds passed (code 0,
                reason ``Timeout``).
        """
        deadline = time.monotonic() + timeout
        while True:
            obj = self.get(ref, name=name, namespace=namespace)
            if until(obj):
                return obj
            left = deadline - time.monotonic()
            if left <= 0:
                raise KubeError(
                    f"timed out after {timeout:g}s waiting for {ref.describe(name, namespace)}",
                    reason="Timeout",
                )
            self._sleep(min(poll, left))

    def http_get(self, url: str, *, params: Mapping[str, str] | None = None) -> bytes:
        """GET ``url`` (an absolute URL, or a path on the API server) and return the body.

        Under the API server's address the request carries the cluster's credentials and TLS
        settings (the twin serves Prometheus there); any other URL is fetched plainly.

        Raises:
            KubeError: a non-2xx answer (with the Status message when there is one) or an
                unreachable server (code 0).
        """
        # lightkube keeps its configured httpx client one level down; it is the only way to
        # reuse the kubeconfig's authentication for paths outside the resource API.
        http: Any = self.client._client._client
        server = str(self.client.config.cluster.server).rstrip("/")
        absolute = url.startswith(("http://", "https://"))
        inside = not absolute or url.startswith(server + "/") or url == server
        target = url if absolute else server + "/" + url.lstrip("/")

        def fetch() -> bytes:
            try:
                if inside:
                    response = http.get(target, params=params)
                else:
                    response = httpx2.get(target, params=params, timeout=30.0)
            except httpx2.TransportError as err:
                raise KubeError(f"GET {target}: cannot reach the server: {err}") from None
            if response.status_code >= 400:
                message = response.text.strip()
                reason = ""
                with contextlib.suppress(ValueError):
                    body = response.json()
                    if isinstance(body, dict):
                        message = str(body.get("message") or body.get("error") or message)
                        reason = str(body.get("reason") or body.get("errorType") or "")
                raise _raw_refusal(response, message, reason=reason)
            out: bytes = response.content
            return out

        return self._call(f"get {target}", fetch)

    def logs(
        self,
        *,
        name: str,
        namespace: str,
        container: str | None = None,
        tail_lines: int | None = None,
        previous: bool = False,
    ) -> str:
        """A container's log (``pods/log``), as text.

        Raises:
            KubeError: BadRequest when the pod has several containers and none is named, or the
                container has not started; NotFound, …
        """
        params = {
            k: v
            for k, v in (
                ("container", container),
                ("tailLines", None if tail_lines is None else str(tail_lines)),
                ("previous", "true" if previous else None),
            )
            if v is not None
        }
        path = f"/api/v1/namespaces/{namespace}/pods/{name}/log"
        return self.http_get(path, params=params).decode("utf-8", "replace")

    # --- writes ------------------------------------------------------------------------------

    def create(
        self, ref: ResourceRef, obj: Obj, *, namespace: str | None = None, dry_run: bool = False
    ) -> Obj:
        """Create an object; returns it as stored.

        Raises:
            KubeError: AlreadyExists (409), Invalid (422), …
        """
        body = ref.model.from_dict({"apiVersion": ref.api_version, "kind": ref.kind, **obj})
        kw = {"namespace": namespace} if ref.namespaced and namespace else {}
        name = (obj.get("metadata") or {}).get("name", "")
        out = _to_dict(
            self._call(
                f"create {ref.describe(name, namespace)}",
                lambda: self.client.create(
                    body, field_manager=self.field_manager, dry_run=dry_run, **kw
                ),
            )
        )
        self._changed("created", ref, out, dry_run=dry_run)
        return out

    def replace(
        self, ref: ResourceRef, obj: Obj, *, namespace: str | None = None, dry_run: bool = False
    ) -> Obj:
        """Replace an object (PUT); a ``metadata.resourceVersion`` makes it conditional.

        Raises:
            KubeError: Conflict (409) when the resourceVersion is stale, NotFound, …
        """
        body = ref.model.from_dict({"apiVersion": ref.api_version, "kind": ref.kind, **obj})
        meta = obj.get("metadata") or {}
        kw = {"namespace": namespace or meta.get("namespace")} if ref.namespaced else {}
        out = _to_dict(
            self._call(
                f"replace {ref.describe(meta.get('name', ''), namespace)}",
                lambda: self.client.replace(
                    body, field_manager=self.field_manager, dry_run=dry_run, **kw
                ),
            )
        )
        self._changed("replaced", ref, out, dry_run=dry_run)
        return out

    def patch(
        self,
        ref: ResourceRef,
        *,
        name: str,
        patch: Obj | builtins.list[Any],
        type: PatchKind = "merge",
        namespace: str | None = None,
        subresource: Literal["status", "scale"] | None = None,
        force: bool = False,
        dry_run: bool = False,
    ) -> Obj:
        """Patch an object (or its ``status``/``scale``); ``apply`` is server-side apply.

        Raises:
            KubeError: NotFound, Conflict (an apply conflict unless ``force``), Invalid, …
        """
        model = ref.model
        if subresource == "status":
            model = model.Status
        elif subresource == "scale":
            model = model.Scale
        kw = {"namespace": namespace} if ref.namespaced else {}
        body = patch
        if type == "apply" and isinstance(patch, dict):
            body = {"apiVersion": ref.api_version, "kind": ref.kind, **patch}
        out = _to_dict(
            self._call(
                f"patch {ref.describe(name, namespace)}",
                lambda: self.client.patch(
                    model,
                    name,
                    body,
                    patch_type=_PATCH[type],
                    field_manager=self.field_manager,
                    force=force,
                    dry_run=dry_run,
                    **kw,
                ),
            )
        )
        self._changed(
            "patched",
            ref,
            out,
            name=name,
            namespace=namespace,
            dry_run=dry_run,
            note=type + (f" {subresource}" if subresource else ""),
        )
        return out

    def apply(
        self, ref: ResourceRef, obj: Obj, *, force: bool = False, dry_run: bool = False
    ) -> Obj:
        """Server-side apply ``obj`` as this client's field manager."""
        meta = obj.get("metadata") or {}
        return self.patch(
            ref,
            name=meta["name"],
            namespace=meta.get("namespace"),
            patch=obj,
            type="apply",
            force=force,
            dry_run=dry_run,
        )

    def scale(
        self,
        ref: ResourceRef,
        *,
        name: str,
        replicas: int,
        namespace: str | None = None,
        dry_run: bool = False,
    ) -> Obj:
        """Set ``spec.replicas`` through the scale subresource; returns the Scale."""
        return self.patch(
            ref,
            name=name,
            namespace=namespace,
            subresource="scale",
            patch={"spec": {"replicas": replicas}},
            dry_run=dry_run,
        )

    def delete(
        self,
        ref: ResourceRef,
        *,
        name: str,
        namespace: str | None = None,
        propagation: Propagation = "Background",
        dry_run: bool = False,
    ) -> None:
        """Delete an object; dependents follow ``propagation``.

        Raises:
            KubeError: NotFound, …
        """
        kw: dict[str, Any] = {"namespace": namespace} if ref.namespaced else {}
        self._call(
            f"delete {ref.describe(name, namespace)}",
            lambda: self.client.delete(
                ref.model, name, cascade=_CASCADE[propagation], dry_run=dry_run, **kw
            ),
        )
        log.info(
            "deleted %s (%s%s)",
            ref.describe(name, namespace),
            propagation,
            ", dry run" if dry_run else "",
        )


def connect(
    *,
    kubeconfig: Path | None = None,
    context: str | None = None,
    namespace: str | None = None,
    field_manager: str = "gpushift",
    timeout: float = 30.0,
    retries: int = 6,
    deadline: float | None = None,
    check_server: bool = False,
) -> Kube:
    """A client for the cluster of a kubeconfig: ``kubeconfig`` if given (it must exist), else
    the files of ``$KUBECONFIG`` merged as kubectl merges them, else ~/.kube/config.

    ``context`` picks a context (default: the current one), ``namespace`` the default
    namespace (default: the context's). ``deadline`` (a ``time.monotonic()`` instant) bounds
    every request and retry, so a caller's ``--timeout`` holds against an unreachable server.
    ``check_server`` reads ``/version`` first (:meth:`Kube.check_server`), as every command
    does, so a server that is not Kubernetes is told apart before anything else is sent.

    Raises InputError (exit 2) when no kubeconfig exists, one is unreadable, or the context
    does not exist.
    """
    from gpushift.kube._config import kubeconfig_paths, merge_kubeconfigs

    paths = kubeconfig_paths(kubeconfig)
    merged = merge_kubeconfigs(paths, explicit=kubeconfig is not None)
    where = str(paths[0]) if len(paths) == 1 else os.pathsep.join(str(p) for p in paths)
    if context is None and not merged.get("current-context"):
        raise InputError("no current context in the kubeconfig (give --context)", path=where)
    try:
        config = KubeConfig.from_dict(merged, fname=paths[0])
        if context is not None and context not in config.contexts:
            raise InputError(f"context {context!r} does not exist", path=where)
        single = config.get(context_name=context)
    except (ConfigError, ValueError, KeyError, TypeError) as err:
        raise InputError(f"cannot load kubeconfig: {err}", path=where) from None
    if single is None:
        raise InputError("no current context (give --context)", path=where)
    if deadline is not None:
        timeout = max(min(timeout, deadline - time.monotonic()), 0.05)
    client = lightkube.Client(
        single,
        namespace=namespace,
        field_manager=field_manager,
        timeout=httpx2.Timeout(timeout),
    )
    log.debug("connected to %s", single.cluster.server)
    user = str(getattr(single.context, "user", "") or "")
    kube = Kube(client, field_manager=field_manager, retries=retries, deadline=deadline, user=user)
    if check_server:
        try:
            kube.check_server()
        except BaseException:
            kube.close()
            raise
    return kube


def export_all(kube: Kube) -> Obj:
    """Every object of the built-in kinds and of every installed CRD, as one v1 List."""
    from gpushift._kinds import builtin_kinds

    refs = [ResourceRef.of(k) for k in builtin_kinds()]
    crds = kube.list(ResourceRef.named("CustomResourceDefinition"))
    for crd in crds:
        spec = crd.get("spec") or {}
        names = spec.get("names") or {}
        for version in spec.get("versions") or []:
            if version.get("storage"):
                refs.append(
                    ResourceRef(
                        str(spec.get("group")),
                        str(version.get("name")),
                        str(names.get("kind")),
                        str(names.get("plural")),
                        spec.get("scope") == "Namespaced",
                    )
                )
    items: list[Obj] = []
    seen: set[tuple[str, str]] = set()
    for ref in refs:
        if (ref.group, ref.plural) in seen:
            continue
        seen.add((ref.group, ref.plural))
        for obj in kube.list(ref):
            meta = {
                k: v
                for k, v in (obj.get("metadata") or {}).items()
                if k not in ("resourceVersion", "managedFields")
            }
            items.append({**obj, "metadata": meta})
    return {"apiVersion": "v1", "kind": "List", "metadata": {}, "items": items}
