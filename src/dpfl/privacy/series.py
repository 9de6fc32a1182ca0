"""The RDP of the Poisson-subsampled Gaussian as dp-accounting 0.6.0 and opacus 1.6.0 compute it, to the bit, in a
fraction of their time (why: their scalar loops take from seconds to minutes per silo at the large orders of the group
conversion, kato2024 GROUP-k, spec §5).

Both libraries sum a series term by term: L_i = log_add(L_{i-1}, s_i) (opacus: log_sub where the binomial coefficient
is negative). Here the terms s_i come from the same element-wise functions (scipy ufuncs, `math.log`, IEEE arithmetic
in the same order), for many terms and orders at once, so they are the libraries' own values; the running sum is then
taken with the libraries' scalar arithmetic (`log_add`, `log_sub`: libm's exp and log1p, as they call them) where a
step can change it, and as a running maximum where it provably cannot: a term below the other operand by more than
its mantissa's reach (exp of the gap under a quarter of the larger's float spacing, with a margin of one log unit)
leaves log1p(exp(a - b)) + b equal to b. numpy's own exp/log (SIMD, a few ulps from libm) only decide which steps are
which, with a margin that covers their error. The loops' stopping rules, the orders where they fail (opacus:
ValueError, read as NaN; dp-accounting: +inf after 1000 terms) and Python's NaN semantics of min/max are kept; a sum
that has become NaN stays NaN, so opacus's loop is cut there (it could only return NaN). tests/test_privacy_series.py
compares the values with the libraries' own functions. dp-accounting's RDP of the sampled-without-replacement Gaussian
(REPLACE_ONE) is replicated the same way, with this module's running sum, in dpfl.privacy.series_wor.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import special


def _versions_replicated() -> bool:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("dp-accounting") == "0.6.0" and version("opacus") == "1.6.0"
    except PackageNotFoundError:
        return False


#: whether the installed libraries are the versions replicated here (pyproject pins them); callers use theirs if not
SAME_LIBRARIES = _versions_replicated()
#: dp-accounting's _MAX_STEPS_LOG_A_FRAC: its fractional-order loop gives up (+inf) after this many terms
DPA_MAX_TERMS = 1000
#: opacus's loop has no bound on its terms; an order not finished after this many is given up as NaN (the scalar loop
#: would run for hours; the caller then uses dp-accounting's bound, as for any order opacus cannot evaluate)
OPACUS_MAX_TERMS = 1 << 22
_EXPM1_OVERFLOW = 709.8  # math.expm1(d) raises OverflowError for d > log(DBL_MAX) = 709.78...
_MATH_LOG = np.frompyfunc(math.log, 1, 1)
_exp, _log1p = math.exp, math.log1p
_NEG_INF = -math.inf


def log_add(logx: float, logy: float) -> float:
    """dp-accounting's and opacus's `_log_add` (the same code in both): log(exp(logx) + exp(logy))."""
    a, b = min(logx, logy), max(logx, logy)
    if a == -np.inf:
        return b
    return math.log1p(math.exp(a - b)) + b


def log_sub(logx: float, logy: float) -> float:
    """opacus's `_log_sub` (copied, so that the accounting does not import opacus and with it torch): log(exp(logx) -
    exp(logy)); ValueError where that is negative."""
    if logx < logy:
        raise ValueError("The result of subtraction must be non-negative.")
    if logy == -np.inf:
        return logx
    if logx == logy:
        return -np.inf
    try:
        return math.log(math.expm1(logx - logy)) + logy
    except OverflowError:
        return logx


def _py_max(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Python's max(a, b) element-wise: a unless b > a (which one a NaN gives depends on the order)."""
    return np.where(b > a, b, a)


def _reach(b) -> np.ndarray:
    """How far (log units) a term must lie below b for log_add to return b itself, one unit of margin included:
    -log(spacing(|b|)/4), where exp of the gap is under a quarter ulp of b."""
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        return -np.log(np.spacing(np.abs(b)) / 4.0) + 1.0


#: an upper bound of _reach(b) + ln|b|, from spacing(|b|) >= |b| 2^-53
_REACH_LOG = 55 * math.log(2) + 1.0


def _add_steps(sl: list, cur: float) -> float:
    """log_add(cur, s) for s in sl in turn (inlined: this loop is where the time goes)."""
    for x in sl:
        if x < cur:
            a, b = x, cur
        else:
            a, b = cur, (x if x > cur else cur)
        cur = b if a == _NEG_INF else _log1p(_exp(a - b)) + b
    return cur


def fold_log_add(s: np.ndarray, start: float = -np.inf) -> float:
    """The running sum L = log_add(L, s_i) over s (from L = start), bit for bit as the scalar loop leaves it.

    Steps where the smaller operand lies beyond the larger's reach give max(L, s_i); which ones is decided on bounds
    of the exact running sum (between the running maximum M of the terms so far and M + log(their count) plus the
    rounding); the others run the scalar arithmetic."""
    s = np.asarray(s, dtype=float)
    n = len(s)
    if n <= 64:  # short: the scalar arithmetic costs less than sorting the steps
        return _add_steps(s.tolist(), float(start))
    with np.errstate(all="ignore"):
        low = np.maximum.accumulate(np.concatenate([[start], s]))[:-1]  # L before step i is >= this (log1p >= 0)
        finite_low = low[np.isfinite(low)]
        scale = (float(np.max(np.abs(finite_low))) if len(finite_low) else 0.0) + math.log(n + 2) + 1.0
        err = 8.0 * (n + 1) * float(np.spacing(scale)) + 1e-12  # each step's rounding, at most an ulp or two
        high = low + np.log(np.arange(2, n + 2)) + err  # ... and <= this: a sum of i + 1 exponentials
        # the term dominates (the step gives s_i) or is negligible (the step gives L, whose magnitude is >= lowest)
        # (a reach is >= 0: a term on the wrong side of the bounds is never taken for the max)
        dominant = s - high > np.maximum(_REACH_LOG - np.log(np.abs(s)), 0.0)
        lowest = np.where((low <= 0) & (high >= 0), 0.0, np.minimum(np.abs(low), np.abs(high)))
        negligible = low - s > np.maximum(_REACH_LOG - np.log(lowest), 0.0)
        trivial = (s == -np.inf) | (np.isfinite(s) & (np.isfinite(low) | (low == -np.inf)) & (dominant | negligible))
    if err > 0.25:
        trivial[:] = False
    steps = np.flatnonzero(~trivial)
    runs = 1 + int(np.count_nonzero(np.diff(steps) != 1)) if len(steps) else 0
    if len(steps) + 10 * runs > n:  # dense: every step by the scalar arithmetic costs less than the runs' slicing
        return _add_steps(s.tolist(), float(start))
    cur, pos, k = float(start), 0, 0
    while k < len(steps):
        first = last = int(steps[k])
        while k + 1 < len(steps) and steps[k + 1] == last + 1:  # a run of consecutive scalar steps
            k, last = k + 1, last + 1
        if first > pos:  # trivial steps only: each gives the max, finite (or -inf) values all
            cur = max(cur, float(s[pos:first].max()))
        cur = _add_steps(s[first:last + 1].tolist(), cur)
        pos, k = last + 1, k + 1
        if cur != cur:  # log_add(NaN, x) is NaN for every x
            return cur
    if pos < n:
        cur = max(cur, float(s[pos:].max()))
    return cur


def _fold_signed(s: np.ndarray, add: np.ndarray, cur: float) -> tuple[float, int]:
    """opacus's sum over terms of both signs from `cur`: (the final L, index of the step whose log_sub raised
    ValueError, or -1). Step by step; after a run of steps that left L unchanged, the steps that provably do (an added
    term beyond L's reach; a subtracted one so far below that expm1 overflows, which opacus answers with L) are
    skipped in bulk."""
    n = len(s)
    sl, al = s.tolist(), add.tolist()
    pos, run = 0, 0
    while pos < n:
        if cur != cur:
            return cur, -1  # NaN stays NaN under both operations
        if run >= 16 and math.isfinite(cur):
            width, below = 64, cur - float(_reach(cur))
            while pos < n:
                rest, a = s[pos:pos + width], add[pos:pos + width]
                keep = np.where(a, rest < below, rest < cur - _EXPM1_OVERFLOW)
                stop = len(keep) if keep.all() else int(np.argmin(keep))
                pos += stop
                if stop < len(keep):
                    break
                width *= 4
            run = 0
            continue
        try:
            new = log_add(cur, sl[pos]) if al[pos] else log_sub(cur, sl[pos])
        except ValueError:
            return cur, pos
        run = run + 1 if new == cur else 0
        cur = new
        pos += 1
    return cur, -1


# ---- the order-only parts of the terms, shared by every q and sigma (silos, seeds, cells of one process) ----------

_COEF_CACHE: dict = {}


def _cached(key, n: int, compute):
    """The first n values of compute(start, stop) for `key`, extending what is stored (by at least doubling)."""
    have = _COEF_CACHE.get(key)
    size = 0 if have is None else len(have[0])
    if size < n:
        if len(_COEF_CACHE) > 2048:  # a few dozen order sets' worth; tens of MB at most
            _COEF_CACHE.clear()
        more = compute(size, max(n, 2 * size))
        have = more if have is None else tuple(np.concatenate([h, m]) for h, m in zip(have, more))
        _COEF_CACHE[key] = have
    return tuple(h[:n] for h in have)


def _opacus_coef(alpha: float, n: int):
    """(binom(alpha, i), log|binom(alpha, i)| by math.log, 1 where it is 0 (ValueError there)) for i < n."""
    def compute(lo, hi):
        coef = special.binom(alpha, np.arange(lo, hi))
        mag = np.abs(coef)
        zero = mag == 0
        mag[zero] = 1.0
        return coef, _MATH_LOG(mag).astype(float)

    return _cached(("opacus", alpha), n, compute)


def _dpa_log_comb(alpha, n: int) -> np.ndarray:
    """dp-accounting's _log_comb(alpha, i) for i < n (alpha a float, or an int for integer orders)."""
    def compute(lo, hi):
        i = np.arange(lo, hi)
        return (special.gammaln(alpha + 1) - special.gammaln(i + 1) - special.gammaln(alpha - i + 1),)

    return _cached(("dpa", type(alpha).__name__, alpha), n, compute)[0]


# ---- dp-accounting: RdpAccountant with a PoissonSampledDpEvent --------------------------------------------------


def _dpa_log_a_int(q: float, sigma: float, alpha: int) -> float:
    """dp_accounting.rdp.rdp_privacy_accountant._compute_log_a_int."""
    i = np.arange(alpha + 1)
    s = _dpa_log_comb(alpha, alpha + 1) + i * math.log(q) + (alpha - i) * math.log1p(-q)
    s = s + (i * i - i) / (2 * (sigma**2))
    return fold_log_add(s)


def _dpa_log_a_frac(q: float, sigma: float, alphas: np.ndarray) -> np.ndarray:
    """dp_accounting.rdp.rdp_privacy_accountant._compute_log_a_frac at each (fractional) order: +inf where its 1000
    terms do not converge. The first 64 terms first: most orders stop there."""
    out = np.full(len(alphas), np.inf)
    todo = np.arange(len(alphas))
    for n in (64, DPA_MAX_TERMS):
        if len(todo):
            value, found = _dpa_log_a_frac_upto(q, sigma, alphas[todo], n)
            out[todo[found]] = value[found]
            todo = todo[~found]
    return out


def _dpa_log_a_frac_upto(q: float, sigma: float, alphas: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Per order, (the value of _compute_log_a_frac, whether its loop stops within the first n terms). The terms of
    all orders at once; where the loop may stop is found on numpy's approximate sums (with a margin), then checked on
    the exact ones."""
    z0 = sigma**2 * math.log(1 / q - 1) + 0.5
    log1mq = math.log1p(-q)
    out, found = np.full(len(alphas), np.nan), np.zeros(len(alphas), dtype=bool)
    i1 = np.arange(n)
    i = i1[None, :]
    alpha = np.asarray(alphas, dtype=np.float64)[:, None]
    with np.errstate(all="ignore"):
        log_coef = np.stack([_dpa_log_comb(np.float64(a), n) for a in alphas])
        j = alpha - i
        log_e0 = math.log(0.5) + (math.log(2) + special.log_ndtr(-((i1 - z0) / (math.sqrt(2) * sigma)) * 2**0.5))
        s0 = log_coef + i * math.log(q) + j * log1mq + (i * i - i) / (2 * (sigma**2)) + log_e0
        # the loop can only stop where both terms fall: orders whose s0 never falls are done (not found)
        rows = np.flatnonzero((s0[:, 1:] < s0[:, :-1]).any(axis=1))
        if not len(rows):
            return out, found
        s0, log_coef, j = s0[rows], log_coef[rows], j[rows]
        log_t1 = log_coef + j * math.log(q) + i * log1mq
        log_e1 = math.log(0.5) + (math.log(2) + special.log_ndtr(-((z0 - j) / (math.sqrt(2) * sigma)) * 2**0.5))
        s1 = log_t1 + (j * j - j) / (2 * (sigma**2)) + log_e1
        falling = np.zeros(s0.shape, dtype=bool)
        falling[:, 1:] = (s0[:, 1:] < s0[:, :-1]) & (s1[:, 1:] < s1[:, :-1])  # last_s = -inf at i = 0
        top = _py_max(s0, s1)
        approx = np.logaddexp(np.logaddexp.accumulate(s0, axis=1), np.logaddexp.accumulate(s1, axis=1))
        scale = np.max(np.abs(np.where(np.isfinite(approx), approx, 0.0)), axis=1, initial=1.0)[:, None]
        slack = 16.0 * (n + 1) * np.spacing(scale) + 1e-9 * (1.0 + np.abs(approx))
        maybe = falling & ~(top >= approx - 30 + slack)  # NaN: checked exactly below
    for r in np.flatnonzero(maybe.any(axis=1)).tolist():
        a0 = a1 = -np.inf
        pos = 0
        for k in np.flatnonzero(maybe[r]).tolist():
            a0, a1 = fold_log_add(s0[r, pos:k + 1], a0), fold_log_add(s1[r, pos:k + 1], a1)
            pos = k + 1
            total = log_add(a0, a1)
            if top[r, k] < total - 30:
                out[rows[r]], found[rows[r]] = total, True
                break
    return out, found


def dpa_poisson_rdp(q: float, sigma: float, orders) -> np.ndarray:
    """What RdpAccountant(orders).compose(PoissonSampledDpEvent(q, GaussianDpEvent(sigma)), 1).rdp gives, for
    0 < q < 1 and sigma > 0."""
    if not (0.0 < q < 1.0 and sigma > 0):
        raise ValueError(f"only 0 < q < 1 and sigma > 0 (got q={q}, sigma={sigma})")
    orders = np.array(orders, dtype=np.float64)
    values = np.empty(len(orders), dtype=object)  # the library's list: log_a / (alpha - 1), alpha an np.float64
    frac = np.zeros(len(orders), dtype=bool)
    for r, alpha in enumerate(orders):
        if np.isinf(alpha):
            values[r] = np.inf
        elif float(alpha).is_integer():
            values[r] = _dpa_log_a_int(q, sigma, int(alpha)) / (alpha - 1)
        else:
            frac[r] = True
    if frac.any():
        for r, log_a in zip(np.flatnonzero(frac).tolist(), _dpa_log_a_frac(q, sigma, orders[frac]).tolist()):
            values[r] = log_a / (orders[r] - 1)
    return np.zeros_like(orders, dtype=np.float64) + 1 * np.array(values.tolist(), dtype=np.float64)


# ---- opacus: compute_rdp(q, sigma, steps=1, orders=[alpha]) at fractional orders ------------------------------------


def _opacus_log_a_frac(q: float, sigma: float, alphas: np.ndarray) -> np.ndarray:
    """opacus.accountants.analysis.rdp._compute_log_a_for_frac_alpha at each order; NaN where it raises (the caller's
    convention). Blocks of terms for all unfinished orders at once, growing fourfold."""
    z0 = sigma**2 * math.log(1 / q - 1) + 0.5
    log_q, log_1mq = math.log(q), math.log(1 - q)
    m = len(alphas)
    out = np.full(m, np.nan)
    a0, a1 = np.full(m, -np.inf), np.full(m, -np.inf)
    active = np.arange(m)
    start, size = 0, 64
    while len(active) and start < OPACUS_MAX_TERMS:
        stop = start + size
        parts = [_opacus_coef(float(alphas[r]), stop) for r in active.tolist()]
        coef = np.stack([c[start:stop] for c, _ in parts])
        log_coef = np.stack([lc[start:stop] for _, lc in parts])
        i = np.arange(start, stop)[None, :]
        alpha = np.asarray(alphas, dtype=float)[active][:, None]
        with np.errstate(all="ignore"):
            j = alpha - i
            log_t0 = log_coef + i * log_q + j * log_1mq
            log_t1 = log_coef + j * log_q + i * log_1mq
            log_e0 = math.log(0.5) + (math.log(2) + special.log_ndtr(-((i - z0) / (math.sqrt(2) * sigma)) * 2**0.5))
            log_e1 = math.log(0.5) + (math.log(2) + special.log_ndtr(-((z0 - j) / (math.sqrt(2) * sigma)) * 2**0.5))
            s0 = log_t0 + (i * i - i) / (2 * (sigma**2)) + log_e0
            s1 = log_t1 + (j * j - j) / (2 * (sigma**2)) + log_e1
            done = _py_max(s0, s1) < -30
        finished = done.any(axis=1)
        ends = np.where(finished, np.argmax(done, axis=1) + 1, size)  # the loop breaks after the term that stops it
        keep = np.ones(len(active), dtype=bool)
        for row, r in enumerate(active.tolist()):
            end = int(ends[row])
            if (coef[row, :end] == 0).any():  # math.log(0) raised
                keep[row] = False
                continue
            if _overflows(coef[row], end, max(a0[r], a1[r]) < np.inf):
                keep[row] = False
                continue
            add = coef[row, :end] > 0
            n_add = end if add.all() else int(np.argmin(add))  # the leading run of positive coefficients
            x0, x1 = float(a0[r]), float(a1[r])
            if n_add:
                x0, x1 = fold_log_add(s0[row, :n_add], x0), fold_log_add(s1[row, :n_add], x1)
            if n_add < end:
                x0, bad0 = _fold_signed(s0[row, n_add:end], add[n_add:], x0)
                x1, bad1 = _fold_signed(s1[row, n_add:end], add[n_add:], x1)
                if bad0 >= 0 or bad1 >= 0:  # a log_sub raised
                    keep[row] = False
                    continue
            a0[r], a1[r] = x0, x1
            if finished[row]:
                out[r] = log_add(x0, x1)
                keep[row] = False
            elif x0 != x0 and x1 != x1:
                keep[row] = False  # both sums are NaN from here on, and so is the result
        active = active[keep]
        start, size = stop, min(size * 4, 1 << 16)
    return out


def _overflows(coef: np.ndarray, end: int, finite_sums: bool) -> bool:
    """Whether the loop meets a coefficient that overflowed before it stops (end) in a way that makes its result NaN
    whatever the sums are: both terms are then +inf (log|inf|); log_sub(L, inf) raises for L < inf (`finite_sums`:
    the sums entering the block are below +inf, and only an infinite term takes them there), and two +inf added in a
    row give log_add(inf, inf) = NaN, which stays. The sums before it need not be computed."""
    big = np.flatnonzero(np.isinf(coef[:end]))
    if not len(big):
        return False
    k = int(big[0])
    return bool((coef[k] < 0 and finite_sums) or (k + 1 < end and coef[k] == np.inf and coef[k + 1] == np.inf))


def opacus_poisson_rdp(q: float, sigma: float, orders) -> np.ndarray:
    """float(opacus's compute_rdp(q=q, noise_multiplier=sigma, steps=1, orders=[a])[0]) at each fractional order a,
    NaN where that raises; 0 < q < 1, sigma > 0."""
    if not (0.0 < q < 1.0 and sigma > 0):
        raise ValueError(f"only 0 < q < 1 and sigma > 0 (got q={q}, sigma={sigma})")
    orders = np.asarray(orders, dtype=float)
    if any(float(a).is_integer() or math.isinf(a) for a in orders):
        raise ValueError("fractional orders only")
    log_a = _opacus_log_a_frac(q, sigma, orders)
    return np.array([la / (a - 1) for la, a in zip(log_a.tolist(), orders.tolist())], dtype=float)
