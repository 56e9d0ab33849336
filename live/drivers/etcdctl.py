"""locksim's driver for etcd's own lock client: `etcdctl lock` (etcd-io/etcd,
`etcdctl/ctlv3/command/lock_command.go`), which is `concurrency.NewSession(c,
WithTTL(ttl))` and `concurrency.NewMutex(s, name).Lock(ctx)` from `client/v3/concurrency`,
the Go client's session (a lease kept alive every TTL/3) and Mutex.

etcdctl holds the lock while it runs: it prints the lock's key (with `-w json`, the Get
response: its create revision is the fencing token) once `Lock` returns, unlocks
(`m.Unlock`) and exits 0 on SIGINT or SIGTERM, and exits with "session expired" when the
session's `Done()` channel fires (its keep-alives stopped being answered for a TTL, or an
answer said the lease is gone). This driver starts one `etcdctl lock` per acquire; the
etcdctl process is its child, in the client's process group, so a pause stops it with the
client and a crash kills it.

Two ways to run it, as users do (`mode` in the arguments; lock_command.go's two paths):
  signal   `etcdctl lock NAME` (the etcdctl-3.4 profile): once `Lock` returns, etcdctl gets
           its own key and exits "lock lost on init" if it is gone (a failed acquire), then
           prints it and holds until SIGTERM (Unlock) or `s.Done()` ("session expired").
  command  `etcdctl lock NAME COMMAND` (the etcd-concurrency-3.4 profile): once `Lock` returns
           etcdctl runs the command, then unlocks; no re-read of the key and no watch on
           `s.Done()`: 3.4's bare Mutex. The command here is a shell that prints its pid,
           `$ETCD_LOCK_KEY` and `$ETCD_LOCK_REV` (the lock response's revision: the token etcdctl
           gives a command) and waits; the release is SIGTERM to that shell, which exits 0, and
           etcdctl's exit code is its `Unlock`'s.

Requests and answers (one JSON object per line, as every driver):
  {"op": "acquire"} -> {"ok": true, "handle": KEY, "token": CREATE_REVISION}
                     | {"ok": false, "why": ...} (acquire_timeout_ms passed, or etcdctl ended)
  {"op": "valid"}   -> {"held": true} | {"held": false, "why": ...} (Session.Done() fired)
  {"op": "release"} -> {"ok": true} | {"ok": false, "why": ...} | {"unknown": ...}
  {"op": "extend"}  -> {"ok": false, ...}: the session renews its lease by itself
"""

import base64
import json
import os
import queue
import signal
import subprocess
import sys
import threading


# The command `etcdctl lock NAME COMMAND` runs while it holds: it says who and what it holds,
# then waits until SIGTERM, on which it exits 0 (so etcdctl's exit code is its Unlock's).
HOLDER = (
    'echo "$$ $ETCD_LOCK_KEY $ETCD_LOCK_REV"; '
    'trap \'kill $! 2>/dev/null; exit 0\' TERM; sleep 1000000 & wait'
)


def answer(obj):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def ended(proc):
    """Why an etcdctl process that exited did: its exit code and last stderr line."""
    err = proc.stderr.read().strip().splitlines()
    last = err[-1] if err else ""
    return f"etcdctl lock exited {proc.returncode}: {last}".strip()


class Driver:
    def __init__(self, args):
        self.args = args
        self.proc = None
        self.holder = None  # the command's pid while etcdctl runs it

    def start(self):
        a = self.args
        cmd = [
            "etcdctl",
            "--endpoints=" + ",".join(a["endpoints"]),
            "-w",
            "json",
            "lock",
            "--ttl=%d" % a["ttl_s"],
            a["name"],
        ]
        if a["mode"] == "command":
            cmd += ["--", "sh", "-c", HOLDER]
        self.proc = subprocess.Popen(
            cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        lines = queue.Queue()
        out = self.proc.stdout
        threading.Thread(target=lambda: lines.put(out.readline()), daemon=True).start()
        return lines

    def acquire(self):
        lines = self.start()
        try:
            line = lines.get(timeout=self.args["acquire_timeout_ms"] / 1000)
        except queue.Empty:
            self.stop()
            return {"ok": False, "why": "acquire timed out (etcdctl lock interrupted)"}
        if not line:
            self.proc.wait()
            why = ended(self.proc)
            self.proc = None
            return {"ok": False, "why": why}
        if self.args["mode"] == "command":
            pid, key, rev = line.split()
            self.holder = int(pid)
            return {"ok": True, "handle": key, "token": int(rev)}
        kv = json.loads(line)["kvs"][0]
        key = base64.b64decode(kv["key"]).decode()
        return {"ok": True, "handle": key, "token": kv["create_revision"]}

    def valid(self):
        if self.proc is not None and self.proc.poll() is None:
            return {"held": True}
        why = ended(self.proc) if self.proc is not None else "no lock"
        return {"held": False, "why": why}

    def stop(self):
        """SIGTERM: etcdctl cancels a Lock still waiting, or unlocks and exits 0; with a
        command, the command ends (SIGTERM to it) and etcdctl unlocks."""
        if self.holder is not None:
            try:
                os.kill(self.holder, signal.SIGTERM)
            except ProcessLookupError:
                pass
            self.holder = None
        else:
            self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=self.args["release_timeout_ms"] / 1000)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            return None
        return self.proc.returncode

    def release(self):
        if self.proc is None:
            return {"ok": False, "why": "no lock"}
        if self.proc.poll() is not None:
            why = ended(self.proc)
            self.proc = None
            return {"ok": False, "why": why}
        proc = self.proc
        code = self.stop()
        self.proc = None
        if code is None:
            return {"unknown": "etcdctl lock did not end after SIGTERM: killed"}
        if code == 0:
            return {"ok": True}
        return {"unknown": ended(proc)}


def main():
    args = json.loads(sys.argv[1])
    version = subprocess.run(["etcdctl", "version"], capture_output=True, text=True)
    number = version.stdout.split()[2] if version.returncode == 0 else "?"
    answer({"library": "etcdctl lock", "version": number})
    driver = Driver(args)
    for line in sys.stdin:
        op = json.loads(line)["op"]
        if op == "acquire":
            answer(driver.acquire())
        elif op == "valid":
            answer(driver.valid())
        elif op == "release":
            answer(driver.release())
        else:
            answer({"ok": False, "why": f"etcdctl lock cannot {op}: its session renews itself"})


if __name__ == "__main__":
    main()
