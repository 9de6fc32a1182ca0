"""kato2024's private weighting protocol (dpfl.papers.kato2024.protocol.secure): the arithmetic its messages are made
of, shared by the server, the silos and the checks of a round. Pure functions of their arguments (no keys, no parties),
so that every party and every test uses one definition:
- the fixed-point encoding: a real x travels as the integer ⌊x/P⌉ (P = PRECISION, `encode`, `encode_noise`), weighted
  by L = lcm(1..N̄) (N̄ = RECORD_BOUND, `lcm_bound`) so that L·n_{s,u}/n_u is an integer; the server reads a residue
  mod n centred (`decode`), and the decoded sum must lie within (U_a + S)·P/2 of the plaintext one
  (`check_decoding`, which says why);
- the masks: the per-user blinding masks r_u (`user_masks`) from the seed R the silos share, and a silo's signed sum
  of the pairwise secure-aggregation masks (`pair_sign_masks`) from the keys it shares with the other silos (both
  from dpfl.papers.kato2024.protocol.keys), streamed from SHAKE-256 (`stream_int`);
- `multi_exp`, the multi-exponentiation of the silos' fast weighting (`Silo.weighted_message`);
- `ProtocolError`, by which a round that cannot complete correctly stops.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence

import gmpy2
import numpy as np

#: the paper's precision of the fixed-point encoding and bound on a user's records that L covers
PRECISION = 1e-10
RECORD_BOUND = 2000


class ProtocolError(RuntimeError):
    """A round cannot complete correctly (e.g. a silo dropped out): it stops instead of producing a wrong model."""


def lcm_bound(record_bound: int = RECORD_BOUND) -> int:
    """L = lcm(1..N̄): L·n_{s,u}/n_u is an integer for every n_u ≤ N̄."""
    return math.lcm(*range(1, record_bound + 1))


def encode(values: np.ndarray, precision: float = PRECISION) -> list[int]:
    """⌊x/P⌉ as exact signed integers."""
    return [int(v) for v in np.rint(np.asarray(values, dtype=np.float64) / precision)]


def encode_noise(noise, precision: float = PRECISION) -> list[int]:
    """A silo's noise in the encoding: real values (the paper's float Gaussian) as ⌊z/P⌉; an integer array (the secure
    mode's discrete Gaussian, `Silo.draw_noise`) is in the encoding's units already."""
    noise = np.asarray(noise)
    if np.issubdtype(noise.dtype, np.integer):
        return [int(v) for v in noise]
    return encode(noise, precision)


def decode(v: int, n: int) -> int:
    """A residue mod n read as a signed integer (values above n/2 are negative)."""
    v %= n
    return v - n if v > n // 2 else v


def stream_int(key: bytes, label: str, index: int, n: int) -> int:
    """A pseudo-random element of Z_n from a key (SHAKE-256 of key‖label‖index, 128 extra bits before the reduction
    so that it is statistically close to uniform)."""
    nbytes = (n.bit_length() + 7) // 8 + 16
    digest = hashlib.shake_256(key + label.encode() + index.to_bytes(8, "big")).digest(nbytes)
    return int.from_bytes(digest, "big") % n


def user_masks(seed: bytes, n_users: int, n: int) -> list[int]:
    """The per-user blinding masks r_u ∈ Z_n*, the same for every silo that knows the seed (coprime to n: redrawn
    with the next index in the unlikely case they are not)."""
    out = []
    for u in range(n_users):
        k = 0
        while True:
            r = stream_int(seed, f"user_mask/{u}", k, n)
            if r and math.gcd(r, n) == 1:
                break
            k += 1
        out.append(r)
    return out


def pair_sign_masks(index: int, pair_keys: dict[int, bytes], label: str, count: int, n: int) -> list[int]:
    """Σ over the other silos of ±mask (+ towards a larger silo index, − towards a smaller one), per position."""
    total = [0] * count
    for other, key in pair_keys.items():
        sign = 1 if index < other else -1
        for j in range(count):
            total[j] = (total[j] + sign * stream_int(key, label, j, n)) % n
    return total


def multi_exp(bases: Sequence, exps: np.ndarray, modulus) -> list:
    """∏_u bases[u]^exps[u, j] mod `modulus` for every column j, with signed integer exponents (a negative one uses
    the base's inverse): Straus' interleaved windows, so the squarings are shared by all bases of a column and
    each base's table of powers c^1..c^(2^w−1) (and of c⁻¹ when needed) serves every column. The window w minimises
    the multiplications for this shape. Equals the product of separate powmods (tested)."""
    m = gmpy2.mpz(modulus)
    U, D = exps.shape if len(bases) else (0, exps.shape[1] if exps.ndim == 2 else 0)
    if not U:
        return [gmpy2.mpz(1)] * D
    mags = np.abs(exps)
    if mags.max() >= 2.0**62:
        raise ValueError(f"exponent of {int(mags.max()).bit_length()} bits: encode with a coarser precision")
    mags = mags.astype(np.int64)
    neg = exps < 0
    bits = max(1, int(mags.max()).bit_length())
    # cost (multiplications) of window w: tables U·(2^w − 2) per sign in use + per column ⌈bits/w⌉·U + bits squarings
    signs = 1 + int(neg.any())
    w = min(range(1, 9), key=lambda w: signs * U * (2**w - 2) + D * (U * -(-bits // w) + bits))
    top = (1 << w) - 1

    def table(c):
        out = [gmpy2.mpz(1), c]
        for _ in range(top - 1):
            out.append(out[-1] * c % m)
        return out

    pos = [table(gmpy2.mpz(c)) for c in bases]
    inv = [table(gmpy2.invert(gmpy2.mpz(c), m)) if neg[u].any() else None for u, c in enumerate(bases)]
    windows = -(-bits // w)
    digits = np.stack([(mags >> (w * k)) & top for k in range(windows)])  # (windows, U, D)
    out = []
    for j in range(D):
        acc = gmpy2.mpz(1)
        col_digits, col_neg = digits[:, :, j], neg[:, j]
        for k in range(windows - 1, -1, -1):
            if acc != 1:
                for _ in range(w):
                    acc = acc * acc % m
            row = col_digits[k]
            for u in np.flatnonzero(row):
                acc = acc * (inv[u] if col_neg[u] else pos[u])[row[u]] % m
        out.append(acc)
    return out


def decoding_error_bound(active_users: int, n_silos: int, precision: float = PRECISION) -> float:
    """(U_a + S)·P/2: how far the decoded aggregate may be from the plaintext sum of the same messages, per
    coordinate (`check_decoding`)."""
    return (active_users + n_silos) * precision / 2


def check_decoding(decoded: np.ndarray, plaintext: np.ndarray, active_users: int, n_silos: int,
                   precision: float = PRECISION) -> float:
    """Raise ProtocolError unless |decoded − plaintext| ≤ (U_a + S)·P/2 in every coordinate; returns the largest
    difference. `decoded`: the server's result v·P/L (v the decrypted centred integer); `plaintext`:
    Σ_s (Σ_u w_{s,u}·Δ_{s,u} + z_s), the same messages unencrypted, with w_{s,u} = n_{s,u}/n_u for a user counted
    this round (sampled, with records somewhere; 0 else) and z_s silo s's noise in the model's units.

    Why this bound, in the encoded domain: v = Σ_s (Σ_u L·w_{s,u}·⌊Δ_{s,u}/P⌉ + L·ζ_s) exactly (L·w_{s,u} is an
    integer), so v/L − plaintext/P = Σ_u Σ_s w_{s,u}·(⌊Δ_{s,u}/P⌉ − Δ_{s,u}/P) + Σ_s (ζ_s − z_s/P). Each rounding is off
    by at most 1/2 and a counted user's weights sum to 1 over the silos, so the users contribute at most U_a/2 and
    the silos' noise S/2 (the paper's mode rounds each silo's float noise once: ζ_s = ⌊z_s/P⌉; the secure mode's
    noise is an integer already, ζ_s = z_s/P, so there the bound is loose by S/2). Anything larger means the
    decryption or the decoding went wrong (a wrapped value, a mask that did not cancel, a wrong weight)."""
    bound = decoding_error_bound(active_users, n_silos, precision)
    err = np.abs(np.asarray(decoded, dtype=np.float64) - np.asarray(plaintext, dtype=np.float64))
    worst = float(err.max()) if err.size else 0.0
    if not worst <= bound:
        j = int(np.argmax(err))
        raise ProtocolError(f"coordinate {j} decodes {worst:.3e} away from the plaintext sum, above the bound "
                            f"(U_a + S)·P/2 = ({active_users} + {n_silos})·{precision:g}/2 = {bound:.3e}: the "
                            f"decryption or the decoding is wrong; the round stops")
    return worst
