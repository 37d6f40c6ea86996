"""mlasim: aiter's MLA decode metadata planner, its plan checker and case capture, in Python.

    import mlasim
    p = mlasim.plan(kv_lens=[300, 40, 700], qlen=1, num_heads_per_head_k=16, cu_count=8)
    report = mlasim.check_plan(p)                   # or check_plan(buffers, kv_indptr=..., ...)
    mlasim.capture("/tmp/case", "mla_decode_fwd",   # a failing call, for `mlasim check /tmp/case`
                   config={"planner": p.planner_config}, **p.buffers(),
                   qo_indptr=..., kv_indptr=..., kv_last_page_lens=...)

    mlasim.check_call("mla_decode_fwd", "asm", plan=p, q=q, o=o)  # raises mlasim.PlanViolation

Documentation: docs/python.md.
"""

from . import _core
from ._planner import (BUFFER_NAMES, POISON, CheckReport, Diagnostic, Plan, check_plan,
                       make_request, plan, planner_config)
from ._check_call import PlanViolation, check_call
from .capture import capture

__version__ = _core.__version__
Request = _core.Request

__all__ = ["BUFFER_NAMES", "POISON", "CheckReport", "Diagnostic", "Plan", "PlanViolation", "Request", "capture",
           "check_call", "check_plan", "make_request", "plan", "planner_config", "__version__"]
