//! The tests of `src/raft/zookeeper/tree.rs`.

use locksim_protocols::raft::zookeeper::tree::*;
use std::time::Duration;

#[test]
fn an_expiry_is_rounded_up_to_the_end_of_its_tick_bucket() {
    let ms = Duration::from_millis;
    let tree = Tree::new(ms(2_000));
    // ZooKeeper: (t / tick + 1) * tick, so an exact multiple moves a whole tick on.
    assert_eq!(tree.expiry_after(ms(100), ms(4_000)), ms(6_000));
    assert_eq!(tree.expiry_after(ms(0), ms(4_000)), ms(6_000));
    assert_eq!(tree.expiry_after(ms(1_999), ms(4_000)), ms(6_000));
    assert_eq!(tree.expiry_after(ms(2_000), ms(4_000)), ms(8_000));
    assert_eq!(Tree::default().expiry_after(ms(1), ms(4_000)), ms(4_001));
}

/// A session the leader's tracker has expired, whose close no tree has applied yet (the
/// tracker closes it at its next tick): a follower answers a ping from its own tree, but a
/// reconnection's attach goes to the leader, which says expired (`Learner.validateSession`).
/// When a follower answered the attach from its tree, the client took the session back, was
/// granted, and the close that came a tick later let the next client in beside it.
#[test]
fn an_attach_to_a_follower_hears_from_the_leader_that_the_session_expired() {
    use locksim_protocols::raft::host::{Env, Handling, Service};
    use locksim_sim::{simulate, Role, SimSpec};
    let ms = Duration::from_millis;
    let spec = SimSpec {
        seed: 1,
        duration_ms: 10_000,
        ..SimSpec::default()
    };
    simulate(&spec, move |world| {
        world.add_node("zk", Role::Server, move |ctx| async move {
            let env = |leader: bool| Env {
                ctx: &ctx,
                leader,
                from: ctx.idx(),
                id: 1,
            };
            let (mut leader, mut follower) = (Tree::new(ms(300)), Tree::new(ms(300)));
            let open = || Cmd::CreateSession {
                session: 7,
                timeout_ms: 3_000,
            };
            leader.role_changed(&env(true));
            leader.apply(open(), &env(true));
            follower.apply(open(), &env(false));
            ctx.sleep_local(ms(3_400)).await; // past the expiry, before any tick
            let ping = follower.handle(Req::Ping { session: 7 }, &env(false));
            assert!(
                matches!(ping, Handling::Relay(Resp::Pong, _)),
                "a ping: {ping:?}"
            );
            let attach = Req::Attach { session: 7 };
            let at_follower = follower.handle(attach.clone(), &env(false));
            assert!(
                matches!(at_follower, Handling::Forward(Req::Attach { session: 7 })),
                "a follower forwards an attach, observed {at_follower:?}"
            );
            let Handling::Read(req) = leader.handle(attach, &env(true)) else {
                panic!("the leader reads an attach after ReadIndex");
            };
            assert_eq!(leader.read(req, &env(true)), Resp::Expired);
        });
    })
    .expect("the run");
}
