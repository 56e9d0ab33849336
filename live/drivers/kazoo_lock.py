"""locksim's driver for kazoo's ZooKeeper `Lock` (python-zk/kazoo, `kazoo/recipe/lock.py`).

One `KazooClient` on the ensemble's connect string with the scenario's session timeout
(`timeout=`, kazoo's default retries otherwise), and one `Lock` on the lock's parent path
locksim's model uses ("/lock"): its nodes are `/lock/<uuid4 hex>__lock__<10 digits>`, and a
lost create is found again by that prefix (`_find_node`). `Lock.acquire(timeout=T)` retries
with `KazooRetry(max_tries=None)` until T, through connection losses and session
expirations alike (`ignore_expire=True`).

kazoo's `Lock` never tells its holder that the session went (`is_acquired` stays true): the
application listens to the client's states, as kazoo's docs ask. The driver's listener is
that application: while the lock is held or being acquired, `LOST`, and with the `standard`
error policy `SUSPENDED` too, counts as losing the lock, and `valid` says so with the
state. The driver is a child of locksim's client process and in its process group: a pause
(SIGSTOP to the group) stops the interpreter and kazoo's connection thread with it, as a
stall of a Python process does.

Requests and answers (one JSON object per line; the first line the driver writes names
the library and its version, once the client has connected):
  {"op": "acquire"} -> {"ok": true, "handle": NODE, "token": SEQUENCE}
                     | {"ok": false, "why": ...}  (the timeout passed, or the listener's
                       state is in force when it returns: released again; one the
                       connection came back from meanwhile does not count, as in
                       locksim's model, which judges a grant by the state then)
                     | {"unknown": ...}           (kazoo raised: connection loss, ...)
  {"op": "valid"}   -> {"held": true} | {"held": false, "why": the state}
  {"op": "release"} -> {"ok": true} | {"ok": false, "why": ...} | {"unknown": ...}
  {"op": "extend"}  -> {"ok": false, ...}: the session keeps the lock; nothing to extend
The fencing token is the lock node's sequence number (its name's last 10 digits), as
locksim's model and its own ZooKeeper client give.
"""

import json
import logging
import sys

from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import KazooException, LockTimeout
from kazoo.version import __version__ as KAZOO_VERSION


def answer(obj):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


class Driver:
    def __init__(self, args):
        self.args = args
        self.standard = args["error_policy"] != "session"
        self.client = KazooClient(
            hosts=args["connect"], timeout=args["session_timeout_ms"] / 1000
        )
        self.client.add_listener(self.state_changed)
        self.lock = self.client.Lock(args["lock_path"])
        # Whether the lock is held or being acquired (the listener's states count then),
        # and why it counts as lost, if it does.
        self.watching = False
        self.lost = None
        # Whether an acquire is under way (a state connected again clears an error then).
        self.acquiring = False

    def state_changed(self, state):
        error = state == KazooState.LOST or (
            self.standard and state == KazooState.SUSPENDED
        )
        if self.watching and self.lost is None and error:
            policy = "standard" if self.standard else "session"
            self.lost = f"kazoo state {state}: lost for the {policy} policy"
        elif self.watching and self.acquiring and state == KazooState.CONNECTED:
            # Connected again before the lock was granted: the wait goes on, and the grant
            # is judged by the state then.
            self.lost = None

    def start(self):
        self.client.start(timeout=self.args["session_timeout_ms"] / 1000 * 3)
        # The lock's directory exists before the run, as the model's client makes it
        # before its first node: the first acquire is one create, as every later one.
        self.client.ensure_path(self.args["lock_path"])

    def acquire(self):
        if self.lock.is_acquired:
            return {"ok": False, "why": "the lock is already held"}
        self.lost, self.watching, self.acquiring = None, True, True
        timeout_s = self.args["acquire_timeout_ms"] / 1000
        try:
            got = self.lock.acquire(blocking=True, timeout=timeout_s)
        except LockTimeout as e:
            self.watching = False
            return {"ok": False, "why": f"LockTimeout: {e}"}
        except (KazooException, OSError) as e:
            self.watching = False
            return {"unknown": f"{type(e).__name__}: {e}"}
        finally:
            self.acquiring = False
        if not got:
            self.watching = False
            return {"ok": False, "why": f"Lock.acquire(timeout={timeout_s}) gave up"}
        if self.lost is not None:
            # The state is in force as the lock is granted: the application cannot count on
            # the lock, and gives it back (as locksim's model does).
            why, self.watching = self.lost, False
            try:
                self.lock.release()
            except (KazooException, OSError):
                pass  # the session that held it may be gone already
            return {"ok": False, "why": f"connection lost while acquiring ({why})"}
        node = self.lock.node or ""
        ok = {"ok": True, "handle": node}
        if node[-10:].isdigit():
            ok["token"] = int(node[-10:])
        return ok

    def valid(self):
        if not self.lock.is_acquired:
            return {"held": False, "why": "no lock is held"}
        if self.lost is not None:
            return {"held": False, "why": self.lost}
        return {"held": True}

    def release(self):
        self.watching = False
        if not self.lock.is_acquired:
            return {"ok": False, "why": "no lock is held"}
        try:
            self.lock.release()
            return {"ok": True}
        except (KazooException, OSError) as e:
            return {"unknown": f"{type(e).__name__}: {e}"}


def main():
    if len(sys.argv) < 2 or sys.argv[1] == "--version":
        print(KAZOO_VERSION)
        return
    # kazoo logs through `logging`: nothing of it on stdout.
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING)
    driver = Driver(json.loads(sys.argv[1]))
    driver.start()
    answer({"library": "kazoo", "version": KAZOO_VERSION})
    ops = {"acquire": driver.acquire, "valid": driver.valid, "release": driver.release}
    for line in sys.stdin:
        op = json.loads(line)["op"]
        if op == "extend":
            answer({"ok": False, "why": "kazoo's session keeps the lock: nothing to extend"})
        elif op in ops:
            answer(ops[op]())
        else:
            answer({"ok": False, "why": f"unknown op {op!r}"})
    # The client process is gone: let the session go with it.
    driver.client.stop()


if __name__ == "__main__":
    main()
