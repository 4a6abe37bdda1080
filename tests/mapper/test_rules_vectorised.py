"""Each Lustre rule of lustre_alloc/mapper/state/ost_health.py that has a vectorised form agrees with its
scalar form on random inputs (one rule, two forms side by side)."""
from __future__ import annotations

import errno

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from lustre_alloc.mapper.state.cluster_state import OstFlag
from lustre_alloc.mapper.state.ost_health import (PREALLOC_ENOSPC, enospc_reserve_bytes, enospc_watermarks_kib,
                                     enospc_watermarks_kib_array, is_enospc, is_enospc_array,
                                     lnet_load_percent, osp_view)

KIB_TOTALS = st.integers(min_value=0, max_value=1 << 40)       # up to 1 PiB OSTs, KiB
OSTS = st.lists(st.tuples(KIB_TOTALS, st.integers(0, 1 << 40), st.booleans()),
                min_size=1, max_size=50)


@settings(max_examples=200, deadline=None)
@given(OSTS)
def test_enospc_scalar_and_vector_forms_agree(osts):
    total = np.array([t for t, _, _ in osts], dtype=np.int64)
    avail = np.array([a for _, a, _ in osts], dtype=np.int64)
    was = np.array([w for _, _, w in osts], dtype=bool)
    low, high = enospc_watermarks_kib_array(total)
    assert [(int(a), int(b)) for a, b in zip(low, high)] == [enospc_watermarks_kib(t) for t in total]
    got = is_enospc_array(avail, total, was)
    assert got.tolist() == [is_enospc(int(a), int(t), bool(w)) for a, t, w in zip(avail, total, was)]
    # the rate cost's reserve is the high watermark, in bytes
    assert enospc_reserve_bytes(total).tolist() == [float(enospc_watermarks_kib(t)[1]) * 1024
                                                    for t in total]


def test_enospc_hysteresis_known_values():
    total = 8 << 30          # an 8 TiB OST (KiB): low 8192 MiB (0.1 %), high 16385 MiB
    low, high = 8192 * 1024, 16385 * 1024
    assert enospc_watermarks_kib(total) == (low, high)
    assert is_enospc(low - 1, total, False) and not is_enospc(low, total, False)
    assert is_enospc(high, total, True) and not is_enospc(high + 1, total, True)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.floats(0, 1e11), st.floats(0, 1e11)), min_size=1, max_size=20),
       st.floats(1e6, 1e11))
def test_lnet_load_scalar_and_vector_forms_agree(pairs, link):
    send = np.array([s for s, _ in pairs])
    recv = np.array([r for _, r in pairs])
    vec = lnet_load_percent(send, recv, link)
    assert vec.tolist() == [float(lnet_load_percent(s, r, link)) for s, r in pairs]
    assert ((vec >= 0) & (vec <= 100)).all()


def test_osp_view_uses_errno_names():
    assert PREALLOC_ENOSPC == -errno.ENOSPC
    assert osp_view(True, OstFlag(0), True, None, -errno.ENOSPC) == (True, OstFlag.ENOSPC)
    assert osp_view(True, OstFlag(0), True, 0, 0) == (True, OstFlag.NOPRECREATE)
    assert osp_view(True, OstFlag(0), True, None, -errno.EIO)[0] is False
    assert osp_view(True, OstFlag(0), False, None, 0)[0] is False
