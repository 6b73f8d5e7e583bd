"""Fixtures of the op tests."""
import pytest

from single_pass import forced_single_pass


@pytest.fixture(params=["device", "single_pass"])
def either_ctx(host, request):
    """A fresh context of ``host`` as its device is, or one whose device
    claims forward progress, so the single-pass kernels run."""
    c = forced_single_pass(host) if request.param == "single_pass" else host.adopt()
    yield c
    c.close()
