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

Two implementations of the silo's weighting (`Silo.weighted_message`) decrypt to the same numbers (tested):
- `reference`, the published code's arithmetic (its `secure_weighting`): phe EncryptedNumber objects on a public key
  with max_int = n − 1, as the published code sets it; every round, for every user and every parameter tensor,
  c_u = ((Enc(B_u⁻¹)·n_{s,u})·r_u)·L as three scalar products, then one scalar product per coordinate and an
  addition per user. With max_int = n − 1 phe takes every scalar k ≥ 1 as "negative" and computes
  (Enc⁻¹)^{n−k}: the three products of c_u and every positive coordinate cost a full-size (3072-bit) exponentiation
  (a negative coordinate n − |x| costs a small one). This is what the paper timed: with it the published notebook's
  Fig 12 times (85 s per silo at 16 parameters, 287 s at 107 on 10 users) are ≈ (3·#tensors + #positive
  coordinates) × #users full exponentiations;
- `fast` (default), this project's: c_u = Enc(B_u⁻¹)^{n_{s,u}·r_u·L mod n} once per user (one full-size
  exponentiation, r_u is a random element of Z_n: nothing smaller gives the same plaintext), kept across rounds
  while Enc(B_u⁻¹) and n_{s,u} are unchanged (every round of -w), and one multi-exponentiation per coordinate across
  the users with signed small exponents (c_u⁻¹ for negative coordinates).

Key exchange (`key_exchange`): every silo makes a Diffie–Hellman key pair in the RFC 3526 3072-bit MODP group 15
(`cryptography`), the server relays the public keys, every pair of silos derives its shared key with HKDF-SHA256, and
silo 0 sends a random 32-bit seed R to every other silo as R ⊕ K_{0,s} through the server; the per-user masks r_u
derive from R. The server relays only public keys and one-time-padded seeds.
"""

from __future__ import annotations

import contextlib
import hashlib
import math
import warnings
from collections.abc import Sequence

import gmpy2
import numpy as np

#: spec §6: the precision of the fixed-point encoding and the bound on a user's records that L covers
PRECISION = 1e-10
RECORD_BOUND = 2000

#: RFC 3526 §4, the 3072-bit MODP group 15 (generator 2): 2^3072 − 2^3008 − 1 + 2^64·(⌊2^2942·π⌋ + 1690314), a safe
#: prime (tests/test_kato_secure.py recomputes it from that formula)
MODP_3072_PRIME = int(
    "FFFFFFFFFFFFFFFFC90FDAA22168C234C4C6628B80DC1CD129024E088A67CC74020BBEA63B139B22514A08798E3404DD"
    "EF9519B3CD3A431B302B0A6DF25F14374FE1356D6D51C245E485B576625E7EC6F44C42E9A637ED6B0BFF5CB6F406B7ED"
    "EE386BFB5A899FA5AE9F24117C4B1FE649286651ECE45B3DC2007CB8A163BF0598DA48361C55D39A69163FA8FD24CF5F"
    "83655D23DCA3AD961C62F356208552BB9ED529077096966D670C354E4ABC9804F1746C08CA18217C32905E462E36CE3B"
    "E39E772C180E86039B2783A2EC07A28FB5C55DF06F4C52C9DE2BCBF6955817183995497CEA956AE515D2261898FA0510"
    "15728E5A8AAAC42DAD33170D04507A33A85521ABDF1CBA64ECFB850458DBEF0A8AEA71575D060C7DB3970F85A6E1E4C7"
    "ABF5AE8CDB0933D71E8C94E04A25619DCEE3D2261AD2EE6BF12FFA06D98A0864D87602733EC86A64521F2B18177B200C"
    "BBE117577A615D6C770988C0BAD946E208E24FA074E5AB3143DB5BFCE0FD108E4B82D120A93AD2CAFFFFFFFFFFFFFFFF",
    16,
)
MODP_3072_GENERATOR = 2


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


class DhParty:
    """One silo's side of the key exchange: a DH key pair in group 15; `pair_key` derives the key shared with a peer
    from the peer's public value (HKDF-SHA256 over the DH secret, bound to both silo indices)."""

    def __init__(self, index: int):
        from cryptography.hazmat.primitives.asymmetric import dh

        self.index = index
        with _ffdh():
            self._params = dh.DHParameterNumbers(MODP_3072_PRIME, MODP_3072_GENERATOR).parameters()
            self._private = self._params.generate_private_key()
        self.public = self._private.public_key().public_numbers().y  # what the server relays

    def pair_key(self, other: int, other_public: int) -> bytes:
        from cryptography.hazmat.primitives import hashes
        from cryptography.hazmat.primitives.asymmetric import dh
        from cryptography.hazmat.primitives.kdf.hkdf import HKDF

        with _ffdh():
            peer = dh.DHPublicNumbers(other_public, self._params.parameter_numbers()).public_key()
            secret = self._private.exchange(peer)
        a, b = sorted((self.index, other))
        info = f"dpfl kato2024 pair key {a}-{b}".encode()
        return HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=info).derive(secret)


@contextlib.contextmanager
def _ffdh():
    """`cryptography` warns that finite-field DH is deprecated; the spec's protocol uses it (RFC 3526 group 15)."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Diffie-Hellman over finite fields")
        yield


def key_exchange(n_silos: int, rng: np.random.Generator, times: dict | None = None
                 ) -> tuple[list[dict[int, bytes]], list[bytes], dict]:
    """Setup steps 1–3 of spec §6 for `n_silos` silos: the pair keys of every silo ({other: key}), the 32-bit seed
    every silo recovers, and what the server relayed (public values and padded seeds). Silo 0 draws R from `rng`.
    The silos' DH key generation is not timed (spec §6); the exchange (relaying, deriving the pair keys, sending and
    recovering R) is appended to times["key exchange"] when `times` is given."""
    import time

    parties = [DhParty(s) for s in range(n_silos)]
    tick = time.perf_counter()
    relayed = {"public": {p.index: p.public for p in parties}}
    keys = [{o: p.pair_key(o, relayed["public"][o]) for o in range(n_silos) if o != p.index} for p in parties]
    R = int(rng.integers(0, 2**32)).to_bytes(4, "big")
    pad = lambda key: bytes(a ^ b for a, b in zip(R, key[:4]))  # noqa: E731  R ⊕ K_{0,s} (first 32 bits of the key)
    relayed["seed"] = {s: pad(keys[0][s]) for s in range(1, n_silos)}
    seeds = [R] + [bytes(a ^ b for a, b in zip(relayed["seed"][s], keys[s][0][:4])) for s in range(1, n_silos)]
    if times is not None:
        times.setdefault("key exchange", []).append(time.perf_counter() - tick)
    return keys, seeds, relayed


class Server:
    """Holds the Paillier private key; sees only blinded histograms and encrypted, masked messages."""

    def __init__(self, n_silos: int, bits: int = 3072, record_bound: int = RECORD_BOUND):
        import phe

        self.public, self._private = phe.generate_paillier_keypair(n_length=bits)
        self.n_silos, self.L, self.record_bound = n_silos, lcm_bound(record_bound), record_bound
        n = self.public.n
        if (self.L * 10 ** 12).bit_length() >= n.bit_length() - 2:
            raise ValueError(f"a {bits}-bit modulus cannot hold L = lcm(1..{record_bound}) ({self.L.bit_length()} "
                             f"bits) times the encoded values; use a larger modulus or a smaller record bound")

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
        out, limit = [], self.L << 64
        for j in range(dims.pop()):
            c = gmpy2.mpz(1)
            for m in messages.values():
                c = c * m[j] % n2
            v = decode(int(self._private.raw_decrypt(int(c))), n)
            if abs(v) > limit:  # a legitimate sum is L·(a number of ≤ 64 bits); garbage is ≈ n/2 (odds ≈ 2^-120)
                raise ProtocolError(
                    f"coordinate {j} decrypts to a {abs(v).bit_length()}-bit value, far above L·2^64: L·n_su/n_u was "
                    f"not an integer for some user, i.e. a user holds more than N̄ = {self.record_bound} records (or "
                    f"a count whose prime-power factors exceed N̄); the round stops instead of producing a wrong model")
            out.append(v / self.L * precision)
        return np.array(out)


class Silo:
    """One silo: its users' record counts and clipped updates stay here; it sends a blinded histogram and an
    encrypted, masked message. `pair_keys`: a key shared with every other silo; `masks`: the per-user r_u.
    `full_exponentiations`: how many full-size (≈ log2 n-bit exponent) modular exponentiations mod n² its last
    weighted message took, the hardware-independent cost of the weighting (small-exponent products not counted)."""

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
                         reference: bool = False, tensor_sizes: Sequence[int] | None = None) -> list[int]:
        """Enc(Σ_u L·(n_{s,u}/n_u)·⌊Δ_u/P⌉ + L·⌊z/P⌉) per coordinate, masked: `clipped` (U, D) the users' clipped
        updates (rows of users without records here are ignored), `noise` (D,) this silo's Gaussian noise.

        Both paths need c_u = Enc(B_u⁻¹)^{n_{s,u}·r_u·L mod n}, one full-size exponentiation per user (r_u is a
        random element of Z_n: nothing smaller gives the same plaintext). `reference` follows the published code's
        arithmetic (module docstring): c_u recomputed every round per parameter tensor (`tensor_sizes`, the model's
        tensors in flat order; default: one tensor) and phe scalar products on a key with max_int = n − 1. The
        default keeps c_u for as long as Enc(B_u⁻¹) and n_{s,u} stay the same (every round of ULDP-AVG-w; -ws
        redraws them), and raises c_u or c_u⁻¹ (one inversion per user, when some coordinate is negative) to
        |⌊Δ/P⌉|, one multi-exponentiation per coordinate across the users (`multi_exp`)."""
        n2 = self.public.nsquare
        dim = clipped.shape[1]
        if reference:
            return self._reference_message(counts, clipped, noise, enc_inverse, round_, precision,
                                           tensor_sizes or [dim])
        cache = getattr(self, "_weights", {})
        fresh, bases, rows = {}, [], []
        self.full_exponentiations = 0
        for u, c in enumerate(counts):
            if not c:
                continue
            key = (u, int(c), enc_inverse[u])
            cu = cache.get(key)
            if cu is None:
                cu = self._weight(u, int(c), enc_inverse[u])
                self.full_exponentiations += 1
            fresh[key] = cu
            bases.append(cu)
            rows.append(u)
        self._weights = fresh
        exps = np.rint(np.asarray(clipped, dtype=np.float64)[rows] / precision) if rows else np.zeros((0, dim))
        return self._finish(multi_exp(bases, exps, n2), noise, round_, precision)

    def _weight(self, u: int, count: int, enc_inv: int | None):
        """c_u = Enc(B_u⁻¹)^{n_{s,u}·r_u·L} = Enc(L·n_{s,u}/n_u), one full-size exponentiation."""
        return gmpy2.powmod(gmpy2.mpz(self._enc_inverse(u, enc_inv)), count * self.masks[u] * self.L % self.public.n,
                            self.public.nsquare)

    def _enc_inverse(self, u: int, enc_inv: int | None) -> int:
        """Enc(B_u⁻¹) of a user with records here; None means the histograms disagree, so the round stops."""
        if enc_inv is None:
            raise ProtocolError(f"silo {self.index}: user {u} has records but no Enc(B_u⁻¹) (histograms disagree)")
        return enc_inv

    def _reference_message(self, counts, clipped, noise, enc_inverse, round_, precision, tensor_sizes) -> list[int]:
        """The published code's weighting (its SecureLocalTrainer.secure_weighting and _sum_params): per user and
        parameter tensor c_u = ((Enc(B_u⁻¹)·n_{s,u})·r_u)·L, then ⌊Δ/P⌉ mod n times c_u per coordinate, summed over
        users, all as phe EncryptedNumber arithmetic on a public key with max_int = n − 1 (as published)."""
        import phe

        dim = clipped.shape[1]
        if sum(tensor_sizes) != dim:
            raise ValueError(f"tensor sizes {list(tensor_sizes)} do not add up to the {dim} coordinates")
        n = self.public.n
        public = phe.PaillierPublicKey(n)
        public.max_int = n - 1  # the published code's setting: phe's inverse trick for every scalar ≥ 1
        bounds = np.cumsum([0, *tensor_sizes])
        acc = None
        self.full_exponentiations = 0
        for u, c in enumerate(counts):
            if not c:
                continue
            enc = phe.EncryptedNumber(public, int(self._enc_inverse(u, enc_inverse[u])))
            terms = []
            for a, b in zip(bounds[:-1], bounds[1:]):
                cu = enc * int(c)
                cu = cu * self.masks[u]
                cu = cu * self.L
                coords = encode(clipped[u, a:b], precision)
                terms += [x % n * cu for x in coords]
                # the three products of c_u, and every positive coordinate (phe's inverse trick: exponent n − x)
                self.full_exponentiations += 3 + sum(x > 0 for x in coords)
            acc = terms if acc is None else [x + y for x, y in zip(acc, terms)]
        if acc is None:
            acc = [public.encrypt(0, r_value=1) for _ in range(dim)]
        return self._finish([gmpy2.mpz(a.ciphertext(be_secure=False)) for a in acc], noise, round_, precision)

    def _finish(self, acc, noise, round_, precision) -> list[int]:
        """Add the encoded noise L·⌊z/P⌉ and this silo's pairwise masks in plaintext."""
        n, n2 = self.public.n, self.public.nsquare
        pair = _pair_sign_masks(self.index, self.pair_keys, f"{round_}/update", len(acc), n)
        plain = [(self.L * z + m) % n for z, m in zip(encode(noise, precision), pair)]
        # adding a plaintext p to a ciphertext: multiply by g^p = 1 + n·p (mod n²)
        return [int(a * (1 + n * p) % n2) for a, p in zip(acc, plain)]


# ------------------------------------------------------------------------------------------ one private round


def secure_round(theta, fed, fm, hyper, *, noise_std: float, batch: int, gen, server: Server, silos: list[Silo],
                 round_: int, q: float = 1.0, sampled: np.ndarray | None = None, reference: bool = False,
                 optimizer: str = "sgd", times: dict | None = None, state: dict | None = None) -> tuple:
    """One ULDP-AVG-w(s) round of one run through the protocol (spec §6): θ (D,) → θ + η_g/(U·S·q)·Σ_s message_s,
    each message_s = Σ_u (n_{s,u}/n_u)·clip_C(Δ_{s,u}) + N(0, (σC/√S)²) computed by silo s and decrypted only in
    sum. `hyper`: ULDP-AVG's typed block (dpfl.papers.kato2024.methods.PrivateLocalHyper: η_g, η_l, Q, C);
    `noise_std`: the std σC of the noise on the round's sum (the method's `round_noise_std`), each silo adding its
    1/√S share. `fed`: the run's (silo, user) pairs (dpfl.papers.kato2024.federation.Federation, one run);
    `sampled` (U,) bool: the users of this round (-ws: unsampled users count as absent, their histogram entries are
    zeros); `optimizer`: the users' local optimizer (sgd, or adam: the published code's secure path, K7).
    `state`: a dict the caller keeps across the rounds of a run; the blinded histogram (spec §6 setup steps 4–6)
    runs only when the round's counts differ from the last (every round for -ws, once for -w).
    Appends wall-clock seconds to `times` (perf_counter): "blinded histogram", "local training" (one entry per silo:
    its users' local SGD, clipping, encoding and encrypted weighting) and "aggregation"; each silo's weighting leaves
    its count in `Silo.full_exponentiations`. Returns (θ', the plaintext
    Σ_s message_s from the same updates and noise, for checking)."""
    import time

    import torch

    from dpfl.fl.aggregate import clip_updates
    from dpfl.fl.local import local_sgd
    from dpfl.papers.kato2024.federation import subset

    times = {} if times is None else times
    S, U, dim = fed.n_silos, fed.n_users, theta.shape[0]
    counts = np.zeros((S, U), dtype=np.int64)
    counts[fed.silo, fed.user] = fed.count
    if sampled is not None:
        counts[:, ~np.asarray(sampled, bool)] = 0
    clip = float(hyper.clip)

    state = {} if state is None else state
    if state.get("counts") is None or not np.array_equal(state["counts"], counts):
        tick = time.perf_counter()
        state["enc_inv"] = server.inverse_weights({s.index: s.blinded_histogram(counts[s.index], round_)
                                                   for s in silos})
        state["counts"] = counts
        times.setdefault("blinded histogram", []).append(time.perf_counter() - tick)
    enc_inv = state["enc_inv"]

    silo_of = torch.as_tensor(fed.silo, device=theta.device)
    user_of = torch.as_tensor(fed.user, device=theta.device)
    keep_user = torch.as_tensor(counts.sum(0) > 0, device=theta.device)
    messages, plain = {}, np.zeros(dim)
    for silo in silos:
        tick = time.perf_counter()
        clipped = np.zeros((U, dim))
        for b in fed.buckets:
            keep = (silo_of[b.pairs] == silo.index) & keep_user[user_of[b.pairs]]
            if not bool(keep.any()):
                continue
            part = subset(b, keep)
            start = theta[None].expand(len(part.pairs), dim)
            delta = local_sgd(fm, start, part, epochs=int(hyper.epochs), batch=batch, lr=float(hyper.eta_l),
                              gen=gen, optimizer=optimizer) - start
            delta, _ = clip_updates(delta, clip)
            clipped[user_of[part.pairs].cpu().numpy()] = delta.detach().cpu().double().numpy()
        noise = (noise_std / math.sqrt(S)) * torch.randn(dim, generator=gen, dtype=torch.float64).numpy()
        messages[silo.index] = silo.weighted_message(counts[silo.index], clipped, noise, enc_inv, round_,
                                                     reference=reference, tensor_sizes=fm.sizes)
        times.setdefault("local training", []).append(time.perf_counter() - tick)
        n_u = np.maximum(counts.sum(0), 1)
        plain += (counts[silo.index] / n_u) @ clipped + noise

    tick = time.perf_counter()
    total = server.aggregate(messages)
    times.setdefault("aggregation", []).append(time.perf_counter() - tick)
    scale = float(hyper.eta_g) / (U * S * q)
    new = theta + scale * torch.as_tensor(total, dtype=theta.dtype, device=theta.device)
    return new, plain
