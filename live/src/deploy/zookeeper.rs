//! A ZooKeeper ensemble on loopback: one JVM per server (`QuorumPeerMain` with a `zoo.cfg`
//! of its own), client port and quorum/election ports on 127.0.0.1, the scenario's
//! `tickTime` (`tick_time_ms`, by default a tenth of the session timeout; ZooKeeper bounds a
//! session timeout to 2–20 ticks, and the scenario is refused outside them), and the
//! `srvr` four-letter word to tell readiness, the version and who leads.

use crate::deploy::cluster::{peer_proxies, Deployment, ServerInfo};
use crate::deploy::servers::{find_binary, loopback, version_in, Probe, Server};
use crate::procs::free_port;
use crate::proxy::{Delays, Proxy};
use crate::spec::LockSpec;
use locksim_protocols::raft::zookeeper::Params;
use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

/// The Debian jars a server needs (`/usr/share/java/NAME.jar`). Logging goes through
/// `slf4j-simple` to stderr: `log4j-over-slf4j` and `slf4j-log4j12` must not both be on
/// the classpath (they delegate to each other).
const JARS: &str = "zookeeper zookeeper-jute slf4j-api slf4j-simple netty-handler \
    netty-transport netty-common netty-buffer netty-codec netty-resolver \
    netty-transport-native-epoll netty-transport-native-unix-common metrics-core commons-cli \
    commons-io snappy-java";

/// A four-letter word's answer, or None.
pub fn four_letters(addr: SocketAddr, word: &str) -> Option<String> {
    let timeout = Duration::from_millis(300);
    let mut s = TcpStream::connect_timeout(&addr, timeout).ok()?;
    s.set_read_timeout(Some(timeout)).ok()?;
    s.write_all(word.as_bytes()).ok()?;
    let mut out = String::new();
    s.read_to_string(&mut out).ok()?;
    (!out.is_empty()).then_some(out)
}

/// A server's transaction-log fsyncs so far: the count of its `fsynctime` summary in
/// `mntr` (`FileTxnLog.commit` adds one per sync of its log).
pub fn log_fsyncs(addr: SocketAddr) -> Option<u64> {
    crate::deploy::metric(&four_letters(addr, "mntr")?, "zk_cnt_fsynctime")
}

/// The server that leads now (`Mode: leader` in `srvr`).
pub fn leader(addrs: &[(String, SocketAddr)]) -> Option<String> {
    addrs
        .iter()
        .find(|(_, a)| four_letters(*a, "srvr").is_some_and(|s| s.contains("Mode: leader")))
        .map(|(n, _)| n.clone())
}

/// The deployment of `params.peers` servers named `names`.
pub fn plan(
    params: Params,
    names: &[String],
    dir: &Path,
    delays: Delays,
) -> anyhow::Result<Deployment> {
    let java = find_binary("java", "zookeeper")?;
    let jars: Vec<String> = JARS
        .split_whitespace()
        .map(|j| format!("/usr/share/java/{j}.jar"))
        .collect();
    for jar in &jars {
        find_binary(jar, "zookeeper")?;
    }
    let ports: Vec<[u16; 3]> = names
        .iter()
        .map(|_| Ok([free_port()?, free_port()?, free_port()?]))
        .collect::<anyhow::Result<_>>()?;
    let lock = LockSpec::ZooKeeper {
        params: params.clone(),
        servers: vec![],
    };
    let mut d = Deployment::new(lock, election_proxies(names, &ports, delays)?);
    for (i, (name, p)) in names.iter().zip(&ports).enumerate() {
        let home = dir.join(name);
        std::fs::create_dir_all(home.join("data"))?;
        std::fs::write(home.join("data/myid"), format!("{}\n", i + 1))?;
        let cfg = format!(
            "tickTime={}\ninitLimit=10\nsyncLimit={}\ndataDir=data\nclientPort={}\nclientPortAddress=127.0.0.1\n\
             4lw.commands.whitelist=srvr,ruok,stat,mntr\nadmin.enableServer=false\nquorumListenOnAllIPs=false\n{}\n",
            params.tick_time().as_millis(), params.sync_limit_ticks, p[0],
            quorum(i, names, &ports, &d.peer_proxies).join("\n")
        );
        std::fs::write(home.join("zoo.cfg"), cfg)?;
        let args = vec![
            "-Xmx128m".to_owned(),
            "-XX:+UseSerialGC".into(),
            // No /tmp/hsperfdata_USER/PID file: a server the run SIGKILLs never removes it.
            "-XX:-UsePerfData".into(),
            "-Xshare:auto".into(),
            "-cp".into(),
            jars.join(":"),
            "org.apache.zookeeper.server.quorum.QuorumPeerMain".into(),
            "zoo.cfg".into(),
        ];
        let addr = loopback(p[0]);
        let probe: Probe =
            Box::new(move || four_letters(addr, "srvr").is_some_and(|s| s.contains("Mode: ")));
        // ZooKeeper tells its version only once it runs (`infos`).
        d.add(
            Server::new(name, home, java.clone(), args, probe)?,
            "zookeeper",
            None,
            addr,
        );
    }
    let servers = d.addrs();
    d.lock = LockSpec::ZooKeeper { params, servers };
    Ok(d)
}

/// The `server.N` lines of server `me`'s `zoo.cfg`: itself at its own quorum and election
/// ports (it binds them), every other server at the proxies in front of it.
fn quorum(
    me: usize,
    names: &[String],
    ports: &[[u16; 3]],
    proxies: &BTreeMap<String, Vec<Proxy>>,
) -> Vec<String> {
    let line = |i: usize, q: u16, e: u16| format!("server.{}=127.0.0.1:{q}:{e}", i + 1);
    let proxied = |i: usize| &proxies[&names[i]];
    (0..names.len())
        .map(|i| match i == me {
            true => line(i, ports[i][1], ports[i][2]),
            false => line(i, proxied(i)[0].addr.port(), proxied(i)[1].addr.port()),
        })
        .collect()
}

/// A proxy in front of each server's quorum port and one in front of its election port
/// (`ports`: client, quorum, election), which the other servers dial ([`peer_proxies`]).
///
/// The election proxies rewrite each connection's first message. ZooKeeper 3.8's
/// `QuorumCnxManager` opens one election connection per pair, from the higher server id to
/// the lower: a lower-id server that dials a higher one is hung up on and dialled back at
/// the election address it announced in its `InitialMessage` (`handleConnection`: protocol
/// version, sid, then the length-prefixed `host:port` of its own election port), which
/// would go around the proxy. The proxy announces the proxy in front of the sender instead,
/// so the dial-back goes through it too.
fn election_proxies(
    names: &[String],
    ports: &[[u16; 3]],
    delays: Delays,
) -> anyhow::Result<BTreeMap<String, Vec<Proxy>>> {
    let peer_ports: Vec<Vec<u16>> = ports.iter().map(|p| vec![p[1], p[2]]).collect();
    let proxies = peer_proxies(names, &peer_ports, delays)?;
    // A server's sid is its place in `names`, from 1 (its `myid`).
    let announced: Arc<BTreeMap<i64, SocketAddr>> = Arc::new(
        (0..names.len())
            .map(|i| (i as i64 + 1, proxies[&names[i]][1].addr))
            .collect(),
    );
    for list in proxies.values() {
        let announced = announced.clone();
        list[1].rewrite_first(Box::new(move |s| announce_proxy(s, &announced)));
    }
    Ok(proxies)
}

/// Reads an election connection's `InitialMessage` and returns it announcing the sender's
/// election proxy (from `announced`, by sid) instead of its own address. A bare sid (a
/// protocol version >= 0, from servers before 3.5) announces nothing and passes as it is.
fn announce_proxy(
    from: &mut TcpStream,
    announced: &BTreeMap<i64, SocketAddr>,
) -> std::io::Result<Vec<u8>> {
    let mut version = [0; 8];
    from.read_exact(&mut version)?;
    if i64::from_be_bytes(version) >= 0 {
        return Ok(version.to_vec());
    }
    let (mut sid, mut len) = ([0; 8], [0; 4]);
    from.read_exact(&mut sid)?;
    from.read_exact(&mut len)?;
    let len = i32::from_be_bytes(len);
    if !(1..=1024).contains(&len) {
        return Err(std::io::Error::other(format!("an address of {len} bytes")));
    }
    let mut address = vec![0; len as usize];
    from.read_exact(&mut address)?;
    if let Some(proxy) = announced.get(&i64::from_be_bytes(sid)) {
        address = proxy.to_string().into_bytes();
    }
    let mut message = [version.to_vec(), sid.to_vec()].concat();
    message.extend((address.len() as i32).to_be_bytes());
    message.extend(address);
    Ok(message)
}

/// Each server's version, asked once they are up.
pub fn infos(addrs: &[(String, SocketAddr)]) -> Vec<ServerInfo> {
    addrs
        .iter()
        .map(|(name, a)| {
            // Its first line: "Zookeeper version: 3.8.0-...".
            let version = version_in(&four_letters(*a, "srvr").unwrap_or_default());
            ServerInfo {
                name: name.clone(),
                software: "zookeeper".into(),
                version,
            }
        })
        .collect()
}
