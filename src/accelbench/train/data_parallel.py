"""DataParallel whose replicas compute in the precision of the step that calls it.

torch's `parallel_apply` runs each replica in a thread of its own and enters
autocast there with `enabled` alone. Autocast's dtype is per thread, and a new
thread starts from the default (float16 on CUDA): under bf16 autocast the
replicas would compute in float16 while the record says bf16. Each replica here
enters autocast with the caller's dtype itself.
"""

from __future__ import annotations

import torch
from torch import nn


class PrecisionDataParallel(nn.DataParallel):
    """nn.DataParallel, its replicas in the caller's autocast dtype."""

    def parallel_apply(self, replicas, inputs, kwargs):
        device_type = self.src_device_obj.type
        if torch.is_autocast_enabled(device_type):
            dtype = torch.get_autocast_dtype(device_type)
            replicas = [_in_autocast(replica, device_type, dtype) for replica in replicas]
        return super().parallel_apply(replicas, inputs, kwargs)


def _in_autocast(replica, device_type: str, dtype):
    """`replica` called under autocast in `dtype`, whichever thread calls it."""

    def forward(*args, **kwargs):
        with torch.autocast(device_type, dtype=dtype):
            return replica(*args, **kwargs)

    return forward
