// locksim's driver for node-redlock (mike-marcacci/node-redlock, src/index.ts) on ioredis.
//
// locksim's client process runs the workload (think, acquire, read, work, write, release)
// and calls the library through this driver: one JSON object per line on stdin, one answer
// per line on stdout. The library does its own work: `acquire` starts `redlock.using(
// [name], duration, settings, routine)`, whose routine is the critical section: it runs
// until `release`, while `using()` extends the lock `automaticExtensionThreshold` before
// its expiration and, when an extension fails after the expiration, aborts the routine's
// signal (`signal.aborted`, `signal.error`). `release` ends the routine; `using()` then
// waits for an extension in flight and releases on every server. The driver is a child of
// the client process and in its process group: a pause (SIGSTOP to the group) stops the
// event loop too, as mike-marcacci/node-redlock#309's blocked loop does.
//
// Requests and answers:
//   {"op": "acquire"} -> {"ok": true, "handle": ...} | {"ok": false, "why": ...}
//   {"op": "release"} -> {"ok": true} | {"ok": false, "why": ...}
//   {"op": "valid"}   -> {"held": true} | {"held": false, "why": signal.error's message}
//   {"op": "extend"}  -> {"ok": false, ...}: using() extends by itself
//   any of them       -> {"unknown": ...} when a server's answer did not come (a timeout
//                        or a connection error): the command may have taken effect
// The first line the driver writes names the library and its version.
"use strict";

const fs = require("fs");
const path = require("path");
const readline = require("readline");
const root = require("child_process")
  .execSync("npm root -g", { encoding: "utf8" })
  .trim();
const Redlock = require(path.join(root, "redlock")).default;
const { ExecutionError } = require(path.join(root, "redlock"));
const Redis = require(path.join(root, "ioredis"));

const version = (pkg) =>
  JSON.parse(fs.readFileSync(path.join(root, pkg, "package.json"))).version;

function answer(obj) {
  process.stdout.write(JSON.stringify(obj) + "\n");
}

// Whether a failed operation's votes include a server that did not answer.
function unanswered(error) {
  const votes = (error.attempts || []).flatMap((a) => {
    try {
      return [...a.votesAgainst.values()];
    } catch (_) {
      return [];
    }
  });
  return votes.some((e) => !(e instanceof Error && e.name === "ResourceLockedError"));
}

function why(error) {
  return `${error.name || "Error"}: ${error.message}`;
}

async function main() {
  const args = JSON.parse(process.argv[1]);
  const clients = args.servers.map(
    (s) =>
      new Redis({
        host: s.host,
        port: s.port,
        commandTimeout: args.command_timeout_ms,
        connectTimeout: args.command_timeout_ms,
        maxRetriesPerRequest: 0,
      })
  );
  // A server that went away is a vote against, not a crash of the driver.
  for (const c of clients) c.on("error", () => {});
  const redlock = new Redlock(clients, {
    driftFactor: args.drift_factor,
    retryCount: args.retry_count,
    retryDelay: args.retry_delay_ms,
    retryJitter: args.retry_jitter_ms,
    automaticExtensionThreshold: args.automatic_extension_threshold_ms,
  });
  redlock.on("error", () => {}); // votes against arrive here too; answers say what counts
  answer({
    library: "node-redlock",
    version: `${version("redlock")} on ioredis ${version("ioredis")}`,
  });

  let held = null; // { signal, end, done } while a routine runs: its abort signal, what
  // ends it, and using()'s promise (null, or the error it rejected with)
  let grants = 0;

  async function acquire() {
    let started;
    const entered = new Promise((resolve) => (started = resolve));
    const done = redlock
      .using([args.name], args.duration_ms, (signal) => {
        // The critical section: it lasts until locksim's client says `release`.
        return new Promise((end) => started({ signal, end }));
      })
      .then(
        () => null,
        (error) => error
      );
    const first = await Promise.race([entered, done.then((e) => ({ failed: e }))]);
    if (first && first.failed !== undefined) {
      const e = first.failed;
      return e instanceof ExecutionError && !unanswered(e)
        ? { ok: false, why: why(e) }
        : { unknown: why(e) };
    }
    grants += 1;
    held = { signal: first.signal, end: first.end, done };
    return { ok: true, handle: `using#${grants}` };
  }

  async function release() {
    if (!held) return { ok: false, why: "no routine is running" };
    const { done } = held;
    held.end();
    held = null;
    const error = await done;
    if (!error) return { ok: true };
    return error instanceof ExecutionError && !unanswered(error)
      ? { ok: false, why: why(error) }
      : { unknown: why(error) };
  }

  async function valid() {
    if (!held) return { held: false, why: "no routine is running" };
    // Timers overdue after a pause (the extension's) run before this one: the signal is
    // read after the library has had its turn, as a routine's next look would be.
    await new Promise((resolve) => setTimeout(resolve, 0));
    const s = held.signal;
    return s.aborted
      ? { held: false, why: s.error ? why(s.error) : "signal aborted" }
      : { held: true };
  }

  const ops = {
    acquire,
    release,
    valid,
    extend: async () => ({ ok: false, why: "node-redlock's using() extends by itself" }),
  };
  const lines = readline.createInterface({ input: process.stdin });
  for await (const line of lines) {
    const op = JSON.parse(line).op;
    const run = ops[op];
    answer(run ? await run() : { ok: false, why: `unknown op ${op}` });
  }
  for (const c of clients) c.disconnect();
  process.exit(0);
}

main().catch((e) => {
  process.stderr.write(`node-redlock driver: ${e.stack || e}\n`);
  process.exit(1);
});
