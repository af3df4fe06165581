"""A rehearsal's children and its signal relay, without a twin."""

from __future__ import annotations

import os
import signal
import time

import pytest

from gpushift_twin.rehearse import Interrupted, Lifetime


def test_the_first_signal_raises_once_and_every_child_is_stopped() -> None:
    life = Lifetime()
    before = signal.getsignal(signal.SIGINT)
    with life.relay():
        twin = life.spawn("twin", ["sleep", "60"], death_signal=signal.SIGKILL)
        cutover = life.spawn("cutover", ["sleep", "60"], death_signal=signal.SIGKILL)
        assert os.getpgid(cutover.pid) == cutover.pid  # a session of its own
        with pytest.raises(Interrupted) as caught:
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(5)
        assert caught.value.signum == signal.SIGTERM
        os.kill(os.getpid(), signal.SIGINT)  # a repeat does not cut the way out short
        life.stop_all()
    assert life.interrupted
    assert (twin.returncode, cutover.returncode) == (-signal.SIGTERM, -signal.SIGTERM)
    assert life.stopped == 2
    assert signal.getsignal(signal.SIGINT) is before  # restored


def test_a_child_ended_before_the_signal_is_not_counted() -> None:
    life = Lifetime()
    with life.relay():
        done = life.spawn("cutover", ["true"], death_signal=signal.SIGKILL)
        done.wait()
        life.stop(done)
        with pytest.raises(Interrupted):
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(5)
        life.stop_all()
    assert life.stopped == 0
