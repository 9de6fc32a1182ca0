"""Two attacks on kato2024's private weighting protocol (dpfl.papers.kato2024.protocol), which succeed on the
paper's protocol (security: paper) and fail on the secure mode (docs/papers/kato2024.md, 'Security of the private
weighting protocol'):

(a) the server reads a silo's noise-free update from its ciphertext. A silo sends C_j = ∏_u c_u^{x_{u,j}}·(1+n)^{L·ζ_j +
    m_j} mod n² with x = ⌊Δ/P⌉: the noise ζ and the pairwise masks m enter only through (1+n)^…, which is 1 mod n, and
    nothing re-randomises C. So C_j mod p = b^{x_j} with b = Enc(B_u⁻¹)^{e_u} mod p, all known to the server for a
    silo whose one user holds all its records there (e_u = n_{s,u}·r_u·L = B_u·L mod n). The server knows p, and
    when p − 1 is smooth (here by construction: a product of primes below 4096) Pohlig–Hellman gives x_j mod the order
    of b, i.e. x_j itself. In the secure mode C_j carries a fresh r^n, uniform in Z_n*: the same computation returns
    nothing, or a wrong value;
(b) anyone with the configuration recomputes R: the paper's mode draws it from the run's seeded stream (the global
    seed, the setting, the run's seed), hence every mask r_u, and, with the server's B_u = r_u·n_u, every user's
    record count n_u. Even drawn from a CSPRNG, 32 bits fall to a search: a candidate R is right exactly when every
    n_u it gives is at most N̄. The secure mode's R has 256 bits from `secrets`: the recomputed R is another one and
    its "counts" are residues of the size of n.

Small keys (512 bits) and a record bound of 30 keep each test well under a second or two; the secure mode accepts
the chosen primes and the small key because the tests declare themselves simulations.
"""

from __future__ import annotations

import math
import random

import gmpy2
import numpy as np
import pytest

from dpfl.papers.kato2024.protocol.encoding import PRECISION, user_masks
from dpfl.papers.kato2024.protocol.secure import Server, Silo
from dpfl.papers.kato2024.protocol.security import Security

BOUND = 30  # N̄: L = lcm(1..30), whose odd prime factors are all below the smooth part's primes
SMALL_PRIMES = [int(p) for p in range(37, 4096) if gmpy2.is_prime(p)]


def smooth_prime(bits: int, rng: random.Random) -> tuple[int, list[int]]:
    """A prime p of about `bits` bits with p − 1 = 2·∏ of distinct primes in [37, 4096): (p, the primes of p − 1)."""
    while True:
        factors, value = [2], 2
        while value.bit_length() < bits:
            ell = rng.choice(SMALL_PRIMES)
            if ell not in factors:
                factors.append(ell)
                value *= ell
        if gmpy2.is_prime(value + 1, 40):
            return value + 1, factors


def discrete_log(g: int, h: int, p: int, factors: list[int]) -> tuple[int, int] | None:
    """Pohlig–Hellman in Z_p* for p − 1 = ∏ factors (distinct primes): (x mod M, M) with g^x = h mod p, M the order of
    g; None when h is not a power of g. Each prime's digit by baby-step giant-step."""
    order = p - 1
    residues, moduli = [], []
    for ell in factors:
        g_l, h_l = pow(g, order // ell, p), pow(h, order // ell, p)
        if g_l == 1:
            if h_l != 1:
                return None
            continue
        step = gmpy2.isqrt(ell) + 1
        baby = {}
        value = 1
        for j in range(step):
            baby.setdefault(value, j)
            value = value * g_l % p
        giant = pow(int(gmpy2.invert(g_l, p)), int(step), p)
        gamma, digit = h_l, None
        for i in range(step):
            if gamma in baby:
                digit = (i * step + baby[gamma]) % ell
                break
            gamma = gamma * giant % p
        if digit is None:
            return None
        residues.append(digit)
        moduli.append(ell)
    modulus = math.prod(moduli)
    x = sum(r * (modulus // m) * int(gmpy2.invert(modulus // m, m)) for r, m in zip(residues, moduli)) % modulus
    return x, modulus


def centred(x: int, modulus: int) -> int:
    return x - modulus if x > modulus // 2 else x


def parties(security: Security, rng: random.Random, counts: np.ndarray):
    """A server on a chosen 512-bit key whose p − 1 is smooth, the silos, and the server's view after the blinded
    histograms: (server, silos, p and p − 1's primes, B_u, Enc(B_u⁻¹))."""
    p, factors = smooth_prime(256, rng)
    q, _ = smooth_prime(256, rng)
    S, U = counts.shape
    server = Server(S, record_bound=BOUND, security=security, primes=(p, q))
    n = server.public.n
    keys = {(a, b): bytes([a, b]) * 16 for a in range(S) for b in range(S) if a < b}
    masks = user_masks(b"R", U, n)
    silos = [Silo(s, server.public, {o: keys[min(s, o), max(s, o)] for o in range(S) if o != s}, masks,
                  record_bound=BOUND, security=security) for s in range(S)]
    hist = {s.index: s.blinded_histogram(counts[s.index], 0) for s in silos}
    B = [sum(h[u] for h in hist.values()) % n for u in range(U)]
    return server, silos, (p, factors), B, server.inverse_weights(hist)


def read_update(message: list[int], enc_inv: int, B_u: int, server: Server, p: int, factors: list[int]):
    """The server's attack (a) on the message of a silo whose only user u holds all its records there: x_j from
    C_j mod p = b^{x_j}, b = (Enc(B_u⁻¹) mod p)^{B_u·L mod n}. Returns the updates x_j·P, or None if some C_j is no
    power of b."""
    n = server.public.n
    b = pow(enc_inv % p, B_u * server.L % n, p)
    out = []
    for c in message:
        found = discrete_log(b, c % p, p, factors)
        if found is None:
            return None
        x, order = found
        assert order.bit_length() > 64  # far beyond 2·|x| (|Δ| ≤ C = 1 here: |x| ≤ 10^10 < 2^34)
        out.append(centred(x, order) * PRECISION)
    return np.array(out)


@pytest.mark.parametrize("security", [Security("paper"), Security("secure", simulation=True)], ids=lambda s: s.level)
def test_a_the_server_reads_a_single_user_silos_update_from_its_ciphertext(security):
    rng = random.Random(11)
    counts = np.array([[5, 0, 0], [0, 3, 4]])  # silo 0 holds one user, all of whose records are there
    server, silos, (p, factors), B, enc_inv = parties(security, rng, counts)
    gen = np.random.default_rng(0)
    clipped = gen.normal(scale=0.05, size=(3, 4))  # the silo's users' clipped updates (rows of other users ignored)
    if security.secure:
        noise = silos[0].draw_noise(5.0, 2, 4)
    else:
        noise = gen.normal(scale=5.0 / np.sqrt(2), size=4)  # large: the noisy message is far from the update
    message = silos[0].weighted_message(counts[0], clipped, noise, enc_inv, round_=0)
    got = read_update(message, enc_inv[0], B[0], server, p, factors)
    if security.secure:  # a fresh r^n per coordinate: nothing, or garbage
        assert got is None or not np.allclose(got, clipped[0], atol=1e-3)
    else:  # the noise-free update, to the encoding's precision
        assert np.all(np.abs(got - clipped[0]) <= PRECISION / 2 + 1e-16)
        assert not np.allclose(got, clipped[0] + noise * (1 if noise.dtype.kind == "f" else PRECISION), atol=0.1)


@pytest.mark.parametrize("reference", [False, True], ids=["fast", "reference"])
def test_a_in_the_paper_mode_the_ciphertext_mod_n_ignores_the_noise_and_the_masks(reference):
    """Why attack (a) works for either weighting: two messages with other noise and other pairwise masks are equal
    mod n in the paper's mode; in the secure mode even the same inputs give unrelated residues."""
    rng = random.Random(5)
    counts = np.array([[5, 2, 0], [0, 3, 4]])
    clipped = np.random.default_rng(1).normal(scale=0.05, size=(3, 3))
    for security in (Security("paper"), Security("secure", simulation=True)):
        server, silos, _, _, enc_inv = parties(security, rng, counts)
        n = server.public.n
        silo = silos[0]
        first = silo.weighted_message(counts[0], clipped, np.array([0.3, -1.2, 2.0]), enc_inv, round_=0,
                                      reference=reference)
        silo.pair_keys = {1: b"another key" * 3}
        second = silo.weighted_message(counts[0], clipped, np.array([-4.0, 0.7, 0.1]), enc_inv, round_=1,
                                       reference=reference)
        same = [a % n == b % n for a, b in zip(first, second)]
        assert all(same) if not security.secure else not any(same)
        assert first != second  # mod n² the noise and the masks are there


def attacker_seed(global_seed: int, setting: str, run_seed: int) -> bytes:
    """What anyone with the configuration recomputes: the cell's draws from the run's seeded stream, in the order the
    cell makes them (dpfl.papers.kato2024.protocol.cell.run_cell: the torch generator's seed, then R)."""
    from dpfl.papers.kato2024.streams import Streams
    from dpfl.seeds import torch_generator

    rng = Streams(global_seed).protocol(setting, run_seed)
    torch_generator(rng)
    return int(rng.integers(0, 2**32)).to_bytes(4, "big")


def counts_from(seed: bytes, B: list[int], n: int) -> list[int]:
    """n_u = B_u·r_u⁻¹ mod n from the masks a candidate seed gives."""
    return [b * int(gmpy2.invert(r, n)) % n for b, r in zip(B, user_masks(seed, len(B), n))]


@pytest.mark.parametrize("level", ["paper", "secure"])
def test_b_the_configuration_alone_gives_r_and_every_users_record_count(level):
    from dpfl.papers.kato2024.protocol.cell import protocol_parties
    from dpfl.papers.kato2024.streams import Streams
    from dpfl.seeds import torch_generator

    S, U, setting, run_seed, global_seed = 3, 6, "h2-U6", 1, 0
    rng = Streams(global_seed).protocol(setting, run_seed)  # the cell's setup of one run
    torch_generator(rng)
    server, silos = protocol_parties(Security(level, simulation=True), 1024, BOUND, S, U, rng, {})
    counts = np.random.default_rng(2).integers(0, 6, size=(S, U))
    n = server.public.n
    hist = {s.index: s.blinded_histogram(counts[s.index], 0) for s in silos}
    B = [sum(h[u] for h in hist.values()) % n for u in range(U)]  # what the server sees

    R = attacker_seed(global_seed, setting, run_seed)
    recovered = counts_from(R, B, n)
    if level == "paper":
        assert user_masks(R, U, n) == silos[0].masks and recovered == list(counts.sum(0))
        # a 32-bit R drawn securely falls to a search: the right candidate gives counts ≤ N̄, a wrong one does not
        search = random.Random(3)
        wrong = [search.getrandbits(32).to_bytes(4, "big") for _ in range(64)]
        assert all(max(counts_from(c, B, n)) > BOUND for c in wrong if c != R)
    else:
        assert user_masks(R, U, n) != silos[0].masks
        assert max(recovered) > 2**64  # residues of the size of n, no counts
