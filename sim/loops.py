"""Index analysis of GEMM and ALU loop nests for the functional simulator.

A GEMM or ALU instruction runs ``iter_out x iter_in x (uop_end - uop_bgn)`` micro-ops whose
indices are ``uop.idx + o * factor_out + i * factor_in``. This module works out, once per loop nest
(fsim caches the results), how to run them as a few numpy operations with exactly the sequential
result:

- :func:`dense_plan`: is the GEMM a dense block matrix product (dst a function of (m, n), src of
  (m, k), wgt of (n, k))? Then it is one BLAS matrix product.
- :class:`GeneralPlan`: any other GEMM: products per micro-op (from a table of all input x weight
  entry products when that is small), summed per accumulator entry (:class:`Groups`).
- :func:`rounds_by_rank`, :func:`alu_rounds`: ALU micro-ops in the fewest vector steps such that
  each one sees exactly the writes of the micro-ops before it.
"""

from __future__ import annotations

import numpy as np
from vta.isa import Config, GemmInsn


class Groups:
    """Micro-ops grouped by accumulator entry: a stable sort order, group starts, entries."""

    def __init__(self, dst: np.ndarray) -> None:
        self.order = np.argsort(dst, kind="stable")
        sd = dst[self.order]
        starts = np.flatnonzero(np.r_[True, sd[1:] != sd[:-1]])
        self.uniq = sd[starts]
        #: None when every entry appears once (no reduction needed)
        self.starts = None if starts.size == sd.size else starts


class GeneralPlan:
    """What the general GEMM path precomputes from the index arrays (cached per loop nest)."""

    def __init__(self, dst: np.ndarray, src: np.ndarray, wgt: np.ndarray, cfg: Config) -> None:
        self.groups = Groups(dst)
        self.dst, self.src, self.wgt = dst, src, wgt
        self.us, si = np.unique(src, return_inverse=True)
        self.uw, wi = np.unique(wgt, return_inverse=True)
        pairs = self.us.size * self.uw.size
        #: index into the table of all (input, weight) products, in dst order; None: no table
        self.pairs: np.ndarray | None = None
        # (the table and its selection per micro-op, p[pairs], must both stay small)
        if (pairs <= 4 * dst.size + 64 and pairs * cfg.batch * cfg.block_out <= 1 << 22
                and dst.size * cfg.batch * cfg.block_out <= 1 << 24):
            self.pairs = (si.ravel() * self.uw.size + wi.ravel())[self.groups.order]


class Grid:
    """A 2D grid of buffer indices, with what the fast path needs to know about it."""

    def __init__(self, grid: np.ndarray) -> None:
        self.shape = grid.shape
        self.flat = grid.ravel()
        self.size = self.flat.size
        first = int(self.flat[0])
        contiguous = np.array_equal(self.flat, np.arange(first, first + self.size))
        #: the first index when the grid is one contiguous run of entries, else None
        self.start = first if contiguous else None
        self.unique = contiguous or np.unique(self.flat).size == self.size

    def gather(self, buf: np.ndarray) -> np.ndarray:
        """buf[grid] (a view, without a copy, when the grid is contiguous)."""
        if self.start is not None:
            sel = buf[self.start:self.start + self.size]
        else:  # take of rows: several times faster than indexing buf[flat]
            sel = buf.reshape(buf.shape[0], -1).take(self.flat, axis=0)
        return sel.reshape(self.shape + buf.shape[1:])


def factor_uops(d: np.ndarray, s: np.ndarray, w: np.ndarray):
    """Write micro-op triples as a dense block product, or return None.

    Finds grids Du[mu, nu], Su[mu, ku], Wu[nu, ku] such that the micro-ops are exactly the triples
    (Du[m,n], Su[m,k], Wu[n,k]) over the whole (m, n, k) grid, each once. Two labellings of the
    micro-ops are tried (:func:`_labels_by_first_use` for a matrix product, whose input and
    weight entries each belong to one k; :func:`_labels_by_rank` for a convolution, whose input
    entries serve several k); the result is always verified, so a None only means "use the
    general path".
    """
    if len(d) == 1:
        return d.reshape(1, 1), s.reshape(1, 1), w.reshape(1, 1)
    for labelling in (_labels_by_first_use, _labels_by_rank):
        labels = labelling(d, s, w)
        grids = None if labels is None else _grids(d, s, w, *labels)
        if grids is not None:
            return grids
    return None


def _labels_by_first_use(d: np.ndarray, s: np.ndarray, w: np.ndarray):
    """(m, n, k) labels per micro-op: m from the first input entry of its accumulator entry, n
    from the first weight entry, k from the first weight entry of its input entry."""
    u = len(d)
    _, di = np.unique(d, return_inverse=True)
    _, si = np.unique(s, return_inverse=True)
    _, wi = np.unique(w, return_inverse=True)
    m_of_d = np.full(di.max() + 1, u, np.int64)
    np.minimum.at(m_of_d, di, si)
    n_of_d = np.full(di.max() + 1, u, np.int64)
    np.minimum.at(n_of_d, di, wi)
    k_of_s = np.full(si.max() + 1, u, np.int64)
    np.minimum.at(k_of_s, si, wi)
    _, mi = np.unique(m_of_d[di], return_inverse=True)
    _, ni = np.unique(n_of_d[di], return_inverse=True)
    _, ki = np.unique(k_of_s[si], return_inverse=True)
    return mi, ni, ki


def _labels_by_rank(d: np.ndarray, s: np.ndarray, w: np.ndarray):
    """(m, n, k) labels per micro-op, or None: k is the micro-op's rank among those of its
    accumulator entry (ordered by weight, then input entry); accumulator entries with the same
    row of input entries share an m, those with the same row of weight entries an n. A
    convolution's micro-ops (an input entry read at several taps) factor this way."""
    order = np.lexsort((s, w, d))
    sd = d[order]
    starts = np.flatnonzero(np.r_[True, sd[1:] != sd[:-1]])
    groups, ku = starts.size, len(d) // starts.size
    if groups * ku != len(d) or np.any(np.diff(starts) != ku):
        return None
    _, m_of_g = np.unique(s[order].reshape(groups, ku), axis=0, return_inverse=True)
    _, n_of_g = np.unique(w[order].reshape(groups, ku), axis=0, return_inverse=True)
    mi, ni, ki = (np.empty(len(d), np.int64) for _ in range(3))
    mi[order] = np.repeat(m_of_g.ravel(), ku)
    ni[order] = np.repeat(n_of_g.ravel(), ku)
    ki[order] = np.tile(np.arange(ku), groups)
    return mi, ni, ki


def _grids(d: np.ndarray, s: np.ndarray, w: np.ndarray, mi: np.ndarray, ni: np.ndarray,
           ki: np.ndarray):
    """The grids (Du, Su, Wu) of labels (m, n, k) per micro-op, or None when the labels do not
    describe a dense block product of these micro-ops."""
    u = len(d)
    mu, nu, ku = mi.max() + 1, ni.max() + 1, ki.max() + 1
    if mu * nu * ku != u:
        return None
    key = (mi * nu + ni) * ku + ki
    if np.bincount(key, minlength=u).max() != 1:
        return None
    grids = []
    for vals, r, c, shape in ((d, mi, ni, (mu, nu)), (s, mi, ki, (mu, ku)),
                              (w, ni, ki, (nu, ku))):
        g = np.empty(shape, np.int64)
        g[r, c] = vals
        if not np.array_equal(g[r, c], vals):
            return None
        grids.append(g)
    return tuple(grids)


def dense_plan(insn: GemmInsn, d: np.ndarray, s: np.ndarray, w: np.ndarray):
    """(D[m,n], S[m,k], W[n,k]) index grids when the GEMM is a dense block product, else None."""
    fac = factor_uops(d, s, w)
    if fac is None:
        return None
    du, su, wu = fac
    # each loop with more than one iteration becomes an m, n or k axis
    m_axes, n_axes, k_axes = [], [], []
    for count, fd, fs, fw in ((insn.iter_out, insn.dst_factor_out, insn.src_factor_out,
                               insn.wgt_factor_out),
                              (insn.iter_in, insn.dst_factor_in, insn.src_factor_in,
                               insn.wgt_factor_in)):
        if count == 1:
            continue
        if fd == 0:
            k_axes.append((count, fs, fw))
        elif fw == 0:
            m_axes.append((count, fd, fs))
        elif fs == 0:
            n_axes.append((count, fd, fw))
        else:
            return None
    m_off_d, m_off_s = axis_offsets(m_axes)
    n_off_d, n_off_w = axis_offsets(n_axes)
    k_off_s, k_off_w = axis_offsets(k_axes)
    # grids over (mu, m-loops) x (nu, n-loops) etc., flattened to 2D
    dgrid = (du[:, None, :, None] + m_off_d[None, :, None, None]
             + n_off_d[None, None, None, :]).reshape(du.shape[0] * m_off_d.size, -1)
    sgrid = (su[:, None, :, None] + m_off_s[None, :, None, None]
             + k_off_s[None, None, None, :]).reshape(su.shape[0] * m_off_s.size, -1)
    wgrid = (wu[:, None, :, None] + n_off_w[None, :, None, None]
             + k_off_w[None, None, None, :]).reshape(wu.shape[0] * n_off_w.size, -1)
    return dgrid, sgrid, wgrid


def acc_order(d: np.ndarray, s: np.ndarray, w: np.ndarray):
    """The grids of a dense product with the rows of S and of W reordered so that D's entries
    are one run of consecutive accumulator entries, m-major (as the product's rows come out)
    or n-major (a convolution's output channel blocks outermost), when they can be:
    (D, S, W, n_major); D as given when not."""
    rows = np.argsort(d[:, 0], kind="stable")
    cols = np.argsort(d[0, :], kind="stable")
    dp = d[rows][:, cols]
    for n_major, flat in ((False, dp.ravel()), (True, dp.T.ravel())):
        if np.array_equal(flat, np.arange(flat[0], flat[0] + flat.size)):
            return dp, s[rows], w[cols], n_major
    return d, s, w, False


def axis_offsets(axes: list[tuple[int, int, int]]) -> tuple[np.ndarray, np.ndarray]:
    """Offsets (for the two index kinds an axis role touches) over the product of the axes."""
    a = np.zeros(1, np.int64)
    b = np.zeros(1, np.int64)
    for count, fa, fb in axes:
        r = np.arange(count, dtype=np.int64)
        a = (a[:, None] + r[None, :] * fa).ravel()
        b = (b[:, None] + r[None, :] * fb).ravel()
    return a, b


class TooManyRounds(Exception):
    """An ALU loop needs more sequential vector steps than allowed (``rounds`` of them)."""

    def __init__(self, rounds: int) -> None:
        super().__init__(rounds)
        self.rounds = rounds


def _split_by(keys: np.ndarray, limit: int | None) -> list[np.ndarray]:
    """Micro-op indices grouped by key 0, 1, ... (ascending within a group): one stable sort,
    not one pass over all micro-ops per group. Raises TooManyRounds beyond ``limit`` groups."""
    rounds = int(keys.max()) + 1
    if limit is not None and rounds > limit:
        raise TooManyRounds(rounds)
    return np.split(np.argsort(keys, kind="stable"), np.cumsum(np.bincount(keys))[:-1])


def rounds_by_rank(dst: np.ndarray, limit: int | None = None):
    """Selections of micro-ops that can run as one vector step, in order (None: all at once).

    The k-th occurrence of each accumulator entry goes into round k, so no round writes an entry
    twice and the writes to one entry keep their program order. More than ``limit`` rounds
    raise :class:`TooManyRounds`.
    """
    order = np.argsort(dst, kind="stable")
    sd = dst[order]
    new = np.r_[True, sd[1:] != sd[:-1]]
    if new.all():
        return [None]
    starts = np.flatnonzero(new)
    group_start = starts[np.cumsum(new) - 1]
    rank = np.empty(len(dst), np.int64)
    rank[order] = np.arange(len(dst)) - group_start
    return _split_by(rank, limit)


def alu_rounds(dst: np.ndarray, src: np.ndarray, depth: int, limit: int | None = None):
    """Rounds for acc[dst] = op(acc[dst], acc[src]) that keep sequential semantics.

    Within a round every read happens before every write. A micro-op must see the writes of the
    earlier micro-ops to its src and dst, and must not see later ones. More than ``limit``
    rounds raise :class:`TooManyRounds`.
    """
    pos = np.full(depth, -1, np.int64)
    pos[dst] = np.arange(len(dst))  # last writer of each entry
    written = pos[src]
    counts = np.bincount(dst, minlength=depth)
    if counts.max() <= 1:
        # single round unless some micro-op reads an entry written by an earlier one
        if not np.any((written >= 0) & (written < np.arange(len(src)))):
            return [None]
    elif np.all((counts[src] == 0) | (src == dst)):
        return rounds_by_rank(dst, limit)
    if limit is not None and counts.max() > limit:  # at least that many rounds: fail early
        raise TooManyRounds(int(counts.max()))
    # general case: a level per micro-op (a scalar pass over indices only)
    last_write: dict[int, int] = {}
    last_read: dict[int, int] = {}
    levels = np.empty(len(dst), np.int64)
    for j, (dj, sj) in enumerate(zip(dst.tolist(), src.tolist())):
        lv = max(last_write.get(sj, -1) + 1, last_write.get(dj, -1) + 1, last_read.get(dj, 0))
        levels[j] = lv
        last_write[dj] = lv
        last_read[sj] = max(last_read.get(sj, 0), lv)
        last_read[dj] = max(last_read.get(dj, 0), lv)
    return _split_by(levels, limit)


__all__ = ["Groups", "GeneralPlan", "Grid", "factor_uops", "dense_plan", "acc_order",
           "rounds_by_rank", "alu_rounds", "TooManyRounds"]
