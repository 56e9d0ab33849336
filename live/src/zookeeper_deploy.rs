//! A ZooKeeper ensemble on loopback: one JVM per server (`QuorumPeerMain` with a `zoo.cfg`
//! of its own), client port and quorum/election ports on 127.0.0.1, the scenario's
//! `tickTime` (`tick_time_ms`, by default a tenth of the session timeout; ZooKeeper bounds a
//! session timeout to 2–20 ticks, and the scenario is refused outside them), and the
//! `srvr` four-letter word to tell readiness, the version and who leads.

use crate::cluster::{Deployment, ServerInfo};
use crate::procs::free_port;
use crate::servers::{find_binary, version_in, Probe, Server};
use crate::spec::LockSpec;
use locksim_protocols::raft::zookeeper::{Params, Variant};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::time::Duration;

/// The Debian jars a server needs, from `/usr/share/java`. Logging goes through
/// `slf4j-simple` to stderr: `log4j-over-slf4j` and `slf4j-log4j12` must not both be on
/// the classpath (they delegate to each other).
const JARS: [&str; 16] = [
    "zookeeper.jar",
    "zookeeper-jute.jar",
    "slf4j-api.jar",
    "slf4j-simple.jar",
    "netty-handler.jar",
    "netty-transport.jar",
    "netty-common.jar",
    "netty-buffer.jar",
    "netty-codec.jar",
    "netty-resolver.jar",
    "netty-transport-native-epoll.jar",
    "netty-transport-native-unix-common.jar",
    "metrics-core.jar",
    "commons-cli.jar",
    "commons-io.jar",
    "snappy-java.jar",
];

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

/// The server that leads now (`Mode: leader` in `srvr`).
pub fn leader(addrs: &[(String, SocketAddr)]) -> Option<String> {
    addrs
        .iter()
        .find(|(_, a)| four_letters(*a, "srvr").is_some_and(|s| s.contains("Mode: leader")))
        .map(|(n, _)| n.clone())
}

/// Why live mode cannot run the model's `params`, if it cannot: its client implements the
/// recipe and the `ignore-suspended` bug only.
fn refusal(params: &Params) -> Option<String> {
    match params.variant {
        Variant::Correct | Variant::IgnoreSuspended => None,
        other => Some(format!(
            "protocol.variant = {other:?}: live mode's ZooKeeper client runs `correct` and \
             `ignore-suspended` only; run the others in the simulator"
        )),
    }
}

/// The deployment of `params.peers` servers named `names`.
pub fn plan(params: Params, names: &[String], dir: &Path) -> anyhow::Result<Deployment> {
    if let Some(why) = refusal(&params) {
        return Err(crate::Refused(why).into());
    }
    let java = find_binary("java", "zookeeper")?;
    let jars: Vec<String> = JARS
        .iter()
        .map(|j| format!("/usr/share/java/{j}"))
        .collect();
    for jar in &jars {
        find_binary(jar, "zookeeper")?;
    }
    let ports: Vec<[u16; 3]> = names
        .iter()
        .map(|_| Ok([free_port()?, free_port()?, free_port()?]))
        .collect::<anyhow::Result<_>>()?;
    let quorum: Vec<String> = ports
        .iter()
        .enumerate()
        .map(|(i, p)| format!("server.{}=127.0.0.1:{}:{}", i + 1, p[1], p[2]))
        .collect();
    let mut d = Deployment {
        servers: vec![],
        infos: vec![],
        lock: LockSpec::ZooKeeper {
            params: params.clone(),
            servers: vec![],
        },
        client_addrs: vec![],
    };
    for (i, (name, p)) in names.iter().zip(&ports).enumerate() {
        let home = dir.join(name);
        std::fs::create_dir_all(home.join("data"))?;
        std::fs::write(home.join("data/myid"), format!("{}\n", i + 1))?;
        let cfg = format!(
            "tickTime={}\ninitLimit=10\nsyncLimit=5\ndataDir=data\nclientPort={}\nclientPortAddress=127.0.0.1\n\
             4lw.commands.whitelist=srvr,ruok,stat\nadmin.enableServer=false\nquorumListenOnAllIPs=false\n{}\n",
            params.tick_time().as_millis(), p[0], quorum.join("\n")
        );
        std::fs::write(home.join("zoo.cfg"), cfg)?;
        let args = vec![
            "-Xmx128m".to_owned(),
            "-XX:+UseSerialGC".into(),
            "-Xshare:auto".into(),
            "-cp".into(),
            jars.join(":"),
            "org.apache.zookeeper.server.quorum.QuorumPeerMain".into(),
            "zoo.cfg".into(),
        ];
        let addr = SocketAddr::from(([127, 0, 0, 1], p[0]));
        let probe: Probe =
            Box::new(move || four_letters(addr, "srvr").is_some_and(|s| s.contains("Mode: ")));
        d.servers
            .push(Server::new(name, home, java.clone(), args, probe)?);
        d.client_addrs.push((name.clone(), addr));
    }
    let endpoints = d.client_addrs.iter().map(|(_, a)| a.to_string()).collect();
    d.lock = LockSpec::ZooKeeper {
        params,
        servers: endpoints,
    };
    Ok(d)
}

/// Each server's version, asked once they are up.
pub fn infos(addrs: &[(String, SocketAddr)]) -> Vec<ServerInfo> {
    addrs
        .iter()
        .map(|(name, a)| {
            let srvr = four_letters(*a, "srvr").unwrap_or_default();
            let version = srvr
                .lines()
                .next()
                .map(version_in)
                .unwrap_or_else(|| "unknown".into());
            ServerInfo {
                name: name.clone(),
                software: "zookeeper".into(),
                version,
            }
        })
        .collect()
}
