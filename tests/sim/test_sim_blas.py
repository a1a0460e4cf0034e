"""vta.sim.blas.exact_matmul (fsim's GEMMs and the int8 reference's conv/dense) against numpy's
int64 matmul, at the bounds where each float type stops being exact."""

from __future__ import annotations

import numpy as np
import pytest
from vta.sim.blas import exact_matmul

I8, I16 = np.int8, np.int16


def _want(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return a.astype(np.int64) @ b.astype(np.int64).T


def _extreme(rng: np.random.Generator, shape: tuple[int, int], dtype) -> np.ndarray:
    """Random values, half of them at the ends of the range (the largest products)."""
    info = np.iinfo(dtype)
    x = rng.integers(info.min, info.max + 1, shape, dtype=np.int64)
    ends = rng.random(shape) < 0.5
    x[ends] = rng.choice([info.min, info.min + 1, info.max], int(ends.sum()))
    return x.astype(dtype)


def _one_more(k: int, da, db) -> tuple[np.ndarray, np.ndarray, int]:
    """1 x k times 1 x k: k - 1 largest products (min * min) plus 1 * 1. The sum is odd, so a
    float whose spacing at that magnitude is 2 or more rounds it."""
    a, b = np.full((1, k), np.iinfo(da).min, da), np.full((1, k), np.iinfo(db).min, db)
    a[0, -1] = b[0, -1] = 1
    return a, b, (k - 1) * int(np.iinfo(da).min) * int(np.iinfo(db).min) + 1


@pytest.mark.parametrize("k, dtype", [(1024, np.int32), (131071, np.int32), (131072, np.int64)])
def test_int8_at_the_float32_and_int32_bounds(k: int, dtype) -> None:
    """1024 products of (-128) * (-128) sum to exactly 2^24 (float32's last exact integer in a
    row); 131072 of them to 2^31, which needs int64."""
    a, b = np.full((2, k), -128, I8), np.full((3, k), -128, I8)
    got = exact_matmul(a, b)
    assert got.dtype == dtype
    assert np.array_equal(got, np.full((2, 3), k << 14, np.int64))


@pytest.mark.parametrize("k", [1025, 2049, 5000])
def test_int8_just_above_2_24_is_sliced(k: int) -> None:
    """2^24 + 1 and beyond: one float32 product would round; slices of 1024 columns do not."""
    a, b, want = _one_more(k, I8, I8)
    assert want > 1 << 24 and int(np.float32(want)) != want
    got = exact_matmul(a, b)
    assert got.dtype == np.int32 and int(got[0, 0]) == want


@pytest.mark.parametrize("m, n, k", [(1, 1, 1), (5, 7, 1024), (3, 1300, 2500), (1, 4096, 1100),
                                     (63, 300, 3000), (64, 300, 3000), (130, 40, 2049),
                                     (200, 64, 27), (2, 2000, 600)])
def test_int8_random_against_int64(m: int, n: int, k: int) -> None:
    """Single products, slices of the reduction, and row blocks of b (fewer than 64 rows in a
    and more than 2^20 elements in a float slice of b), with partial last slices and blocks;
    negative and extreme values."""
    rng = np.random.default_rng(m * 7919 + n * 31 + k)
    a, b = _extreme(rng, (m, k), I8), _extreme(rng, (n, k), I8)
    got = exact_matmul(a, b)
    assert got.dtype == np.int32
    assert np.array_equal(got, _want(a, b))


def test_strided_views() -> None:
    """Non-contiguous operands (the int8 reference's im2col views, fsim's gathered tiles)."""
    rng = np.random.default_rng(1)
    a, b = _extreme(rng, (40, 4100), I8), _extreme(rng, (600, 2100), I8)
    av, bv = a[::2, ::2], b[::2, 1:2051]
    assert np.array_equal(exact_matmul(av, bv), _want(av, bv))


@pytest.mark.parametrize("k, work", [(4, "float32"), (5, "float64"), (511, "float64"),
                                     (512, "float64")])
def test_int16_by_int8(k: int, work: str) -> None:
    """Products up to 2^22: four columns still fit float32 (a sum of exactly 2^24), five need
    float64 (2^24 + 1 would round in float32); int64 results from 512 columns (2^31) on."""
    a, b, want = _one_more(k, I16, I8)
    if work == "float32":
        a[0, -1] = -32768
        b[0, -1] = -128
        want = 1 << 24
    else:
        assert int(np.float32(want)) != want
    got = exact_matmul(a, b)
    assert int(got[0, 0]) == want
    assert got.dtype == (np.int64 if k >= 512 else np.int32)
    rng = np.random.default_rng(k)
    a, b = _extreme(rng, (9, k), I16), _extreme(rng, (11, k), I8)
    assert np.array_equal(exact_matmul(a, b), _want(a, b))
    assert np.array_equal(exact_matmul(b, a), _want(b, a))


def test_int16_by_int8_deep_in_row_blocks() -> None:
    """A deep float64 product with few rows: b is cast a row at a time."""
    rng = np.random.default_rng(3)
    a, b = _extreme(rng, (2, 300000), I16), _extreme(rng, (5, 300000), I8)
    got = exact_matmul(a, b)
    assert got.dtype == np.int64 and np.array_equal(got, _want(a, b))


def test_int16_by_int16_beyond_int32() -> None:
    """Two products of (-32768)^2 are 2^31: int64 results (float64 work)."""
    a = np.full((2, 2), -32768, I16)
    got = exact_matmul(a, a)
    assert got.dtype == np.int64 and np.array_equal(got, np.full((2, 2), 1 << 31))
    rng = np.random.default_rng(2)
    a, b = _extreme(rng, (17, 300), I16), _extreme(rng, (13, 300), I16)
    assert np.array_equal(exact_matmul(a, b), _want(a, b))


def test_beyond_float64_falls_back_to_int64() -> None:
    """2^23 products of 2^30 plus 1 * 1 is 2^53 + 1, which float64 rounds."""
    a, b, want = _one_more((1 << 23) + 1, I16, I16)
    assert want == (1 << 53) + 1 and int(np.float64(want)) != want
    got = exact_matmul(a, b)
    assert got.dtype == np.int64 and int(got[0, 0]) == want


@pytest.mark.parametrize("m, n, k", [(0, 5, 10), (5, 0, 10), (4, 6, 0), (0, 0, 0), (70, 0, 2000),
                                     (3, 0, 2000), (0, 300, 2000)])
def test_empty_dimensions(m: int, n: int, k: int) -> None:
    got = exact_matmul(np.ones((m, k), I8), np.ones((n, k), I8))
    assert got.shape == (m, n) and got.dtype == np.int32 and not got.any()


@pytest.mark.parametrize("da, db", [(np.int32, I8), (I8, np.uint8), (np.float32, I8),
                                    (I8, np.int64)])
def test_other_dtypes_are_refused(da, db) -> None:
    with pytest.raises(TypeError, match="int8 or int16"):
        exact_matmul(np.zeros((2, 3), da), np.zeros((2, 3), db))


def test_mismatched_reduction_is_refused() -> None:
    with pytest.raises(ValueError, match="same number of columns"):
        exact_matmul(np.zeros((2, 3), I8), np.zeros((2, 4), I8))
