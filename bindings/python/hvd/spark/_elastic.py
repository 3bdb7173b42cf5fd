"""hvd.spark.run_elastic's driver: dprun's elastic generations (docs/elastic.md) over
Spark tasks. Every task registers; the driver makes each one an elastic worker
("w<index>"), publishes generation 0 of all of them, and then polls, every 0.2 s,
what the tasks report when their rank ends (runner.ended_key):
  - "D <why>": the rank died; it is recorded as the dead rank of the current
    generation (the others' collectives fail naming it) and a generation of the rest
    follows, unless fewer than min_num_proc would remain (the job fails naming it) or
    the reset limit is reached;
  - "R": the rank returned; the job is finishing (no new generation after it);
  - "E": the function raised: the job fails naming the rank (once every task ended).
A worker that asks for a new generation (hvd/elastic/reset_request) gets one of the
ranks still running. Spark cannot add tasks to a running job, so the job never grows:
max_num_proc only caps num_proc.
"""
import json
import time

from hvd import _job_driver
from hvd.spark import runner


def run(sc, num_proc, store, job, min_num_proc, max_num_proc, elastic_timeout, reset_limit):
    if max_num_proc is not None:
        num_proc = min(num_proc, int(max_num_proc))
    if num_proc < min_num_proc:
        raise ValueError("hvd.spark: num_proc=%d is below min_num_proc=%d" % (num_proc, min_num_proc))
    job["env"].setdefault("HVD_ELASTIC_TIMEOUT", str(elastic_timeout or 600))
    spark_job = runner._SparkJob(sc, num_proc, job)
    registered = runner._await_registrations(store, spark_job, num_proc, job["start_timeout"])
    hosts = [r["host"] for r in registered]
    for i in range(num_proc):
        first = dict(rank=0, size=1, local_rank=0, local_size=1, cross_rank=0, cross_size=1,
                     elastic_id="w%d" % i)
        store.set(runner._place_key(i), json.dumps(first))
    running = list(range(num_proc))  # task indices, in start order
    generation = 0
    places = _publish(store, generation, running, hosts)
    requests_seen = store.add(_job_driver.ELASTIC_RESET_REQUEST, 0)
    ended = {}
    finishing = False
    failure = None
    while len(ended) < num_proc:
        changed = False
        for i in range(num_proc):
            if i in ended:
                continue
            value = store.try_get(runner.ended_key(i))
            if value is None:
                continue
            ended[i] = value.decode()
            if i not in running:
                continue
            if ended[i] == "R":
                finishing = True
            elif ended[i].startswith("E"):
                kind, message, trace = runner._decode(ended[i][2:])
                failure = failure or "rank %d raised %s: %s\n\nThe rank's traceback:\n%s" % (
                    places[i]["rank"], kind, message, trace)
            else:
                why = "rank %d %s" % (places[i]["rank"], ended[i][2:])
                store.abort(why, generation)
                running.remove(i)
                if failure is None and len(running) < min_num_proc and not finishing:
                    failure = "%s; %d rank(s) left, fewer than min_num_proc=%d" % (
                        why, len(running), min_num_proc)
                changed = True
        if failure is None and not finishing:
            requests = store.add(_job_driver.ELASTIC_RESET_REQUEST, 0)
            if requests > requests_seen:
                requests_seen = requests
                changed = True
            if changed:
                if reset_limit is not None and generation >= reset_limit:
                    failure = "the ranks changed, but the job was reset %d time(s) (reset_limit %d)" % (
                        generation, reset_limit)
                else:
                    generation += 1
                    places.update(_publish(store, generation, running, hosts))
        if failure is not None and spark_job.error is None and not _all_ended(ended, running):
            # The rest end on their own: their next collective fails, or they wait for a
            # generation that never comes (HVD_ELASTIC_TIMEOUT); do not wait for that.
            spark_job.cancel()
            raise RuntimeError("hvd.spark: " + failure)
        if spark_job.error is not None:
            raise RuntimeError("hvd.spark: the Spark job failed: %s"
                               % str(spark_job.error).strip().splitlines()[0])
        time.sleep(0.2)
    spark_job.thread.join()
    if spark_job.error is not None:
        raise RuntimeError("hvd.spark: the Spark job failed: %s"
                           % str(spark_job.error).strip().splitlines()[0])
    if failure is not None:
        raise RuntimeError("hvd.spark: " + failure)
    last = [r for r in spark_job.results if r[0] in running]
    ordered = sorted(last, key=lambda r: places[r[0]]["rank"])
    return [runner._decode(r[3]) for r in ordered]


def _all_ended(ended, running):
    return all(i in ended for i in running)


def _publish(store, generation, running, hosts):
    """Generation `generation` of the running tasks; returns {task: place}."""
    places = _job_driver.place_ranks([hosts[i] for i in running])
    store.publish_generation(generation, {"w%d" % i: p for i, p in zip(running, places)})
    return dict(zip(running, places))
