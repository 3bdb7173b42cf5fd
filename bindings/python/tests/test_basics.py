"""Topology and the package surface."""
import hvd
import hvd.numpy as hnp
import hvd.torch as ht


def test_topology():
    assert ht.is_initialized()
    assert 0 <= ht.rank() < ht.size()
    assert 0 <= ht.local_rank() < ht.local_size()
    assert 0 <= ht.cross_rank() < ht.cross_size()
    assert hnp.rank() == ht.rank() == hvd.rank()
    assert ht.global_process_set.ranks == list(range(ht.size()))
    assert ht.global_process_set.size() == ht.size()
    assert ht.global_process_set.rank() == ht.rank()
    assert ht.allgather_object(ht.rank()) == list(range(ht.size()))
    ht.check_health()


def test_init_twice_is_a_no_op():
    ht.init()
    assert ht.size() == len(ht.global_process_set.ranks)
