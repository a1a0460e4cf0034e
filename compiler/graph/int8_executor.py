"""The int8 reference executor: a quantized graph run with numpy, each node by its op's int8
(else float) kernel from the registry: the bit-exact specification of what VTA computes."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from ..ops import kernel_for
from .ir import Graph
from .reference import check_feeds


def run_quantized(g: Graph, feeds: Mapping[str, np.ndarray], *, keep: bool = False
                  ) -> dict[str, np.ndarray]:
    """The int8 reference: execute a quantized graph with numpy (bit-exact VTA spec)."""
    env: dict[str, Any] = dict(g.params)
    env.update(check_feeds(g, feeds))
    for n in g.nodes:
        res = kernel_for(n.op)(n, [env[i] if i else None for i in n.inputs])
        for o, v in zip(n.outputs, res):
            env[o] = v
    return env if keep else {o: env[o] for o in g.outputs}
