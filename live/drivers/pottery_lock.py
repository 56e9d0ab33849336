"""locksim's driver for pottery's `Redlock` (brainix/pottery, `pottery/redlock.py`).

locksim's client process runs the workload (think, acquire, read, work, write, release) and
calls the library through this driver: one JSON object per line on stdin, one answer per
line on stdout. Each acquire makes a new `Redlock(key=NAME, masters=..., auto_release_time=S,
num_extensions=N)`, as an application's `with Redlock(...)` does, and the library does its
own work: `acquire(timeout=T)` sets `redlock:NAME` to a fresh uuid with `SET NX PX` on every
master from a thread pool, returns at the first quorum with validity left, and otherwise
releases and tries again `random.uniform(0, 0.2)` s later; `locked()` runs its PTTL script on
every master and returns the smallest TTL of the first quorum less the drift and its own
time (0: not held); `extend()` resets the TTL on a quorum and raises `TooManyExtensions` past
`num_extensions`; `release()` raises `ReleaseUnlockedLock` without a quorum. The driver is a
child of the client process and in its process group: a pause (SIGSTOP to the group) stops
both, as a stall of a Python process does.

Requests and answers:
  {"op": "acquire"}  -> {"ok": true, "handle": UUID} | {"ok": false, "why": ...}
  {"op": "release"}  -> {"ok": true} | {"ok": false, "why": "ReleaseUnlockedLock ..."}
  {"op": "extend"}   -> {"ok": true} | {"ok": false, "why": "ExtendUnlockedLock ..." |
                        "TooManyExtensions ..."}
  {"op": "ask"}      -> {"held": true, "validity_ms": MS} | {"held": false, "why": ...}:
                        `locked()`, the question its users ask the masters
  {"op": "valid"}    -> {"held": true}: the library keeps no validity on the client
  any of them        -> {"unknown": ...} when the library raised a connection error or a
                        timeout (the command may or may not have taken effect)
The first line the driver writes names the library and its version.
"""

import json
import logging
import sys
from importlib.metadata import version

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry
from pottery import Redlock
from pottery.exceptions import PrimitiveError
from redis.exceptions import RedisError


def answer(obj):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def main():
    args = json.loads(sys.argv[1])
    # pottery logs each master's error with its traceback; the history has what matters.
    logging.getLogger("pottery").addHandler(logging.NullHandler())
    logging.getLogger("pottery").propagate = False
    timeout_s = args["request_timeout_ms"] / 1000
    # One try per command, bounded by the socket timeout: the model's request_timeout_ms.
    # redis-py 8 retries a command that timed out 10 times by default (jittered backoff up
    # to 1 s), which turns a 300 ms timeout into seconds: a transport setting, not pottery's.
    masters = [
        redis.Redis(
            host=m["host"],
            port=m["port"],
            socket_timeout=timeout_s,
            socket_connect_timeout=timeout_s,
            retry=Retry(NoBackoff(), 0),
        )
        for m in args["masters"]
    ]
    lock = None
    answer({"library": "pottery", "version": version("pottery")})
    for line in sys.stdin:
        op = json.loads(line)["op"]
        try:
            if op == "acquire":
                lock = Redlock(
                    key=args["name"],
                    masters=masters,
                    auto_release_time=args["ttl_ms"] / 1000,
                    num_extensions=args["num_extensions"],
                )
                if lock.acquire(timeout=args["acquire_timeout_ms"] / 1000):
                    answer({"ok": True, "handle": lock._uuid})
                else:
                    answer({"ok": False, "why": "acquire timeout passed"})
            elif op == "release":
                lock.release()
                answer({"ok": True})
            elif op == "extend":
                lock.extend()
                answer({"ok": True})
            elif op == "ask":
                left_s = lock.locked()
                if left_s > 0:
                    answer({"held": True, "validity_ms": left_s * 1000})
                else:
                    answer({"held": False, "why": "locked() = 0"})
            elif op == "valid":
                answer({"held": True})
            else:
                answer({"ok": False, "why": f"unknown op {op!r}"})
        except PrimitiveError as e:  # the masters said no (or too many extensions)
            answer({"ok": False, "why": f"{type(e).__name__}: {e}"})
        except (RedisError, OSError) as e:
            answer({"unknown": f"{type(e).__name__}: {e}"})


if __name__ == "__main__":
    main()
