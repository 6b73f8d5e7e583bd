"""The encoder's hot path inlines DispatchPlan.is_current_for (the one rule
for reusing a resolved plan); these tests hold the inline equal to the rule."""
from types import SimpleNamespace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from guestcompute.recording import encoder as encoder_module
from guestcompute.recording.dispatch_plan import DispatchPlan
from guestcompute.recording.encoder import Encoder


def _plan(ctx, spec, buffers, indirect, bindings, images):
    plan = DispatchPlan.__new__(DispatchPlan)
    plan.ctx, plan.spec, plan.bindings, plan.indirect = ctx, spec, buffers, indirect
    plan.image_bindings = tuple(SimpleNamespace(still_current=c) for c in bindings)
    plan.images = images
    return plan


@settings(max_examples=300, deadline=None)
@given(same_ctx=st.booleans(), same_spec=st.booleans(), same_buffers=st.booleans(),
       same_indirect=st.booleans(), bindings=st.lists(st.booleans(), max_size=3),
       entry_images=st.booleans())
def test_hot_path_reuses_exactly_the_plans_the_rule_allows(same_ctx, same_spec, same_buffers, same_indirect,
                                                          bindings, entry_images):
    ctx, spec, buffers, indirect = object(), object(), (object(),), None
    plan = _plan(ctx if same_ctx else object(), spec if same_spec else object(),
                 buffers if same_buffers else (object(),), indirect if same_indirect else (object(), 0),
                 bindings, (("image", True),) if entry_images else ())
    d = SimpleNamespace(spec=spec, bindings=buffers, indirect=indirect, resolved=plan)
    replanned, recorded = [], []
    fake = SimpleNamespace(ctx=ctx, _hits=0, record=lambda dd, p: recorded.append(p),
                           _check_images=lambda plans: None)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(encoder_module, "plan_for", lambda c, dd: replanned.append(dd) or plan)
        Encoder.record_all(fake, [d])
    reused = not replanned
    assert reused == (plan.is_current_for(ctx, d) and not plan.images)
    assert recorded == [plan]
