"""hvd.ray: Horovod 0.28's `horovod.ray` over dprun's runtime, for Ray clusters.

    import ray, hvd.ray
    ray.init(address="auto")
    settings = hvd.ray.RayExecutor.create_settings(timeout_s=30)
    executor = hvd.ray.RayExecutor(settings, num_workers=4, cpus_per_worker=1)
    executor.start()
    results = executor.run(train, args=(cfg,))   # train(cfg) on 4 ranks; hvd.init() inside
    executor.shutdown()

How: start() reserves one bundle of cpus_per_worker CPUs (and gpus_per_worker GPUs
with use_gpu) per worker in a placement group (PACK: as few nodes as possible) and
starts one actor per bundle. The driver (this process) serves the job's store, as dprun
does (hvd._job_driver), on the address Ray knows this node by; each actor gets its
rank (workers of a node get consecutive ranks, as dprun fills hosts), local and cross
rank, the store's address and secret, and HVD_GLOO_HOSTNAME = its node's Ray address,
so hvd.init() in the worker joins the job with no launcher of its own.

Failures: when an actor dies (its process killed, its node lost), the driver records
"rank R (Ray actor A, pid P on node N) died: ..." in the store, so the other ranks'
collectives fail at once naming it, and run()/execute() raise RuntimeError with that
line. A function that raises makes run() raise naming its rank and exception (a rank
that failed only because another did is not the cause). Every wait is bounded:
placement by settings.placement_group_timeout_s, the rest by hvd's HVD_TIMEOUT.

ElasticRayExecutor (hvd.ray.elastic) runs an hvd.elastic function on the workers the
cluster's resources allow, replacing those lost with their node.
"""
from hvd.ray.runner import BaseHorovodWorker, MiniSettings, RayExecutor  # noqa: F401
from hvd.ray.elastic import ElasticRayExecutor  # noqa: F401

__all__ = ["RayExecutor", "BaseHorovodWorker", "ElasticRayExecutor"]
