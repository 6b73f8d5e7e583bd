"""The check behind "bad input gets a typed error before anything is
recorded": calls made inside a recorder on the host's command buffer raise
the expected error and leave that buffer as it was (no dispatch, no
barrier); the buffer is then submitted, so the validation layer sees
whatever was left in it."""
import pytest


def assert_refused(host, ctx, error, call, match=None):
    """``call(rec)`` raises ``error`` (its message matching ``match``) and records nothing."""
    assert_all_refused(host, ctx, [(error, call, match)])


def assert_all_refused(host, ctx, cases):
    """Each ``(error, call)`` or ``(error, call, match)`` of ``cases``, in
    one recorder: every call raises and nothing reaches the host's buffer."""
    cmd = host.begin()
    with ctx.record(cmd) as rec:
        for case in cases:
            error, call, match = (tuple(case) + (None,))[:3]
            with pytest.raises(error, match=match) as caught:
                call(rec)
            assert rec.dispatches == rec.barriers == 0, (error, caught.value)
    host.submit_and_wait(cmd)
