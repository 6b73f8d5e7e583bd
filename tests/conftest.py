"""Fixtures: every GPU test runs on a HeadlessHost under the Khronos
validation layer with synchronization validation; any message it reports
fails the test. GUESTCOMPUTE_TEST_VALIDATION=0 runs without the layer, for
GPU machines that lack it (``make test`` never sets it)."""
import os
import tempfile

import pytest

os.environ.setdefault("XDG_RUNTIME_DIR", tempfile.mkdtemp(prefix="xdg-"))
os.environ.setdefault("GUESTCOMPUTE_CACHE_DIR", os.path.join(tempfile.gettempdir(), "guestcompute-test-cache"))

from guestcompute.testing import HeadlessHost  # noqa: E402

VALIDATION = os.environ.get("GUESTCOMPUTE_TEST_VALIDATION", "1") != "0"

_hosts = {}


def _host(profile, copy: int = 0):
    # One host per profile for the whole run: creating devices under the
    # validation layer is the slow part of a test. ``copy`` 1 is a second
    # host of the profile: its own instance and VkDevice on the same
    # physical device (the interop tests share memory between the two).
    # "bfloat16" is the modern profile with VK_KHR_shader_bfloat16 enabled
    # and the messages the layer gives only for not knowing that extension
    # set aside (guestcompute/testing.py says which, and why).
    if (profile, copy) not in _hosts:
        bf16 = profile == "bfloat16"
        _hosts[profile, copy] = HeadlessHost("modern" if bf16 else profile, validation=VALIDATION, bfloat16=bf16)
    return _hosts[profile, copy]


def pytest_sessionfinish(session, exitstatus):
    for h in _hosts.values():
        h.close()
    _hosts.clear()


def _check_clean(host):
    msgs = list(host.messages)
    host.messages.clear()
    assert not msgs, "validation layer reported:\n" + "\n\n".join(msgs)


def _validated(profile, copy: int = 0):
    """The shared host of ``profile``, with its messages checked after the test."""
    h = _host(profile, copy)
    h.messages.clear()
    yield h
    _check_clean(h)


@pytest.fixture(params=["bare", "modern"])
def host(request):
    yield from _validated(request.param)


@pytest.fixture
def modern_host():
    yield from _validated("modern")


@pytest.fixture
def bfloat16_host():
    yield from _validated("bfloat16")


@pytest.fixture
def second_host():
    """A second "modern" host: another VkDevice of the same physical device."""
    yield from _validated("modern", copy=1)


@pytest.fixture
def bare_host():
    yield from _validated("bare")


@pytest.fixture
def ctx(host):
    c = host.adopt()
    yield c
    c.close()


@pytest.fixture
def modern_ctx(modern_host):
    c = modern_host.adopt()
    yield c
    c.close()

