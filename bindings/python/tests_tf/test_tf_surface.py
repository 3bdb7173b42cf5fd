"""The package surface: every name Horovod 0.28.1's horovod.tensorflow and
horovod.tensorflow.keras define (their __init__.py files, in order), in hvd's, and
hvd.keras the same as hvd.tensorflow.keras."""
import hvd.keras
import hvd.tensorflow as ht
import hvd.tensorflow.keras as hk

HOROVOD_TENSORFLOW = """elastic Compression allgather_object broadcast_object broadcast_object_fn
    broadcast_variables allgather grouped_allgather broadcast broadcast_ _allreduce
    _grouped_allreduce alltoall _reducescatter _grouped_reducescatter init shutdown
    is_initialized start_timeline stop_timeline size local_size cross_size rank local_rank
    cross_rank is_homogeneous rank_op local_rank_op size_op local_size_op
    process_set_included_op mpi_threads_supported mpi_enabled mpi_built gloo_enabled gloo_built
    nccl_built ddl_built ccl_built cuda_built rocm_built ProcessSet global_process_set
    add_process_set remove_process_set Average Sum Adasum Min Max Product
    handle_average_backwards_compatibility check_num_rank_power_of_2 _executing_eagerly
    _make_subgraph _cache vars_to_refs refs_to_vars join SyncBatchNormalization
    LocalGradientAggregationHelper allreduce reducescatter grouped_allreduce _allreduce_cond
    _grouped_allreduce_cond grouped_reducescatter broadcast_global_variables
    BroadcastGlobalVariablesHook _make_cached_allreduce_grads_fn _make_allreduce_grads_fn
    _DistributedOptimizer _DistributedAdasumOptimizer DistributedOptimizer
    _DistributedGradientTape DistributedGradientTape PartialDistributedGradientTape""".split()

HOROVOD_TENSORFLOW_KERAS = """init shutdown is_initialized start_timeline stop_timeline size
    local_size cross_size rank local_rank cross_rank mpi_threads_supported mpi_enabled mpi_built
    gloo_enabled gloo_built ProcessSet global_process_set add_process_set remove_process_set
    nccl_built ddl_built ccl_built cuda_built rocm_built Average Sum Compression callbacks
    elastic DistributedOptimizer broadcast_global_variables allreduce allgather broadcast
    reducescatter load_model""".split()


def test_every_horovod_tensorflow_name_is_there():
    assert len(HOROVOD_TENSORFLOW) == 78 and len(HOROVOD_TENSORFLOW_KERAS) == 37
    assert [n for n in HOROVOD_TENSORFLOW if not hasattr(ht, n)] == []
    assert [n for n in HOROVOD_TENSORFLOW_KERAS if not hasattr(hk, n)] == []
    for name in ("TensorFlowKerasState", "TensorFlowState", "run"):
        assert hasattr(ht.elastic, name), name
    for name in ("KerasState", "CommitStateCallback", "UpdateBatchStateCallback",
                 "UpdateEpochStateCallback", "run"):
        assert hasattr(hk.elastic, name), name
    for name in ("BroadcastGlobalVariablesCallback", "MetricAverageCallback",
                 "LearningRateScheduleCallback", "LearningRateWarmupCallback",
                 "BestModelCheckpoint"):
        assert hasattr(hk.callbacks, name), name


def test_hvd_keras_is_hvd_tensorflow_keras():
    for name in HOROVOD_TENSORFLOW_KERAS:
        assert getattr(hvd.keras, name) is getattr(hk, name), name
    assert hvd.keras.callbacks.MetricAverageCallback is hk.callbacks.MetricAverageCallback
