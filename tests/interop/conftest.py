"""A second host for the interop tests: its own instance and VkDevice on
the same physical device as the shared "modern" host, validated the same
way (any message fails the test)."""
import os

import pytest

from guestcompute.testing import HeadlessHost

VALIDATION = os.environ.get("GUESTCOMPUTE_TEST_VALIDATION", "1") != "0"


@pytest.fixture(scope="session")
def _second_device():
    h = HeadlessHost("modern", validation=VALIDATION)
    yield h
    h.close()


@pytest.fixture
def second_host(_second_device):
    _second_device.messages.clear()
    yield _second_device
    msgs = list(_second_device.messages)
    _second_device.messages.clear()
    assert not msgs, "validation layer reported (second device):\n" + "\n\n".join(msgs)


@pytest.fixture
def pair(modern_host, second_host):
    """(host A, ctx A, host B, ctx B): contexts on two VkDevices of one
    physical device, both able to share memory."""
    a, b = modern_host.adopt(), second_host.adopt()
    if not (a.caps.external_memory_fd and b.caps.external_memory_fd):
        a.close(), b.close()
        pytest.skip("the device does not offer VK_KHR_external_memory_fd")
    yield modern_host, a, second_host, b
    a.close()
    b.close()
