// locksim's driver for Apache Curator's InterProcessMutex (apache/curator,
// curator-recipes: locks/InterProcessMutex.java, LockInternals.java; curator-framework:
// CuratorFrameworkFactory, state/ConnectionStateManager.java, state/*ErrorPolicy.java).
//
// One CuratorFramework on the ensemble's connect string, with the scenario's session and
// connection timeouts, a retry every request timeout until the connection timeout
// (RetryUntilElapsed, as the model's Curator retries), and the ConnectionStateErrorPolicy
// the scenario's `error_policy` names (standard: SUSPENDED and LOST count as losing the
// lock; session: LOST only). One InterProcessMutex on the lock's parent path locksim's
// model uses ("/lock"): its nodes are `/lock/_c_<GUID>-lock-<10 digits>` (protected mode).
// A ConnectionStateListener is the application's watch on the lock, as Curator's docs ask
// of every lock user ("Error handling: it is strongly recommended that you add a
// ConnectionStateListener and watch for SUSPENDED and LOST state changes"): once the policy
// says a state is an error (`policy.isErrorState(newState)`) while the lock is held or
// being acquired, the lock counts as lost, and `valid` says so with Curator's state.
//
// The driver runs as a child of locksim's client process, in its process group: a pause
// (SIGSTOP to the group) stops the JVM too, with Curator's ConnectionStateManager and
// ZooKeeper's ClientCnxn threads, as a GC pause does.
//
// Requests and answers (one JSON object per line; the first line the driver writes names
// the library and its version, once the client has connected):
//   {"op": "acquire"} -> {"ok": true, "handle": NODE, "token": SEQUENCE}
//                      | {"ok": false, "why": ...}   (acquire(timeout) returned false, or
//                        the policy's error state is in force when it returns: released
//                        again; one the connection came back from meanwhile does not count,
//                        as in locksim's model, which judges a grant by the state then)
//                      | {"unknown": ...}            (Curator raised: connection loss, ...)
//   {"op": "valid"}   -> {"held": true} | {"held": false, "why": the state and the policy}
//   {"op": "release"} -> {"ok": true} | {"ok": false, "why": ...} (IllegalMonitorState,
//                        NoNode) | {"unknown": ...} (a connection error)
//   {"op": "extend"}  -> {"ok": false, ...}: the session keeps the lock; nothing to extend
// The fencing token is the lock node's sequence number (its name's last 10 digits), as
// locksim's model and its own ZooKeeper client give (InterProcessMutex's getLockPath()).
// Nothing but these lines goes to stdout: System.out is sent to stderr, slf4j-nop on the
// class path silences Curator's and ZooKeeper's logging.

import java.io.BufferedReader;
import java.io.FileDescriptor;
import java.io.FileOutputStream;
import java.io.InputStream;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.locks.InterProcessMutex;
import org.apache.curator.framework.state.ConnectionState;
import org.apache.curator.framework.state.ConnectionStateErrorPolicy;
import org.apache.curator.framework.state.SessionConnectionStateErrorPolicy;
import org.apache.curator.framework.state.StandardConnectionStateErrorPolicy;
import org.apache.curator.retry.RetryUntilElapsed;
import org.apache.zookeeper.KeeperException;

public class Curator {
    private static final PrintStream OUT =
            new PrintStream(new FileOutputStream(FileDescriptor.out), true, StandardCharsets.UTF_8);

    /** InterProcessMutex with its lock node's path (protected in the recipe). */
    static final class Mutex extends InterProcessMutex {
        Mutex(CuratorFramework client, String path) {
            super(client, path);
        }

        String node() {
            return getLockPath();
        }
    }

    private final Map<String, String> args;
    private final CuratorFramework client;
    private final Mutex mutex;
    private final ConnectionStateErrorPolicy policy;
    private final String policyName;
    /** Whether the lock is held or being acquired: the listener's states count then. */
    private volatile boolean watching;
    /** Whether an acquire is under way (a state connected again clears an error then). */
    private volatile boolean acquiring;
    /** Why the lock counts as lost (the listener's word), or null. */
    private volatile String lost;

    Curator(Map<String, String> args) {
        this.args = args;
        boolean session = "session".equals(args.get("error_policy"));
        policy = session
                ? new SessionConnectionStateErrorPolicy()
                : new StandardConnectionStateErrorPolicy();
        policyName = policy.getClass().getSimpleName();
        int connectionTimeout = num("connection_timeout_ms");
        client = CuratorFrameworkFactory.builder()
                .connectString(args.get("connect"))
                .sessionTimeoutMs(num("session_timeout_ms"))
                .connectionTimeoutMs(connectionTimeout)
                .retryPolicy(new RetryUntilElapsed(connectionTimeout, num("request_timeout_ms")))
                .connectionStateErrorPolicy(policy)
                .build();
        client.getConnectionStateListenable().addListener(this::stateChanged);
        mutex = new Mutex(client, args.get("lock_path"));
    }

    private int num(String key) {
        return Integer.parseInt(args.get(key));
    }

    private void stateChanged(CuratorFramework c, ConnectionState state) {
        if (!watching) {
            return;
        }
        if (policy.isErrorState(state)) {
            if (lost == null) {
                lost = "Curator connection state " + state + ": an error state for " + policyName;
            }
        } else if (acquiring && state.isConnected()) {
            // Connected again before the lock was granted (RECONNECTED after SUSPENDED, at a
            // leader failover): the wait goes on, and the grant is judged by the state then.
            lost = null;
        }
    }

    /**
     * Before the run: takes and releases a lock of its own, on a path of its own, then
     * removes it (a JVM's first acquire loads and interprets Curator's classes), and makes
     * the lock's directory as Curator makes it, a container (`createContainers`), if no
     * client has yet. Without that, the run's first acquire is Curator's
     * `creatingParentContainersIfNeeded`: the create fails with NoNode, the parents are
     * made (`ZKPaths.mkdirs`: an exists and a create), and the create is sent again, three
     * more quorum commits; meanwhile a client 40 to 50 ms away, whose first create finds
     * the directory made, is served first (measured in the txn log: c1's NoNode error,
     * c1's createContainer /lock, c2's node -0000000000, c1's node -0000000001). The
     * model's client makes the directory before its first node instead (one commit,
     * for every client). Creating the directory does not change its sequence counter: the
     * first node is still -0000000000.
     */
    void warmUp() throws Exception {
        client.createContainers(args.get("lock_path"));
        String path = "/locksim-warm-up-" + java.util.UUID.randomUUID();
        InterProcessMutex warm = new InterProcessMutex(client, path);
        if (warm.acquire(num("acquire_timeout_ms"), TimeUnit.MILLISECONDS)) {
            warm.release();
        }
        warm.getParticipantNodes();
        client.delete().deletingChildrenIfNeeded().forPath(path);
    }

    Map<String, Object> acquire() {
        if (mutex.isAcquiredInThisProcess()) {
            return fail("the lock is already held");
        }
        lost = null;
        watching = true;
        acquiring = true;
        boolean got;
        try {
            got = mutex.acquire(num("acquire_timeout_ms"), TimeUnit.MILLISECONDS);
        } catch (Exception e) {
            watching = false;
            return unknown(e);
        } finally {
            acquiring = false;
        }
        if (!got) {
            watching = false;
            return fail("InterProcessMutex.acquire(" + num("acquire_timeout_ms") + " ms) timed out");
        }
        String why = lost;
        if (why != null) {
            // The error state is in force as the lock is granted: the application cannot
            // count on it, and gives it back (as locksim's model does).
            watching = false;
            try {
                mutex.release();
            } catch (Exception e) {
                // The session that held it may be gone already.
            }
            return fail("connection lost while acquiring (" + why + ")");
        }
        String node = mutex.node();
        Map<String, Object> ok = answer("ok", true);
        ok.put("handle", node);
        if (node != null && node.length() >= 10) {
            try {
                ok.put("token", Long.parseLong(node.substring(node.length() - 10)));
            } catch (NumberFormatException e) {
                // Not a sequential node's name: no token.
            }
        }
        return ok;
    }

    Map<String, Object> valid() {
        if (!mutex.isAcquiredInThisProcess()) {
            return answer("held", false, "why", "no lock is held");
        }
        String why = lost;
        return why == null ? answer("held", true) : answer("held", false, "why", why);
    }

    Map<String, Object> release() {
        watching = false;
        if (!mutex.isAcquiredInThisProcess()) {
            return fail("no lock is held");
        }
        try {
            mutex.release();
            return answer("ok", true);
        } catch (IllegalMonitorStateException | KeeperException.NoNodeException e) {
            return fail(describe(e));
        } catch (Exception e) {
            return unknown(e);
        }
    }

    private static String describe(Throwable e) {
        String m = e.getMessage();
        return e.getClass().getSimpleName() + (m == null ? "" : ": " + m);
    }

    private static Map<String, Object> fail(String why) {
        return answer("ok", false, "why", why);
    }

    private static Map<String, Object> unknown(Exception e) {
        return answer("unknown", describe(e));
    }

    private static Map<String, Object> answer(Object... kv) {
        Map<String, Object> m = new LinkedHashMap<>();
        for (int i = 0; i < kv.length; i += 2) {
            m.put((String) kv[i], kv[i + 1]);
        }
        return m;
    }

    // JSON, for the flat objects of this protocol only.

    private static final Pattern PAIR = Pattern.compile(
            "\"((?:[^\"\\\\]|\\\\.)*)\"\\s*:\\s*(\"((?:[^\"\\\\]|\\\\.)*)\"|[-+0-9.eE]+|true|false|null)");

    static Map<String, String> parse(String json) {
        Map<String, String> m = new LinkedHashMap<>();
        Matcher p = PAIR.matcher(json);
        while (p.find()) {
            String v = p.group(3) != null ? unescape(p.group(3)) : p.group(2);
            m.put(unescape(p.group(1)), v);
        }
        return m;
    }

    private static String unescape(String s) {
        StringBuilder b = new StringBuilder();
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            if (c != '\\' || i + 1 == s.length()) {
                b.append(c);
                continue;
            }
            char n = s.charAt(++i);
            switch (n) {
                case 'n': b.append('\n'); break;
                case 't': b.append('\t'); break;
                case 'r': b.append('\r'); break;
                case 'u':
                    b.append((char) Integer.parseInt(s.substring(i + 1, i + 5), 16));
                    i += 4;
                    break;
                default: b.append(n);
            }
        }
        return b.toString();
    }

    private static String quote(String s) {
        StringBuilder b = new StringBuilder("\"");
        for (char c : s.toCharArray()) {
            if (c == '"' || c == '\\') {
                b.append('\\').append(c);
            } else if (c < 0x20) {
                b.append(String.format("\\u%04x", (int) c));
            } else {
                b.append(c);
            }
        }
        return b.append('"').toString();
    }

    static void write(Map<String, Object> m) {
        StringBuilder b = new StringBuilder("{");
        for (Map.Entry<String, Object> e : m.entrySet()) {
            if (b.length() > 1) {
                b.append(", ");
            }
            Object v = e.getValue();
            String value = v instanceof String ? quote((String) v) : String.valueOf(v);
            b.append(quote(e.getKey())).append(": ").append(value);
        }
        OUT.println(b.append('}'));
        OUT.flush();
    }

    /** curator-framework's version, from its jar's Maven properties. */
    static String version() {
        String pom = "/META-INF/maven/org.apache.curator/curator-framework/pom.properties";
        try (InputStream in = CuratorFramework.class.getResourceAsStream(pom)) {
            Properties p = new Properties();
            if (in != null) {
                p.load(in);
            }
            String v = p.getProperty("version");
            if (v == null) {
                v = CuratorFramework.class.getPackage().getImplementationVersion();
            }
            return v == null ? "?" : v;
        } catch (Exception e) {
            return "?";
        }
    }

    public static void main(String[] argv) throws Exception {
        System.setOut(System.err);
        if (argv.length == 0 || argv[0].equals("--version")) {
            OUT.println(version());
            return;
        }
        Curator driver = new Curator(parse(argv[0]));
        driver.client.start();
        // Up before the run starts: the first acquire finds its session established.
        driver.client.blockUntilConnected(driver.num("connection_timeout_ms"), TimeUnit.MILLISECONDS);
        driver.warmUp();
        write(answer("library", "curator", "version", version()));
        BufferedReader in =
                new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        for (String line; (line = in.readLine()) != null; ) {
            String op = parse(line).getOrDefault("op", "");
            switch (op) {
                case "acquire": write(driver.acquire()); break;
                case "valid": write(driver.valid()); break;
                case "release": write(driver.release()); break;
                case "extend":
                    write(fail("Curator's session keeps the lock: there is nothing to extend"));
                    break;
                default: write(fail("unknown op " + op));
            }
        }
        // The client process is gone: let the session go with it.
        Runtime.getRuntime().halt(0);
    }
}
