"""kato2024's private weighting protocol (spec §6), the parties and the messages they exchange.

ULDP-AVG-w weights user u's clipped update in silo s by n_{s,u}/n_u, where n_u = Σ_s n_{s,u} is private to no single
silo. The protocol lets the server aggregate Σ_s Σ_u (n_{s,u}/n_u)·clip(Δ_{s,u}) + noise without anyone learning the
histograms or a silo's message:
- every silo blinds its histogram with per-user masks r_u (shared by the silos, unknown to the server) and pairwise
  secure-aggregation masks; the server only learns B_u = r_u·n_u, and broadcasts Enc(B_u⁻¹) (Paillier);
- silo s turns it into c_u = Enc(B_u⁻¹)^{n_{s,u}·r_u·L} = Enc(L·n_{s,u}/n_u) (L = lcm(1..N̄) makes it an integer),
  raises c_u to each encoded coordinate ⌊Δ/P⌉ of its users' updates, multiplies over users, adds its encoded noise
  and pairwise masks in plaintext;
- the server multiplies the silos' ciphertexts (the masks cancel), decrypts, decodes centred, and divides by L/P.

Two implementations of the silo's weighting: `reference` raises c_u to every coordinate encoded mod n (a full-size
exponent per user and coordinate, the published code's cost), the default raises c_u or c_u⁻¹ to |⌊Δ/P⌉| (≈ 30-bit
exponents: the algebra is the same, as Enc(x)^{n−k} = (Enc(x)⁻¹)^k). Both decrypt to the same numbers (tested).

This module holds the weighting and histogram arithmetic with the parties' objects; pair keys are inputs here (the
Diffie–Hellman key exchange that derives them is the next step of issue 12).
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence

import gmpy2
import numpy as np

#: spec §6: the precision of the fixed-point encoding and the bound on a user's records that L covers
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


def _pair_sign_masks(index: int, pair_keys: dict[int, bytes], label: str, count: int, n: int) -> list[int]:
    """Σ over the other silos of ±mask (+ towards a larger silo index, − towards a smaller one), per position."""
    total = [0] * count
    for other, key in pair_keys.items():
        sign = 1 if index < other else -1
        for j in range(count):
            total[j] = (total[j] + sign * stream_int(key, label, j, n)) % n
    return total


class Server:
    """Holds the Paillier private key; sees only blinded histograms and encrypted, masked messages."""

    def __init__(self, n_silos: int, bits: int = 3072, record_bound: int = RECORD_BOUND):
        import phe

        self.public, self._private = phe.generate_paillier_keypair(n_length=bits)
        self.n_silos, self.L = n_silos, lcm_bound(record_bound)
        n = self.public.n
        if (self.L * 10 ** 12).bit_length() >= n.bit_length() - 2:
            raise ValueError(f"a {bits}-bit modulus cannot hold L = lcm(1..{record_bound}) ({self.L.bit_length()} bits) "
                             f"times the encoded values; use a larger modulus or a smaller record bound")

    def inverse_weights(self, histograms: dict[int, Sequence[int]]) -> list[int | None]:
        """Enc(B_u⁻¹) per user from every silo's blinded histogram (None for a user with no records anywhere).
        A missing silo leaves its masks uncancelled, so the round stops here."""
        missing = sorted(set(range(self.n_silos)) - set(histograms))
        if missing:
            raise ProtocolError(f"blinded histogram missing from silo(s) {missing}: the pairwise masks cannot cancel, "
                                f"so B_u would be wrong; the round stops")
        n = self.public.n
        sizes = {len(h) for h in histograms.values()}
        if len(sizes) != 1:
            raise ProtocolError(f"blinded histograms of different lengths {sorted(sizes)}")
        out = []
        for u in range(sizes.pop()):
            B = sum(h[u] for h in histograms.values()) % n
            out.append(None if B == 0 else self.public.raw_encrypt(int(gmpy2.invert(B, n))))
        return out

    def aggregate(self, messages: dict[int, Sequence[int]], precision: float = PRECISION) -> np.ndarray:
        """Σ_s message_s decrypted: multiply the silos' ciphertexts (their pairwise masks cancel), decrypt, decode
        centred, divide by L and multiply by P."""
        missing = sorted(set(range(self.n_silos)) - set(messages))
        if missing:
            raise ProtocolError(f"message missing from silo(s) {missing}: the pairwise masks cannot cancel")
        n, n2 = self.public.n, self.public.nsquare
        dims = {len(m) for m in messages.values()}
        if len(dims) != 1:
            raise ProtocolError(f"messages of different lengths {sorted(dims)}")
        out = []
        for j in range(dims.pop()):
            c = gmpy2.mpz(1)
            for m in messages.values():
                c = c * m[j] % n2
            out.append(decode(int(self._private.raw_decrypt(int(c))), n) / self.L * precision)
        return np.array(out)


class Silo:
    """One silo: its users' record counts and clipped updates stay here; it sends a blinded histogram and an
    encrypted, masked message. `pair_keys`: a key shared with every other silo; `masks`: the per-user r_u."""

    def __init__(self, index: int, public, pair_keys: dict[int, bytes], masks: Sequence[int],
                 record_bound: int = RECORD_BOUND):
        self.index, self.public, self.pair_keys, self.masks = index, public, dict(pair_keys), list(masks)
        self.L = lcm_bound(record_bound)

    def blinded_histogram(self, counts: Sequence[int], round_: int) -> list[int]:
        """h_{s,u} = n_{s,u}·r_u + Σ_{s'} ±mask mod n, for every user id (0 records: only masks)."""
        n = self.public.n
        pair = _pair_sign_masks(self.index, self.pair_keys, f"{round_}/user_hist", len(counts), n)
        return [(int(c) * r + m) % n for c, r, m in zip(counts, self.masks, pair)]

    def weighted_message(self, counts: Sequence[int], clipped: np.ndarray, noise: np.ndarray,
                         enc_inverse: Sequence[int | None], round_: int, precision: float = PRECISION,
                         reference: bool = False) -> list[int]:
        """Enc(Σ_u L·(n_{s,u}/n_u)·⌊Δ_u/P⌉ + L·⌊z/P⌉) per coordinate, masked: `clipped` (U, D) the users' clipped
        updates (rows of users without records here are ignored), `noise` (D,) this silo's Gaussian noise."""
        n, n2 = self.public.n, self.public.nsquare
        dim = clipped.shape[1]
        acc = [gmpy2.mpz(1)] * dim
        for u, c in enumerate(counts):
            if not c:
                continue
            if enc_inverse[u] is None:
                raise ProtocolError(f"silo {self.index}: user {u} has records but no Enc(B_u⁻¹) (histograms disagree)")
            cu = gmpy2.powmod(gmpy2.mpz(enc_inverse[u]), int(c) * self.masks[u] * self.L % n, n2)  # Enc(L n_su/n_u)
            xs = encode(clipped[u], precision)
            if reference:  # the coordinate encoded mod n: a full-size exponent each
                for j, x in enumerate(xs):
                    acc[j] = acc[j] * gmpy2.powmod(cu, x % n, n2) % n2
                continue
            cu_inv = None
            for j, x in enumerate(xs):
                if x > 0:
                    acc[j] = acc[j] * gmpy2.powmod(cu, x, n2) % n2
                elif x < 0:
                    cu_inv = gmpy2.invert(cu, n2) if cu_inv is None else cu_inv
                    acc[j] = acc[j] * gmpy2.powmod(cu_inv, -x, n2) % n2
        pair = _pair_sign_masks(self.index, self.pair_keys, f"{round_}/update", dim, n)
        plain = [(self.L * z + m) % n for z, m in zip(encode(noise, precision), pair)]
        # adding a plaintext p to a ciphertext: multiply by g^p = 1 + n·p (mod n²)
        return [int(a * (1 + n * p) % n2) for a, p in zip(acc, plain)]
