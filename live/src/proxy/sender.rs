//! Which server opened a connection to a proxy. A proxy between servers may carry several
//! senders' connections to one server (etcd names a member by one peer URL, so every member
//! dials a member at the same proxy), and a cut between two servers must stop one sender's
//! connections only. The kernel knows who opened each one: the connecting socket is a line
//! of `/proc/net/tcp` (its local port is the accepted connection's peer port, its remote
//! port the proxy's), and that line's inode is an open file (`socket:[INODE]`) of the one
//! process holding it; the run's children ([`crate::procs::running`]) are searched for it.
//!
//! Why not etcd's own `X-Server-From` header: etcd 3.4's rafthttp sets it on stream GETs
//! (`/raft/stream/msgappv2/FROM`, `/raft/stream/message/FROM`), pipeline POSTs (`/raft`) and
//! snapshots, but not on its probes (`/raft/probing`, sent on the same keep-alive transports,
//! so a stream can go out on a connection a probe opened) nor on a follower's lease renewals
//! forwarded to the leader's peer URL (`/leases`, leasehttp). The kernel names the sender of
//! every connection, whatever its first bytes, and of any protocol.

use std::net::TcpStream;

/// The name of the run's child that opened `conn` (accepted by a proxy on loopback), if one
/// of them holds the connecting socket.
pub fn of(conn: &TcpStream) -> Option<String> {
    let (peer, local) = (conn.peer_addr().ok()?, conn.local_addr().ok()?);
    assert!(peer.ip().is_loopback(), "live mode proxies loopback only");
    let link = format!("socket:[{}]", socket_inode(peer.port(), local.port())?);
    crate::procs::running()
        .into_iter()
        .find(|(pid, _)| holds(*pid, &link))
        .map(|(_, name)| name)
}

/// The inode of the socket from `local_port` to `remote_port`, from `/proc/net/tcp` or, for
/// a dual-stack socket (a JVM's: 127.0.0.1 as `::ffff:127.0.0.1`), `/proc/net/tcp6` (`sl
/// local rem st tx:rx tr:when retrnsmt uid timeout inode ...`, ports in hex).
fn socket_inode(local_port: u16, remote_port: u16) -> Option<u64> {
    let table = ["/proc/net/tcp", "/proc/net/tcp6"]
        .iter()
        .filter_map(|t| std::fs::read_to_string(t).ok())
        .collect::<Vec<_>>()
        .join("\n");
    let (local, remote) = (format!(":{local_port:04X}"), format!(":{remote_port:04X}"));
    table.lines().find_map(|line| {
        let fields: Vec<&str> = line.split_whitespace().collect();
        let ours = fields.len() > 9 && fields[1].ends_with(&local) && fields[2].ends_with(&remote);
        ours.then(|| fields[9].parse().ok()).flatten()
    })
}

/// Whether process `pid` has `link` (`socket:[INODE]`) among its open files.
fn holds(pid: i32, link: &str) -> bool {
    let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
        return false;
    };
    fds.flatten()
        .any(|fd| std::fs::read_link(fd.path()).is_ok_and(|t| t.as_os_str() == link))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_connection_of_a_process_that_is_not_a_child_of_the_run_has_no_sender() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let _ours = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (accepted, _) = listener.accept().unwrap();
        let peer = accepted.peer_addr().unwrap();
        // The kernel has the socket, held by this process, which is no child of a run.
        assert!(socket_inode(peer.port(), listener.local_addr().unwrap().port()).is_some());
        assert!(holds(
            std::process::id() as i32,
            &format!(
                "socket:[{}]",
                socket_inode(peer.port(), listener.local_addr().unwrap().port()).unwrap()
            )
        ));
        assert_eq!(of(&accepted), None);
    }
}
