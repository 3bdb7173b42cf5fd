#!/usr/bin/env python3
"""Writes the seed corpora under tests/fuzz/corpus/ (committed; rerun after a change).

Each seed is a valid input in the layout its fuzz target's header describes, so the
fuzzers start from messages that reach deep into the code: authenticated store
requests of every op, and request lists that negotiate, hit the response cache, join,
shut down and mismatch. The protobuf encoding is written out by hand (field numbers
from runtime/store/store.proto and controller/messages.proto) so no protobuf module is
needed.
"""
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))


def varint(n):
    n &= (1 << 64) - 1
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def key(field, wire):
    return varint((field << 3) | wire)


def f_int(field, v):
    return key(field, 0) + varint(v) if v else b""


def f_bytes(field, v):
    if isinstance(v, str):
        v = v.encode()
    return key(field, 2) + varint(len(v)) + v


def f_double(field, v):
    return key(field, 1) + struct.pack("<d", v)


def f_packed(field, values):
    if not values:
        return b""
    body = b"".join(varint(v) for v in values)
    return key(field, 2) + varint(len(body)) + body


# ---- runtime/store/store.proto ----
AUTH, SET, GET, ADD, WAIT, DELETE = 1, 2, 3, 4, 5, 6
SECRET = "fuzz-secret"  # store_protocol_fuzz.cc's kSecret


def store_request(op, key_=b"", keys=(), value=b"", delta=0, timeout_ms=0, secret=b""):
    m = f_int(1, op)
    if key_:
        m += f_bytes(2, key_)
    for k in keys:
        m += f_bytes(3, k)
    if value:
        m += f_bytes(4, value)
    m += f_int(5, delta) + f_int(6, timeout_ms)
    if secret:
        m += f_bytes(7, secret)
    return m


def frame(body):
    return struct.pack(">I", len(body)) + body


# ---- controller/messages.proto ----
ALLREDUCE, ALLGATHER, BROADCAST, ALLTOALL, REDUCESCATTER, BARRIER, JOIN = range(7)
F32, F64, F16, BF16, I8, U8, I32, I64 = range(8)
SUM, AVERAGE, MIN, MAX, PRODUCT = range(5)


def request(type_, name, dtype=F32, op=SUM, shape=(), pre=1.0, post=1.0, root=0,
            splits=(), group_id=0, group_size=0):
    return (f_int(2, type_) + f_bytes(3, name) + f_int(4, dtype) + f_int(5, op) +
            f_packed(6, shape) + f_double(7, pre) + f_double(8, post) + f_int(9, root) +
            f_int(10, -1) + f_packed(11, splits) + f_int(12, group_id) + f_int(13, group_size))


def request_list(requests=(), shutdown=False, error_code=0, error_message="", cache_bits=(),
                 invalid_bits=()):
    m = b"".join(f_bytes(1, r) for r in requests)
    m += f_int(2, 1 if shutdown else 0) + f_int(3, error_code)
    if error_message:
        m += f_bytes(4, error_message)
    return m + f_packed(5, cache_bits) + f_packed(6, invalid_bits)


def response(type_, names, dtype=F32, counts=(), rank_dims=(), split_matrix=()):
    m = f_int(1, type_) + b"".join(f_bytes(2, n) for n in names) + f_int(3, dtype)
    m += f_double(5, 1.0) + f_double(6, 1.0) + f_int(8, -1)
    return m + f_packed(9, counts) + f_packed(10, rank_dims) + f_packed(15, split_matrix)


def response_list(responses=(), cache_hit_bits=(), fusion_threshold=0):
    m = b"".join(f_bytes(1, r) for r in responses)
    return m + f_packed(5, cache_hit_bits) + f_int(7, fusion_threshold)


def coordinator(size, cache_idx, fusion_idx, stall, cycles):
    """cycles: list of (dt_ms, [RequestList bytes for ranks 0..size-1])."""
    out = bytes([1, size - 1, cache_idx, fusion_idx, stall])
    for dt, lists in cycles:
        assert len(lists) == size
        out += bytes([dt])
        for l in lists:
            out += struct.pack("<H", len(l)) + l
    return out


def write(target, name, data):
    d = os.path.join(HERE, "corpus", target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def store_seeds():
    auth = frame(store_request(AUTH, secret=SECRET))
    ops = (frame(store_request(SET, b"a", value=b"1")) +
           frame(store_request(GET, b"a", timeout_ms=0)) +
           frame(store_request(ADD, b"n", delta=5)) +
           frame(store_request(ADD, b"a", delta=-7)) +
           frame(store_request(WAIT, keys=[b"a", b"n"], timeout_ms=10)) +
           frame(store_request(DELETE, b"a")) +
           frame(store_request(GET, b"missing", timeout_ms=1)))
    write("store_protocol_fuzz", "auth_then_every_op", b"\x01" + ops)
    write("store_protocol_fuzz", "explicit_auth_then_set",
          b"\x00" + auth + frame(store_request(SET, b"k\xff\x00", value=b"v")))
    write("store_protocol_fuzz", "wrong_secret", b"\x00" + frame(store_request(AUTH, secret="nope")))
    write("store_protocol_fuzz", "set_before_auth", b"\x00" + frame(store_request(SET, b"k", value=b"v")))
    write("store_protocol_fuzz", "half_close_mid_message", b"\x03" + frame(store_request(SET, b"k"))[:-1])
    write("store_protocol_fuzz", "oversized_length", b"\x01" + struct.pack(">I", 1 << 20) + b"x")
    write("store_protocol_fuzz", "unknown_op", b"\x01" + frame(store_request(42, b"k")))
    write("store_protocol_fuzz", "parked_get_then_set",
          b"\x01" + frame(store_request(GET, b"later", timeout_ms=5)) +
          frame(store_request(SET, b"later", value=b"x")))


def control_seeds():
    t = "control_message_fuzz"
    ar = request(ALLREDUCE, "grad.0", F32, SUM, [16])
    write(t, "decode_request_list", b"\x00" + request_list([ar, request(BARRIER, "__barrier.0", shape=[0, 1])],
                                                           cache_bits=[5]))
    write(t, "decode_response_list", b"\x00" + response_list(
        [response(0, ["a", "b"], counts=[4, 8]), response(1, ["g"], counts=[2], rank_dims=[1, 2])],
        cache_hit_bits=[1], fusion_threshold=4096))

    # Three ranks negotiate an allreduce and an uneven allgather, then meet in the cache.
    def ag(r):
        return request(ALLGATHER, "ag", I32, shape=[r + 1, 2])
    full = [request_list([ar, ag(r)]) for r in range(3)]
    bits = request_list(cache_bits=[0b11])
    write(t, "coord_cache_hits", coordinator(3, 3, 2, 0, [
        (1, full), (1, [request_list([ar, ag(0)]), bits, bits]), (1, [request_list([ar, ag(0)]), bits, bits]),
        (1, [request_list([ar]), request_list(invalid_bits=[1]), bits])]))

    # Two ranks: broadcast from 1, alltoall with uneven splits, reducescatter, grouped.
    def mix(r):
        return request_list([
            request(BROADCAST, "bc", F64, shape=[5], root=1),
            request(ALLTOALL, "a2a", F16, shape=[3, 4], splits=[1, 2] if r == 0 else [2, 1]),
            request(REDUCESCATTER, "rs", BF16, AVERAGE, shape=[4, 2]),
            request(ALLREDUCE, "g.0", I64, MAX, [3], group_id=7, group_size=2),
            request(ALLREDUCE, "g.1", I64, MAX, [5], group_id=7, group_size=2),
        ])
    write(t, "coord_mixed_two_ranks", coordinator(2, 2, 1, 0, [(1, [mix(0), mix(1)])]))

    # Four ranks: rank 3 joins while the others allreduce; then a barrier; then shutdown.
    four = [request_list([request(ALLREDUCE, "x", F32, AVERAGE, [8])]) for _ in range(3)]
    four.append(request_list([request(JOIN, "__join")]))
    barrier = [request_list([request(BARRIER, "__barrier.0", shape=[0, 1, 2, 3])]) for _ in range(4)]
    joins = [request_list([request(JOIN, "__join")]) for _ in range(3)] + [request_list()]
    write(t, "coord_join_barrier_shutdown", coordinator(4, 1, 2, 3, [
        (1, four), (1, joins), (1, barrier), (200, [request_list(shutdown=True)] * 4)]))

    # Disagreement: dtype, shape, op and scale factors differ; a name sent twice.
    bad = [request_list([request(ALLREDUCE, "w", F32, SUM, [4]), request(ALLREDUCE, "w", F32, SUM, [4])]),
           request_list([request(ALLREDUCE, "w", F64, SUM, [4], pre=0.5)]),
           request_list([request(ALLGATHER, "w", F32, shape=[2, 3])])]
    write(t, "coord_mismatch", coordinator(3, 0, 0, 0, [(1, bad)]))
    err = [request_list(), request_list(), request_list(error_code=6, error_message="lost rank 1")]
    write(t, "coord_rank_error", coordinator(3, 3, 3, 0, [(1, err)]))
    stall = [request_list([request(ALLREDUCE, "late", F32, SUM, [1])]), request_list()]
    write(t, "coord_stall", coordinator(2, 3, 2, 3, [(200, stall), (200, [request_list()] * 2),
                                                    (200, [request_list()] * 2)]))

    # The Gloo frame: small inline, inline plus tail, and a header past the limit.
    def gframe(length, payload):
        return b"\x02" + struct.pack("<Q", length) + payload
    write(t, "frame_inline", gframe(5, b"hello"))
    write(t, "frame_tail", gframe(2000, b"i" * 1016 + b"tail"))
    write(t, "frame_oversized", gframe(1 << 40, b"x" * 16))
    write(t, "frame_at_limit_plus_one", gframe((256 << 20) + 1, b""))


if __name__ == "__main__":
    store_seeds()
    control_seeds()
