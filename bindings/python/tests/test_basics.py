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


def test_surface_matches_horovod_torch():
    names = """init shutdown is_initialized rank size local_rank local_size cross_rank cross_size
        allreduce allreduce_ allreduce_async allreduce_async_ grouped_allreduce
        grouped_allreduce_ grouped_allreduce_async grouped_allreduce_async_ allgather
        allgather_async grouped_allgather broadcast broadcast_ broadcast_async broadcast_async_
        alltoall alltoall_async reducescatter reducescatter_async grouped_reducescatter
        barrier join poll synchronize Average Sum Min Max Product Adasum ProcessSet
        add_process_set remove_process_set global_process_set broadcast_parameters
        broadcast_optimizer_state broadcast_object allgather_object DistributedOptimizer
        Compression HorovodInternalError ShardedOptimizer""".split()
    missing = [n for n in names if not hasattr(ht, n)]
    assert not missing
    np_missing = [n for n in names[:38] if not hasattr(hnp, n)]
    assert not np_missing
