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

With `"threads": true` (the `redis-py-shared-token` profile, redis/redis-py#416) the scenario's
clients are the threads of this one process and share one `Lock(thread_local=False)`, which
stores its token on the instance. The driver then serves them over TCP: it listens on
127.0.0.1, says hello with its `port`, and runs a thread per connection; a connection's first
line is its client's server address (`{"host": ..., "port": ...}`, the client's own link),
then requests and answers as above. Each thread talks to Redis through a client of its own
(the Lock's `redis` attribute resolves per thread), so each thread's link is its own; what
they share is the Lock object, as the report's threads did. A client process paused or
killed at a workload point leaves its thread idle or ends it (its connection closes); the
token stays on the instance.
"""

import json
import socket
import sys
import threading
import uuid

import redis
from redis.exceptions import LockError, RedisError
from redis.lock import Lock


def answer(obj):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def connect(link, timeout_s):
    return redis.Redis(
        host=link["host"],
        port=link["port"],
        socket_timeout=timeout_s,
        socket_connect_timeout=timeout_s,
    )


def new_lock(client, args, thread_local):
    return Lock(
        client,
        args["name"],
        timeout=args["ttl_ms"] / 1000,
        sleep=args["sleep_ms"] / 1000,
        blocking=True,
        blocking_timeout=args["blocking_timeout_ms"] / 1000,
        thread_local=thread_local,
    )


def serve(lock, lines, say):
    """Answers requests until the input ends."""
    for line in lines:
        op = json.loads(line)["op"]
        try:
            if op == "acquire":
                # The token the library would draw (uuid4), drawn here so that the answer
                # names this call's, not whatever another thread stored on a shared instance.
                token = uuid.uuid4().hex
                if lock.acquire(token=token):
                    say({"ok": True, "handle": token})
                else:
                    say({"ok": False, "why": "blocking_timeout passed"})
            elif op == "release":
                lock.release()
                say({"ok": True})
            elif op == "valid":
                # owned() would ask the server; the library itself never looks.
                say({"held": True})
            elif op == "extend":
                lock.extend(lock.timeout, replace_ttl=True)
                say({"ok": True})
            else:
                say({"ok": False, "why": f"unknown op {op!r}"})
        except LockError as e:  # LockNotOwnedError among them: the server said no
            say({"ok": False, "why": f"{type(e).__name__}: {e}"})
        except (RedisError, OSError) as e:
            say({"unknown": f"{type(e).__name__}: {e}"})


HELLO = {"library": "redis-py", "version": redis.__version__}


def serve_threads(args, timeout_s):
    """The clients as threads sharing one Lock(thread_local=False)."""
    local = threading.local()

    class ThreadsClient:
        """The Lock's `redis`: each thread's own client (the main thread's is the one the
        Lock registers its scripts with; it never sends a command)."""

        def __getattr__(self, name):
            return getattr(local.client, name)

    local.client = connect(args, timeout_s)
    lock = new_lock(ThreadsClient(), args, thread_local=False)

    def thread(conn):
        with conn, conn.makefile("r") as lines, conn.makefile("w") as out:

            def say(obj):
                out.write(json.dumps(obj) + "\n")
                out.flush()

            local.client = connect(json.loads(lines.readline()), timeout_s)
            say(HELLO)
            try:
                serve(lock, lines, say)
            except OSError:
                pass  # its client process was killed: the thread ends

    server = socket.create_server(("127.0.0.1", 0))
    answer({**HELLO, "port": server.getsockname()[1]})
    while True:
        conn, _ = server.accept()
        threading.Thread(target=thread, args=(conn,), daemon=True).start()


def main():
    args = json.loads(sys.argv[1])
    timeout_s = args["request_timeout_ms"] / 1000
    if args.get("threads"):
        serve_threads(args, timeout_s)
        return
    lock = new_lock(connect(args, timeout_s), args, thread_local=True)
    answer(HELLO)
    serve(lock, sys.stdin, answer)

if __name__ == "__main__":
    main()
