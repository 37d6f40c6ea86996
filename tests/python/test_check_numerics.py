"""Numerics inside `mlasim check`: a decode call captured with q, the KV cache, its page table,
o and lse is run by the project's CPU reference with the captured plan; o and lse computed
independently here (torch, fp32, rounded to bf16) pass within the documented tolerance, and a
corrupted o row, a NaN in a real row or a wrong lse fail naming the row."""

import json

import numpy as np
import pytest
import torch

import mlasim
from conftest import WORKED, run_check

HEADS, D, DV = 16, 576, 512


def attention(q, kv, kv_indptr, kv_indices):
    """Monolithic MLA decode (qlen 1): o [B, H, Dv] in fp32 and lse [B, H]."""
    o, lse = [], []
    for b in range(q.shape[0]):
        rows = kv_indices[kv_indptr[b]:kv_indptr[b + 1]]
        k = kv[rows, 0, :].float()  # [n, D]
        s = q[b].float() @ k.t() / D ** 0.5  # [H, n]
        o.append(torch.softmax(s, dim=-1) @ k[:, :DV])
        lse.append(torch.logsumexp(s, dim=-1))
    return torch.stack(o), torch.stack(lse)


def decode_case(path, corrupt=None, dtype=torch.bfloat16):
    plan = mlasim.plan(**WORKED)  # 3 requests, KV 300 / 40 / 700, 8 clusters: split requests
    req = plan.request
    kv_indptr = np.asarray(req.kv_indptr, np.int32)
    tokens = int(kv_indptr[-1])
    g = torch.Generator().manual_seed(7)
    q = (torch.rand(3, HEADS, D, generator=g) * 2 - 1).to(dtype)
    kv = (torch.rand(tokens + 5, 1, D, generator=g) * 2 - 1).to(dtype)
    kv_indices = torch.randperm(tokens + 5, generator=g)[:tokens].to(torch.int32)
    o, lse = attention(q, kv, kv_indptr, kv_indices.long())
    o = o.to(dtype)
    if corrupt:
        corrupt(o, lse)
    names = {torch.float16: "fp16", torch.float32: "fp32"}
    config = {"planner": plan.planner_config}
    if dtype in names:
        config["planner"] = mlasim.planner_config(**{**{k: v for k, v in WORKED.items()
                                                       if k != "kv_lens"},
                                                    "q_dtype": names[dtype],
                                                    "kv_dtype": names[dtype]})
    return mlasim.capture(path, "mla_decode_fwd", config=config,
                          **plan.buffers(), q=q, kv_buffer=kv, kv_indices=kv_indices, o=o,
                          lse=lse, kv_indptr=kv_indptr,
                          qo_indptr=np.asarray(req.qo_indptr, np.int32),
                          kv_last_page_lens=np.asarray(req.kv_last_page_lens, np.int32))


def numerics(mlasim_bin, case):
    r = run_check(mlasim_bin, case, "--json")
    return r, json.loads(r.stdout) if r.stdout else None


def test_an_independently_computed_o_and_lse_pass(tmp_path, mlasim_bin):
    case = decode_case(tmp_path / "case")
    r, j = numerics(mlasim_bin, case)
    assert r.returncode == 0, r.stdout + r.stderr
    n = j["numerics"]
    assert n["ran"] and n["passed"]
    assert (n["real_rows"], n["heads"], n["head_dim_qk"], n["head_dim_v"]) == (3, 16, 576, 512)
    assert (n["q_format"], n["kv_format"], n["out_format"]) == ("bf16", "bf16", "bf16")
    assert n["o"]["rows_compared"] == 3 and n["o"]["elements"] == 3 * 16 * 512
    assert n["o"]["rows_differing"] == [] and n["lse"]["rows_differing"] == []
    # A bf16 rounding apart at most: within the derived tolerance (docs/numerics.md).
    assert 0 < n["o"]["max_abs"] <= n["o"]["atol"] + n["o"]["rtol"]
    assert n["lse"]["max_abs"] < 1e-4
    text = run_check(mlasim_bin, case).stdout
    assert ("numerics: the captured outputs vs the reference over the captured plan (3 real "
            "rows, 16 heads, D 576 Dv 512, page 1, q bf16, KV bf16, o bf16)\n") in text
    assert "within tolerance" in text and "\nverdict: ok\n" in text


@pytest.mark.parametrize("dtype,name", [(torch.float16, "fp16"), (torch.float32, "fp32")])
def test_fp16_and_fp32_captures_pass_within_their_tolerance(tmp_path, mlasim_bin, dtype, name):
    r, j = numerics(mlasim_bin, decode_case(tmp_path / "case", dtype=dtype))
    assert r.returncode == 0, r.stdout + r.stderr
    n = j["numerics"]
    assert (n["q_format"], n["kv_format"], n["out_format"]) == (name, name, name)
    assert n["passed"] and n["o"]["max_abs"] <= n["o"]["atol"] + n["o"]["rtol"]
    if dtype == torch.float32:  # no rounding of P or o: the fp32 accumulation bound alone
        assert n["o"]["atol"] < 1e-4 and n["o"]["max_abs"] < 1e-5


def test_a_corrupted_o_row_fails_naming_the_row(tmp_path, mlasim_bin):
    def corrupt(o, lse):
        o[1, 5, 100] += 0.25
    case = decode_case(tmp_path / "case", corrupt)
    r, j = numerics(mlasim_bin, case)
    assert r.returncode == 1, r.stderr
    o = j["numerics"]["o"]
    assert (o["rows_differing"], o["rows_differing_count"], o["elements_outside"]) == ([1], 1, 1)
    assert o["max_abs_row"] == 1 and 0.2 < o["max_abs"] < 0.3
    assert j["numerics"]["lse"]["passed"]
    assert "numerics: o differs from the reference in 1 of 3 real rows (first: 1)" in j["findings"]
    text = run_check(mlasim_bin, case).stdout
    assert "       rows 1: 1 element(s) outside tolerance, 0 NaN/Inf in the capture, 0 NaN in " \
           "the reference\n" in text


def test_nan_in_a_real_row_and_a_wrong_lse_fail(tmp_path, mlasim_bin):
    def corrupt(o, lse):
        o[2, 0, 0] = float("nan")
        lse[0, 3] += 1.0
    case = decode_case(tmp_path / "case", corrupt)
    r, j = numerics(mlasim_bin, case)
    assert r.returncode == 1
    assert j["numerics"]["o"]["rows_differing"] == [2]
    assert j["numerics"]["o"]["nonfinite_elements"] == 1
    assert j["numerics"]["lse"]["rows_differing"] == [0]


def test_without_the_kv_cache_numerics_say_what_is_missing(tmp_path, mlasim_bin):
    plan = mlasim.plan(**WORKED)
    case = mlasim.capture(tmp_path / "case", "mla_decode_fwd",
                          config={"planner": plan.planner_config}, **plan.buffers(),
                          o=torch.zeros(3, HEADS, DV, dtype=torch.bfloat16),
                          kv_indptr=np.asarray(plan.request.kv_indptr, np.int32),
                          qo_indptr=np.asarray(plan.request.qo_indptr, np.int32),
                          kv_last_page_lens=np.asarray(plan.request.kv_last_page_lens, np.int32))
    r, j = numerics(mlasim_bin, case)
    assert j["numerics"] == {"ran": False,
                             "reason": "the case has no q, kv_buffer (or kv_cache, kv), kv_indices"}


@pytest.mark.parametrize("what,field,message", [
    ("o_dtype", "tensors.o.dtype", "dtype int32 is not one the numerics reads (bfloat16, float16, "
                                   "float32)"),
    ("o_heads", "tensors.o.shape", "o and q have different head counts"),
    ("kv_width", "tensors.kv_buffer.shape", "the KV cache must be [..., D] with q's D = 576"),
    ("lse_dtype", "tensors.lse.dtype", "must be float32"),
    ("scale", "config.numerics.kv_scale", "must be a finite number > 0 and <= 1e6"),
    ("scale_huge", "config.numerics.sm_scale", "must be a finite number > 0 and <= 1e6"),
    ("scale_typo", "config.numerics.kv_scal", "unknown key (known: q_scale, kv_scale, sm_scale)"),
    ("numerics_null", "config.numerics", "must be an object of q_scale, kv_scale, sm_scale"),
])
def test_bad_numerics_inputs_exit_2_naming_the_field(tmp_path, mlasim_bin, what, field, message):
    plan = mlasim.plan(**WORKED)
    req = plan.request
    tensors = dict(q=torch.zeros(3, HEADS, D, dtype=torch.bfloat16),
                   kv_buffer=torch.zeros(1040, 1, D, dtype=torch.bfloat16),
                   kv_indices=torch.arange(1040, dtype=torch.int32),
                   o=torch.zeros(3, HEADS, DV, dtype=torch.bfloat16),
                   lse=torch.zeros(3, HEADS, dtype=torch.float32))
    config = {"planner": plan.planner_config}
    if what == "o_dtype":
        tensors["o"] = torch.zeros(3, HEADS, DV, dtype=torch.int32)
    elif what == "o_heads":
        tensors["o"] = torch.zeros(3, 8, DV, dtype=torch.bfloat16)
    elif what == "kv_width":
        tensors["kv_buffer"] = torch.zeros(1040, 1, 512, dtype=torch.bfloat16)
    elif what == "lse_dtype":
        tensors["lse"] = torch.zeros(3, HEADS, dtype=torch.bfloat16)
    elif what == "scale_huge":
        config["numerics"] = {"sm_scale": 1.0000001e6}
    elif what == "scale_typo":
        config["numerics"] = {"kv_scal": 1}
    elif what == "numerics_null":
        config["numerics"] = None
    else:
        config["numerics"] = {"kv_scale": 0}
    case = mlasim.capture(tmp_path / "case", "mla_decode_fwd", config=config, **plan.buffers(),
                          **tensors, kv_indptr=np.asarray(req.kv_indptr, np.int32),
                          qo_indptr=np.asarray(req.qo_indptr, np.int32),
                          kv_last_page_lens=np.asarray(req.kv_last_page_lens, np.int32))
    r = run_check(mlasim_bin, case)
    assert r.returncode == 2, r.stdout
    assert r.stderr == f"mlasim check: error: {case}/manifest.json:{field}: {message}\n"


# aiter-native sparse mode (docs/aiter-mla-metadata.md §8.1): 3 requests of L = 2 tokens, per
# request KV 300 / 40 / 700, top-k 64, page 1 (qlen 2 sizes the buffers for 6 tokens).
# kv_indices is the flattened [6, 64] matrix of KV-cache rows; token t uses its first
# min(kv tokens, 64) entries, -1 masked.
SPARSE = dict(kv_indptr=np.array([0, 300, 340, 1040], np.int32),
              qo_indptr=np.array([0, 2, 4, 6], np.int32),
              kv_last_page_lens=np.array([1, 1, 1], np.int32),
              max_seqlen_qo=1, qlen=2, topk=64, num_heads_per_head_k=16, cu_count=8)


def sparse_attention(q, kv, kv_indptr, qo_indptr, matrix, topk):
    """Non-causal attention of each token over its own index list (aiter's test_mla_sparse)."""
    o, lse = [], []
    for b in range(len(qo_indptr) - 1):
        n = min(int(kv_indptr[b + 1] - kv_indptr[b]), topk)
        for t in range(qo_indptr[b], qo_indptr[b + 1]):
            rows = matrix[t, :n]
            rows = rows[rows >= 0].long()
            k = kv[rows, 0, :].float()
            s = q[t].float() @ k.t() / D ** 0.5
            o.append(torch.softmax(s, dim=-1) @ k[:, :DV])
            lse.append(torch.logsumexp(s, dim=-1))
    return torch.stack(o), torch.stack(lse)


def sparse_case(path, flat=False, corrupt=None):
    plan = mlasim.plan(**SPARSE)
    g = torch.Generator().manual_seed(11)
    q = (torch.rand(6, HEADS, D, generator=g) * 2 - 1).to(torch.bfloat16)
    kv = (torch.rand(1100, 1, D, generator=g) * 2 - 1).to(torch.bfloat16)
    matrix = torch.randint(0, 1100, (6, 64), generator=g, dtype=torch.int32)
    matrix[1, 3] = -1  # an invalid entry: masked by the kernel and by the reference
    o, lse = sparse_attention(q, kv, SPARSE["kv_indptr"], SPARSE["qo_indptr"], matrix, 64)
    o = o.to(torch.bfloat16)
    if corrupt:
        corrupt(o, lse)
    return mlasim.capture(path, "mla_decode_fwd", config={"planner": plan.planner_config},
                          **plan.buffers(), q=q, kv_buffer=kv,
                          kv_indices=matrix.reshape(-1) if flat else matrix, o=o, lse=lse,
                          kv_indptr=SPARSE["kv_indptr"], qo_indptr=SPARSE["qo_indptr"],
                          kv_last_page_lens=SPARSE["kv_last_page_lens"])


@pytest.mark.parametrize("flat", [False, True])
def test_a_sparse_topk_call_passes_against_an_independent_reference(tmp_path, mlasim_bin, flat):
    r, j = numerics(mlasim_bin, sparse_case(tmp_path / "case", flat=flat))
    assert r.returncode == 0, r.stdout + r.stderr
    n = j["numerics"]
    assert n["ran"] and n["passed"], n
    assert n["real_rows"] == 6 and n["o"]["elements"] == 6 * 16 * 512
    assert n["lse"]["max_abs"] < 1e-4


def test_a_corrupted_sparse_row_fails_naming_it(tmp_path, mlasim_bin):
    def corrupt(o, lse):
        o[4, 2, 7] += 0.5
    r, j = numerics(mlasim_bin, sparse_case(tmp_path / "case", corrupt=corrupt))
    assert r.returncode == 1
    assert j["numerics"]["o"]["rows_differing"] == [4]


def test_a_sparse_matrix_of_the_wrong_width_exits_2(tmp_path, mlasim_bin):
    plan = mlasim.plan(**SPARSE)
    case = mlasim.capture(tmp_path / "case", "mla_decode_fwd",
                          config={"planner": plan.planner_config}, **plan.buffers(),
                          q=torch.zeros(6, HEADS, D, dtype=torch.bfloat16),
                          kv_buffer=torch.zeros(1100, 1, D, dtype=torch.bfloat16),
                          kv_indices=torch.zeros(6, 32, dtype=torch.int32),
                          o=torch.zeros(6, HEADS, DV, dtype=torch.bfloat16),
                          kv_indptr=SPARSE["kv_indptr"], qo_indptr=SPARSE["qo_indptr"],
                          kv_last_page_lens=SPARSE["kv_last_page_lens"])
    r = run_check(mlasim_bin, case)
    assert r.returncode == 2, r.stdout
    assert r.stderr == (f"mlasim check: error: {case}/manifest.json:tensors.kv_indices.shape: "
                        f"(6, 32) is not [rows, topk = 64]\n")
