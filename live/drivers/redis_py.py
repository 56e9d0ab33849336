"""locksim's driver for redis-py's `Lock` (redis/redis-py, `redis/lock.py`).

locksim's client process runs the workload (think, acquire, read, work, write, release) and
calls the library through this driver: one JSON object per line on stdin, one answer per
line on stdout. The library does its own work: `Lock.acquire()` polls `SET NX PX` with its
uuid token every `sleep` until `blocking_timeout`, `release()` and `extend()` run its Lua
scripts with the token it stored (thread-local, the default). The driver is a child of the
client process and in its process group: a pause (SIGSTOP to the group) stops both, as a
GC pause stops a whole process.

Requests and answers:
  {"op": "acquire"}  -> {"ok": true, "handle": TOKEN} | {"ok": false, "why": ...}
  {"op": "release"}  -> {"ok": true} | {"ok": false, "why": ...}
  {"op": "extend"}   -> {"ok": true} | {"ok": false, "why": ...}
  {"op": "valid"}    -> {"held": true}: redis-py keeps no validity on the client
  any of them        -> {"unknown": ...} when the library raised a connection error or a
                        timeout (the command may or may not have taken effect)
The first line the driver writes names the library and its version.
"""

import json
import sys

import redis
from redis.exceptions import LockError, RedisError


def answer(obj):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def main():
    args = json.loads(sys.argv[1])
    timeout_s = args["request_timeout_ms"] / 1000
    client = redis.Redis(
        host=args["host"],
        port=args["port"],
        socket_timeout=timeout_s,
        socket_connect_timeout=timeout_s,
    )
    ttl_s = args["ttl_ms"] / 1000
    lock = client.lock(
        args["name"],
        timeout=ttl_s,
        sleep=args["sleep_ms"] / 1000,
        blocking=True,
        blocking_timeout=args["blocking_timeout_ms"] / 1000,
    )
    answer({"library": "redis-py", "version": redis.__version__})
    for line in sys.stdin:
        op = json.loads(line)["op"]
        try:
            if op == "acquire":
                if lock.acquire():
                    answer({"ok": True, "handle": lock.local.token.decode()})
                else:
                    answer({"ok": False, "why": "blocking_timeout passed"})
            elif op == "release":
                lock.release()
                answer({"ok": True})
            elif op == "valid":
                # owned() would ask the server; the library itself never looks.
                answer({"held": True})
            elif op == "extend":
                lock.extend(ttl_s, replace_ttl=True)
                answer({"ok": True})
            else:
                answer({"ok": False, "why": f"unknown op {op!r}"})
        except LockError as e:  # LockNotOwnedError among them: the server said no
            answer({"ok": False, "why": f"{type(e).__name__}: {e}"})
        except (RedisError, OSError) as e:
            answer({"unknown": f"{type(e).__name__}: {e}"})


if __name__ == "__main__":
    main()
