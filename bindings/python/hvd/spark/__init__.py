"""hvd.spark: Horovod 0.28's `horovod.spark.run` over dprun's runtime.

    from pyspark.sql import SparkSession
    import hvd.spark
    spark = SparkSession.builder.getOrCreate()
    results = hvd.spark.run(train, args=(cfg,), num_proc=4)   # train(cfg) on 4 ranks

How, as in Horovod (no ssh, no MPI): the driver (this process) serves the job's store
(hvd._job_driver) and runs one Spark job of num_proc tasks. Each task registers with
the driver through the store (its index and host), and gets back its rank: tasks on one
host get consecutive ranks, hosts in the order they registered, as dprun fills hosts.
The task then starts the function in a process of its own (executable, default
sys.executable -m hvd._run_task) with the variables dprun would give a rank (and
`env`), so hvd.init() there joins the job, and hands its return value back as the
task's result. The function, its arguments and the results travel pickled
(cloudpickle if installed), as with hvd.run.

Failures: a rank whose process dies (killed, a non-zero exit without an exception)
is recorded in the store by its task, "rank R (Spark task T, pid P on host H) was
killed by signal 9", so the other ranks fail at once naming it; run() raises
RuntimeError with the first cause (a dead rank, else the first exception that is not
hvd's report of another rank's failure). Tasks that do not all register within
start_timeout (default HOROVOD_SPARK_START_TIMEOUT or 600 s: too few executor cores)
fail the job naming how many did and which were missing.

run_elastic is the elastic form (hvd.elastic functions): tasks that fail leave the job,
which goes on while at least min_num_proc remain.
"""
from hvd.spark.runner import run, run_elastic  # noqa: F401

__all__ = ["run", "run_elastic"]
