from gpushift._kinds import KINDS, by_kind, lookup


def test_each_kind_is_declared_once() -> None:
    keys = [(k.api_version, k.kind) for k in KINDS]
    assert len(keys) == len(set(keys))


def test_paths_follow_the_api_layout() -> None:
    assert by_kind("Pod").path(namespace="a", name="b") == "/api/v1/namespaces/a/pods/b"
    rs = lookup("resource.k8s.io/v1", "ResourceSlice")
    assert rs is not None and not rs.namespaced
    assert rs.path(name="x") == "/apis/resource.k8s.io/v1/resourceslices/x"
