"""A pass runs with the cyclic garbage collector paused, and leaves it as it found it."""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator

import pytest

from gpushift_twin.cluster import collector_paused


@pytest.fixture
def enabled() -> Iterator[None]:
    was = gc.isenabled()
    gc.enable()
    yield
    if not was:
        gc.disable()


def test_paused_inside_and_running_again_after(enabled: None) -> None:
    with collector_paused():
        assert not gc.isenabled()
    assert gc.isenabled()


def test_nested_and_concurrent_passes_resume_it_when_the_last_ends(enabled: None) -> None:
    inside, release = threading.Event(), threading.Event()

    def other_pass() -> None:
        with collector_paused():
            inside.set()
            release.wait(10)

    t = threading.Thread(target=other_pass)
    with collector_paused():
        t.start()
        assert inside.wait(10)
        with collector_paused():
            pass
        assert not gc.isenabled()
    assert not gc.isenabled()  # the other thread's pass still runs
    release.set()
    t.join(10)
    assert gc.isenabled()


def test_a_collector_that_was_off_stays_off(enabled: None) -> None:
    gc.disable()
    with collector_paused():
        assert not gc.isenabled()
    assert not gc.isenabled()


def test_an_exception_in_the_pass_still_resumes_it(enabled: None) -> None:
    with pytest.raises(RuntimeError), collector_paused():
        raise RuntimeError("agent failed")
    assert gc.isenabled()
