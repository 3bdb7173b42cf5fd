"""hvd._job_driver: the job's store a Python launcher serves (hvd_store_serve) and its
tasks connect to (hvd_store_connect), and the rank layout it hands out."""
import time

import pytest

from hvd import _job_driver
from hvd import errors


def test_serve_connect_set_get_add():
    store = _job_driver.JobStore("127.0.0.1")
    try:
        assert store.port > 0
        client = _job_driver.JobStore.connect(store.address, store.secret, timeout_s=5)
        client.set("k", b"\x00value")
        assert store.get("k") == b"\x00value"
        store.set("big", b"x" * 100000)
        assert client.get("big", 1) == b"x" * 100000
        assert client.add("n", 2) == 2 and store.add("n", 3) == 5
        assert store.try_get("absent") is None
        t = time.monotonic()
        with pytest.raises(errors.HvdTimeoutError, match="absent"):
            client.get("absent", 0.3)
        assert time.monotonic() - t < 5
        store.abort("rank 1 died")
        store.abort("rank 2 died later")  # the first stays
        assert client.get(_job_driver.ABORT_REASON) == b"rank 1 died"
        client.close()
    finally:
        store.close()


def test_wrong_secret_and_unreachable_store_are_named():
    store = _job_driver.JobStore("127.0.0.1")
    with pytest.raises(errors.InvalidArgumentError):
        _job_driver.JobStore.connect(store.address, "not the secret", timeout_s=2)
    address = store.address
    store.close()
    t = time.monotonic()
    with pytest.raises(errors.HvdError, match=address):
        _job_driver.JobStore.connect(address, "s", timeout_s=0.5)
    assert time.monotonic() - t < 5
    with pytest.raises(errors.InvalidArgumentError, match="cannot serve the job's store on 192.0.2.250"):
        _job_driver.JobStore("192.0.2.250")  # not an address of this machine


def test_place_ranks_fills_nodes_in_order():
    places = _job_driver.place_ranks(["b", "a", "b", "a", "c"])
    # Workers of a node get consecutive ranks, nodes in the order they first appear.
    assert [p["rank"] for p in places] == [0, 2, 1, 3, 4]
    assert [(p["local_rank"], p["local_size"]) for p in places] == [(0, 2), (0, 2), (1, 2), (1, 2), (0, 1)]
    assert [(p["cross_rank"], p["cross_size"]) for p in places] == [(0, 3), (1, 3), (0, 2), (1, 2), (2, 3)]
    env = _job_driver.rank_env(places[4], _FakeStore(), "job", "hostC", gloo_address="10.0.0.3",
                               elastic_id="w4")
    assert env["HVD_RANK"] == "4" and env["HOROVOD_HOSTNAME"] == "hostC"
    assert env["HVD_STORE_ADDR"] == "h:1" and env["HVD_GLOO_HOSTNAME"] == "10.0.0.3"
    assert env["HVD_ELASTIC_ID"] == "w4"


class _FakeStore:
    address = "h:1"
    secret = "s"
