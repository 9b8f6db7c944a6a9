"""NumPy's ``Generator.choice(n, size, replace=False)``, compiled: the same indices, faster.

The Poisson sampler draws a batch size from Binomial(n, q) and then a
uniform subset of that size with ``rng.choice`` (Floyd's algorithm with a
hash set, then a Fisher–Yates shuffle of the picks). On Adult (n = 32,561,
~256 picks) that call costs ~9.5 µs, an eighth of a whole DP step, most of
it call overhead. :func:`floyd_choice` runs the same algorithm on the same
bit generator through its C interface (``bit_generator.ctypes``): the same
picks in the same order and the generator left in the same state, so every
fit is bit for bit what it was with ``rng.choice`` (``tests/test_engine.py``
compares them over many seeds and sizes, and the generator's state after).
It covers both of numpy's regimes: Floyd's (``n <= 10,000`` or ``size <= n //
50``) and the tail shuffle beyond it (a partial Fisher–Yates shuffle of
``arange(n)``, whose last ``size`` entries are the picks), which
:func:`_tail_choice` runs on a permutation buffer kept between calls and
restored after each (no ``arange(n)`` per call: on Adult's private and public
batches of ~1,444 rows, ~21 µs a call with numpy, a few µs compiled). Above
``_TAIL_MAX_N`` rows (a buffer of 8 bytes a row) and for bounds beyond 32
bits, :class:`ChoiceWithoutReplacement` falls back to ``rng.choice``.

The translation follows numpy's ``_generator.pyx`` (``choice``,
``_shuffle_int``) and ``distributions.c`` (``random_bounded_uint64``,
``buffered_bounded_lemire_uint32``), numpy 1.17 to 2.x.
"""

import ctypes

import numpy as np
from llvmlite import ir
from numba import njit, types, uint32, uint64
from numba.extending import intrinsic

_EMPTY = np.uint64(0xFFFFFFFFFFFFFFFF)


@intrinsic
def _call_next_uint32(typingctx, fn_address, state_address):
    """``next_uint32(state)`` through the bit generator's C function pointer."""
    sig = types.uint32(types.intp, types.intp)

    def codegen(context, builder, signature, args):
        i8p = ir.IntType(8).as_pointer()
        fnty = ir.FunctionType(ir.IntType(32), [i8p])
        fn = builder.inttoptr(args[0], fnty.as_pointer())
        return builder.call(fn, [builder.inttoptr(args[1], i8p)])

    return sig, codegen


@njit(cache=True, inline="always")
def _bounded(fn, state, rng):
    """``random_bounded_uint64(state, 0, rng, 0, 0)`` for ``rng < 2**32 - 1``: Lemire's method."""
    if rng == 0:
        return uint64(0)
    rng_excl = uint64(rng) + uint64(1)
    m = uint64(_call_next_uint32(fn, state)) * rng_excl
    leftover = m & uint64(0xFFFFFFFF)
    if leftover < rng_excl:
        threshold = uint64((uint32(0xFFFFFFFF) - uint32(rng)) % uint32(rng_excl))
        while leftover < threshold:
            m = uint64(_call_next_uint32(fn, state)) * rng_excl
            leftover = m & uint64(0xFFFFFFFF)
    return m >> uint64(32)


@njit(cache=True)
def _floyd_choice(fn, state, n, size):
    out = np.empty(size, dtype=np.int64)
    mask = uint64(int(1.2 * size))
    mask |= mask >> uint64(1)
    mask |= mask >> uint64(2)
    mask |= mask >> uint64(4)
    mask |= mask >> uint64(8)
    mask |= mask >> uint64(16)
    mask |= mask >> uint64(32)
    hash_set = np.full(mask + uint64(1), _EMPTY, dtype=np.uint64)
    for j in range(n - size, n):
        val = _bounded(fn, state, j)
        loc = val & mask
        while hash_set[loc] != _EMPTY and hash_set[loc] != val:
            loc = (loc + uint64(1)) & mask
        if hash_set[loc] == _EMPTY:  # val not picked yet
            hash_set[loc] = val
            out[j - n + size] = val
        else:  # pick j instead
            loc = uint64(j) & mask
            while hash_set[loc] != _EMPTY:
                loc = (loc + uint64(1)) & mask
            hash_set[loc] = j
            out[j - n + size] = j
    for i in range(size - 1, 0, -1):  # numpy shuffles the picks
        k = _bounded(fn, state, i)
        tmp = out[k]
        out[k] = out[i]
        out[i] = tmp
    return out


@njit(cache=True)
def _tail_choice(fn, state, perm, size):
    """numpy's tail-shuffle ``choice``: shuffle the last ``size`` slots of ``perm``, return them.

    ``perm`` is ``arange(n)`` on entry and on return: the swaps are undone
    in reverse order, so the buffer serves the next call as numpy's fresh
    ``arange(n)`` would. numpy's ``_shuffle_int(n, max(n - size, 1))``.
    """
    n = perm.shape[0]
    first = max(n - size, 1)
    swaps = np.empty(n - first, dtype=np.int64)
    for i in range(n - 1, first - 1, -1):
        j = np.int64(_bounded(fn, state, i))
        swaps[n - 1 - i] = j
        tmp = perm[j]
        perm[j] = perm[i]
        perm[i] = tmp
    out = perm[n - size:].copy()
    for i in range(first, n):  # undo, last swap first
        j = swaps[n - 1 - i]
        tmp = perm[j]
        perm[j] = perm[i]
        perm[i] = tmp
    return out


# Largest n whose tail-shuffle picks are compiled: the permutation buffer
# kept between calls has 8 bytes a row (64 MiB here); numpy's own choice
# allocates the same arange(n) at every call.
_TAIL_MAX_N = 1 << 23


class ChoiceWithoutReplacement:
    """``rng.choice(n, size, replace=False)`` for one numpy Generator, compiled where it can be."""

    def __init__(self, rng):
        self.rng = rng  # keeps the bit generator (and its C state) alive
        iface = getattr(getattr(rng, "bit_generator", None), "ctypes", None)
        self._fn = None if iface is None else ctypes.cast(iface.next_uint32, ctypes.c_void_p).value
        self._state = None if iface is None else iface.state_address
        self._perm = None  # arange(n) of the last tail-shuffle n (see _tail_choice)

    def __call__(self, n, size):
        tail = n > 10000 and size > n // 50  # numpy's tail-shuffle regime
        if self._fn is None or n > 0xFFFFFFFE or (tail and n > _TAIL_MAX_N):
            return self.rng.choice(n, size=size, replace=False)
        if tail:
            if self._perm is None or self._perm.shape[0] != n:
                self._perm = np.arange(n, dtype=np.int64)
            with self.rng.bit_generator.lock:
                return _tail_choice(self._fn, self._state, self._perm, size)
        with self.rng.bit_generator.lock:
            return _floyd_choice(self._fn, self._state, n, size)
