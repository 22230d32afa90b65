"""The headers a routing strategy sees: per flow, the 5-tuple the fabric's switches hash.

`tenancy/` fills them in (outer VXLAN headers for a tenant's flows, the flow's own
otherwise); strategies and the smartNIC's match stages read them and nothing more.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["Headers"]


@dataclass(frozen=True, eq=False)
class Headers:
    """The 5-tuple per flow that the fabric's switches see."""

    src_ip: np.ndarray
    dst_ip: np.ndarray
    proto: np.ndarray
    sport: np.ndarray
    dport: np.ndarray

    def fields(self) -> list[np.ndarray]:
        """The five fields in hashing order."""
        return [self.src_ip, self.dst_ip, self.proto, self.sport, self.dport]
