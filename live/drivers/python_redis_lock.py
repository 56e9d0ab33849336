"""locksim's driver for python-redis-lock's `Lock` (ionelmc/python-redis-lock,
`src/redis_lock/__init__.py`), with `auto_renewal=True`.

locksim's client process runs the workload (think, acquire, read, work, write, release) and
calls the library through this driver: one JSON object per line on stdin, one answer per
line on stdout. Each acquire makes a new `Lock(redis, name, expire=S, auto_renewal=True)`, as
an application's `with redis_lock.Lock(...)` does, and the library does its own work:
`acquire(timeout=T)` sets `lock:NAME` to its random id with `SET NX EX` and, while another
holds it, blocks in `BLPOP lock-signal:NAME T` until a `release()` pushes to that list;
`auto_renewal` starts a thread that calls `extend()` every `expire * 2/3` and ends silently at
its first failure; `release()` stops that thread and runs the unlock script, which raises
`NotAcquired` when the key is no longer its own. The driver is a child of the client process
and in its process group: a pause (SIGSTOP to the group) stops both, the renewal thread too,
as a stall of a Python process does.

Requests and answers:
  {"op": "acquire"}  -> {"ok": true, "handle": ID} | {"ok": false, "why": ...}
  {"op": "release"}  -> {"ok": true} | {"ok": false, "why": "NotAcquired: ..."}
  {"op": "extend"}   -> {"ok": true} | {"ok": false, "why": "NotAcquired: ..."}
  {"op": "valid"}    -> {"held": true}: the library keeps no validity and tells the
                        application nothing when its renewal thread ends
  any of them        -> {"unknown": ...} when the library raised a connection error or a
                        timeout (the command may or may not have taken effect)
The first line the driver writes names the library and its version.
"""

import json
import sys

import redis
import redis_lock
from redis.exceptions import RedisError


def answer(obj):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def main():
    args = json.loads(sys.argv[1])
    # BLPOP blocks up to the acquire timeout: a socket timeout below it would end every wait
    # in a TimeoutError, so the request timeout bounds what comes after it.
    socket_timeout_s = (args["acquire_timeout_s"] * 1000 + args["request_timeout_ms"]) / 1000
    client = redis.StrictRedis(
        host=args["host"],
        port=args["port"],
        socket_timeout=socket_timeout_s,
        socket_connect_timeout=args["request_timeout_ms"] / 1000,
    )
    lock = None
    answer({"library": "python-redis-lock", "version": redis_lock.__version__})
    for line in sys.stdin:
        op = json.loads(line)["op"]
        try:
            if op == "acquire":
                lock = redis_lock.Lock(
                    client, args["name"], expire=args["expire_s"], auto_renewal=True
                )
                if lock.acquire(blocking=True, timeout=args["acquire_timeout_s"]):
                    answer({"ok": True, "handle": lock.id})
                else:
                    answer({"ok": False, "why": "acquire timeout passed"})
            elif op == "release":
                lock.release()
                answer({"ok": True})
            elif op == "valid":
                answer({"held": True})
            elif op == "extend":
                lock.extend()
                answer({"ok": True})
            else:
                answer({"ok": False, "why": f"unknown op {op!r}"})
        except redis_lock.NotAcquired as e:  # the server said the key is not ours
            answer({"ok": False, "why": f"NotAcquired: {e}"})
        except (RedisError, OSError) as e:
            answer({"unknown": f"{type(e).__name__}: {e}"})


if __name__ == "__main__":
    main()
