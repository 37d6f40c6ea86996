"""Shared fixtures of the mlasim Python tests (run by ctest's python_tests with /usr/bin/python3:
PYTHONPATH=<build>/python, MLASIM_BIN=<build>/bin/mlasim)."""

import os
import pathlib
import subprocess

import numpy as np
import pytest

import mlasim

SOURCE_DIR = pathlib.Path(os.environ.get("MLASIM_SOURCE_DIR",
                                         pathlib.Path(__file__).resolve().parents[2]))
GOLDEN_DIR = pathlib.Path(os.environ.get("MLASIM_GOLDEN_DIR", SOURCE_DIR / "tests" / "golden"))

# aiter-mla-metadata.md §6.1 (docs/cli.md's example): KV lengths 300, 40, 700, qlen 1, 16 heads,
# 8 clusters, page 1, granularity 16.
WORKED = dict(kv_lens=[300, 40, 700], qlen=1, num_heads_per_head_k=16, cu_count=8)
WORKED_ARRAYS = dict(kv_indptr=np.array([0, 300, 340, 1040], np.int32),
                     qo_indptr=np.array([0, 1, 2, 3], np.int32),
                     kv_last_page_lens=np.array([1, 1, 1], np.int32))
WORKED_WORK_INFO = [[0, 0, 0, 1, 0, 240, 60, 0],
                    [0, 1, 0, 1, 240, 300, 0, 0],
                    [1, -1, 1, 2, 300, 340, 0, 0],
                    [2, 2, 2, 3, 340, 580, 460, 0],
                    [2, 3, 2, 3, 580, 820, 220, 0],
                    [2, 4, 2, 3, 820, 1040, 0, 0]]


@pytest.fixture
def mlasim_bin():
    path = os.environ.get("MLASIM_BIN")
    if not path:
        pytest.fail("MLASIM_BIN is not set (ctest sets it to <build>/bin/mlasim)")
    return path


def run_check(mlasim_bin, *args):
    return subprocess.run([mlasim_bin, "check", *map(str, args)], capture_output=True, text=True,
                          timeout=120)


def worked_plan(**kw):
    return mlasim.plan(**{**WORKED, **kw})
