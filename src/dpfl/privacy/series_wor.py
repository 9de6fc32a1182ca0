"""dp-accounting 0.6.0's RDP of the Gaussian sampled without replacement (RdpAccountant(REPLACE_ONE) with a
SampledWithoutReplacementDpEvent; Wang, Balle & Kasiviswanathan 2019, Theorem 27), to the bit and vectorized, as
dpfl.privacy.series does for the Poisson-subsampled Gaussian, whose running sum (fold_log_add) and log-binomial
coefficients it shares. A module of its own: another mechanism with its own series (lowy2023's cells, where the
library's scalar loops take most of a smoke cell's time).

The library evaluates, per order, an integer-order bound: up to order 256 from the forward differences of exp(cgf)
(recomputed per order, O(alpha^2) scalar steps), above by a Stirling-type series; fractional orders interpolate
between the two neighbouring integers. Here the forward differences are one vectorized pass per difference order
(each pass of the library's in-place loop reads only the previous pass's values, so it is an element-wise map),
computed once per sigma for the largest order and shared (the k-th difference does not depend on how many the
library asked for); each integer order's series is computed once per call and summed by fold_log_add. The element
functions are the library's: numpy's exp and log1p where it calls them on numpy scalars (numpy's array loop gives the
scalar's bits; checked once per process, the library is used if not), libm's exp and log1p where it calls math's.
tests/test_privacy_series.py compares the values with the library's own functions.
"""

from __future__ import annotations

import math

import numpy as np

from dpfl.privacy.series import _dpa_log_comb, fold_log_add

#: dp-accounting's max_alpha in _compute_rdp_sample_wor_gaussian_int: the exact bound up to it, Stirling above
DPA_WOR_MAX_EXACT = 256
_MATH_LOG1P = np.frompyfunc(math.log1p, 1, 1)
_MATH_EXP = np.frompyfunc(math.exp, 1, 1)
_WOR_DELTAS: dict = {}


def _libm(f, x: np.ndarray) -> np.ndarray:
    return f(x).astype(float) if len(x) else np.zeros(0)


_NUMPY_SCALAR_PROBE: list = []


def _numpy_scalar_is_array() -> bool:
    """Whether numpy's exp and log1p give a numpy scalar the bits they give the same value inside a contiguous array
    (true where both run the same loop, SIMD or libm; the library calls them on scalars, this module on arrays)."""
    if not _NUMPY_SCALAR_PROBE:
        x = -np.concatenate([np.geomspace(1e-18, 745.0, 3000), np.random.default_rng(0).exponential(3.0, 3000)])
        with np.errstate(all="ignore"):
            e, l1p = np.exp(x), np.log1p(-np.exp(x))
            same = all(np.exp(v) == a and np.log1p(-np.exp(v)) == b for v, a, b in zip(x, e.tolist(), l1p.tolist()))
        _NUMPY_SCALAR_PROBE.append(same)
    return _NUMPY_SCALAR_PROBE[0]


def _wor_deltas(sigma: float, n: int) -> np.ndarray:
    """dp_accounting.rdp.rdp_privacy_accountant._get_forward_diffs(cgf, n)[0][:n + 2] (log |k-th forward difference|
    of exp(cgf)), cgf(x) = x (x + 1) / (2 sigma^2). Each pass is the library's in-place loop over j as one map of the
    previous pass's (vec[j], vec[j + 1]); ValueError where the library's math.log1p(-1.0) raises."""
    key = (type(sigma), sigma)  # sigma**2 of a Python float and of a numpy scalar need not agree
    have = _WOR_DELTAS.get(key)
    if have is not None and len(have) >= n + 2:
        return have[:n + 2]
    x = np.arange(n + 2, dtype=float)  # fun(1.0 * (i - 1)), i = 1 .. n + 2
    vec = np.zeros(n + 3)
    vec[1:] = x * 1.0 * (x + 1) / (2.0 * sigma**2)
    signs = np.ones(n + 3, dtype=bool)
    deltas = np.zeros(n + 2)
    with np.errstate(all="ignore"):
        for k in range(n + 2):
            m = n + 2 - k
            lo_v, hi_v, lo_s, hi_s = vec[:m], vec[1:m + 1], signs[:m], signs[1:m + 1]  # vec[j], vec[j + 1]
            same = lo_s == hi_s
            new, new_s = np.empty(m), np.empty(m, dtype=bool)
            idx = np.flatnonzero(same)
            if len(idx):  # _log_sub_sign(vec[j + 1], vec[j]), the sign toggled where signs[j + 1] is False
                lx, ly = hi_v[idx], lo_v[idx]
                gt, lt = lx > ly, lx < ly
                mag = np.full(len(idx), -np.inf)
                if gt.any():
                    mag[gt] = lx[gt] + _libm(_MATH_LOG1P, -np.exp(ly[gt] - lx[gt]))
                if lt.any():
                    mag[lt] = ly[lt] + np.log1p(-np.exp(lx[lt] - ly[lt]))
                new[idx] = mag
                new_s[idx] = np.where(hi_s[idx], ~lt, lt)
            idx = np.flatnonzero(~same)
            if len(idx):  # _log_add(vec[j], vec[j + 1]) with Python's min and max, the sign of vec[j + 1]
                a0, b0 = lo_v[idx], hi_v[idx]
                a, b = np.where(b0 < a0, b0, a0), np.where(b0 > a0, b0, a0)
                val = b.copy()
                fin = a != -np.inf
                val[fin] = _libm(_MATH_LOG1P, _libm(_MATH_EXP, a[fin] - b[fin])) + b[fin]
                new[idx] = val
                new_s[idx] = hi_s[idx]
            vec[:m], signs[:m] = new, new_s
            deltas[k] = vec[0]
    if len(_WOR_DELTAS) > 256:
        _WOR_DELTAS.clear()
    _WOR_DELTAS[key] = deltas
    return deltas


def _dpa_wor_log_a_ints(q: float, sigma: float, alphas: list) -> dict:
    """dp_accounting.rdp.rdp_privacy_accountant._compute_rdp_sample_wor_gaussian_int(q, sigma, alpha) for each
    integer alpha >= 2 in alphas (the library's expressions, term by term, in its order of operations)."""
    log_q, log_2, log_4 = np.log(q), np.log(2), np.log(4)
    func_2 = 1.0 * 2.0 / (2.0 * sigma**2)  # func(2.0)
    log_f2m1 = func_2 + math.log1p(-np.exp(-func_2))
    tail_2 = np.minimum(np.log(4) + log_f2m1, func_2 + np.log(2))
    out = {}
    small = [a for a in alphas if a <= DPA_WOR_MAX_EXACT]
    if small:
        top = max(small)
        deltas = _wor_deltas(sigma, top)
        i = np.arange(3, top + 1)
        lo, hi = 2 * (i // 2) - 1, 2 * ((i + 1) // 2) - 1  # int(2 floor(i / 2)) - 1, int(2 ceil(i / 2)) - 1
        x = (i - 1).astype(float)
        fi = i.astype(float)
        with np.errstate(all="ignore"):
            base = np.minimum(log_4 + 0.5 * (deltas[lo] + deltas[hi]), log_2 + x * 1.0 * (x + 1) / (2.0 * sigma**2))
            for alpha in small:
                log_comb = _dpa_log_comb(alpha, alpha + 1)
                s = base[:alpha - 2] + (fi[:alpha - 2] * log_q + log_comb[3:])
                first = 2 * log_q + log_comb[2] + tail_2
                out[alpha] = float(fold_log_add(np.concatenate([[first], s]), 0.0))
    for alpha in (a for a in alphas if a > DPA_WOR_MAX_EXACT):
        log_comb = _dpa_log_comb(alpha, alpha + 1)
        fi = np.arange(3, alpha + 1, dtype=float)
        x = fi - 1
        with np.errstate(all="ignore"):
            s = log_2 + x * 1.0 * (x + 1) / (2.0 * sigma**2) + fi * log_q + log_comb[3:]
        first = 2 * log_q + log_comb[2] + tail_2
        out[alpha] = fold_log_add(np.concatenate([[first], s]), 0.0)
    return out


def dpa_wor_rdp(q: float, sigma: float, orders) -> np.ndarray:
    """What RdpAccountant(orders, REPLACE_ONE).compose(SampledWithoutReplacementDpEvent(n, m, GaussianDpEvent(sigma)),
    1).rdp gives, q = m / n (computed as the library does: sample_size / source_dataset_size), sigma > 0. Orders
    the replica does not cover (below 2 and integer, q not in (0, 1)) and numpy builds whose scalar and array loops
    differ get the library's own scalar function."""
    orders = np.array(orders)
    scalar = _rdp_lib()._compute_rdp_sample_wor_gaussian_scalar
    if not (0.0 < q < 1.0 and sigma > 0) or not _numpy_scalar_is_array():
        return np.zeros_like(orders, dtype=np.float64) + 1 * np.array([scalar(q, sigma, a) for a in orders])
    own = [bool(np.isfinite(a) and a > 1 and (not float(a).is_integer() or a >= 2)) for a in orders]
    need = set()
    for alpha, ok in zip(orders, own):
        if ok:
            need.update(k for k in {math.floor(alpha), math.ceil(alpha)} if k >= 2)
    try:
        log_a = _dpa_wor_log_a_ints(q, sigma, sorted(need))
    except ValueError:  # math.log1p(-1.0) in the forward differences: the library's loop decides (and raises)
        return np.zeros_like(orders, dtype=np.float64) + 1 * np.array([scalar(q, sigma, a) for a in orders])
    log_a[1] = 0
    values = []
    for alpha, ok in zip(orders, own):  # _compute_rdp_sample_wor_gaussian_scalar, its integer calls looked up
        if not ok:
            values.append(scalar(q, sigma, alpha))
        elif float(alpha).is_integer():
            values.append(log_a[int(alpha)] / (alpha - 1))
        else:
            alpha_f, alpha_c = math.floor(alpha), math.ceil(alpha)
            x, y = log_a[alpha_f], log_a[alpha_c]
            t = alpha - alpha_f
            values.append(((1 - t) * x + t * y) / (alpha - 1))
    return np.zeros_like(orders, dtype=np.float64) + 1 * np.array(values)


def _rdp_lib():
    from dp_accounting.rdp import rdp_privacy_accountant

    return rdp_privacy_accountant
