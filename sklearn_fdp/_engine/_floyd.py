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
It covers numpy's Floyd regime (``n <= 10,000`` or ``size <= n // 50``);
:func:`choice_without_replacement` falls back to ``rng.choice`` elsewhere.

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


class ChoiceWithoutReplacement:
    """``rng.choice(n, size, replace=False)`` for one numpy Generator, compiled where it can be."""

    def __init__(self, rng):
        self.rng = rng  # keeps the bit generator (and its C state) alive
        iface = getattr(getattr(rng, "bit_generator", None), "ctypes", None)
        self._fn = None if iface is None else ctypes.cast(iface.next_uint32, ctypes.c_void_p).value
        self._state = None if iface is None else iface.state_address

    def __call__(self, n, size):
        if self._fn is None or n > 0xFFFFFFFE or (n > 10000 and size > n // 50):
            # numpy's tail-shuffle regime (or 64-bit bounds): use numpy itself.
            return self.rng.choice(n, size=size, replace=False)
        with self.rng.bit_generator.lock:
            return _floyd_choice(self._fn, self._state, n, size)
