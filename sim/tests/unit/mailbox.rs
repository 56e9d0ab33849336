//! The tests of `src/mailbox.rs`.

use futures::task::{waker, ArcWake};
use futures::StreamExt;
use locksim_sim::mailbox::*;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};

#[derive(Default)]
struct Count(AtomicUsize);

impl ArcWake for Count {
    fn wake_by_ref(this: &Arc<Self>) {
        this.0.fetch_add(1, Ordering::SeqCst);
    }
}

fn poll<T>(rx: &mut Receiver<T>, wakes: &Arc<Count>) -> Poll<Option<T>> {
    let waker = waker(wakes.clone());
    rx.poll_next_unpin(&mut Context::from_waker(&waker))
}

fn woken(wakes: &Arc<Count>) -> usize {
    wakes.0.load(Ordering::SeqCst)
}

/// A send wakes a receiver that found the queue empty, once; sends before it polls
/// again do not wake it again; a receiver that found a message registered nothing.
#[test]
fn a_send_wakes_only_a_waiting_receiver_once() {
    let (tx, mut rx) = channel();
    let wakes = Arc::new(Count::default());
    tx.send(1).unwrap();
    assert_eq!(poll(&mut rx, &wakes), Poll::Ready(Some(1)));
    tx.send(2).unwrap();
    assert_eq!(woken(&wakes), 0, "nobody waited");
    assert_eq!(poll(&mut rx, &wakes), Poll::Ready(Some(2)));
    assert_eq!(poll(&mut rx, &wakes), Poll::Pending);
    tx.send(3).unwrap();
    tx.send(4).unwrap();
    assert_eq!(woken(&wakes), 1);
    assert_eq!(rx.try_recv(), Some(3));
    assert_eq!(poll(&mut rx, &wakes), Poll::Ready(Some(4)));
    assert_eq!(rx.try_recv(), None);
    assert_eq!(woken(&wakes), 1, "try_recv registers nothing");
}

/// The stream ends after the last sender's drop, once drained, and that drop wakes a
/// waiting receiver; a send to a dropped receiver comes back.
#[test]
fn the_last_sender_ends_the_stream_and_a_dropped_receiver_refuses() {
    let (tx, mut rx) = channel();
    let wakes = Arc::new(Count::default());
    let tx2 = tx.clone();
    assert_eq!(poll(&mut rx, &wakes), Poll::Pending);
    drop(tx);
    assert_eq!(woken(&wakes), 0, "a sender is left");
    tx2.send(7).unwrap();
    assert_eq!(woken(&wakes), 1);
    assert_eq!(poll(&mut rx, &wakes), Poll::Ready(Some(7)));
    assert_eq!(poll(&mut rx, &wakes), Poll::Pending);
    drop(tx2);
    assert_eq!(woken(&wakes), 2);
    assert_eq!(poll(&mut rx, &wakes), Poll::Ready(None));
    let (tx, rx) = channel();
    drop(rx);
    assert_eq!(tx.send(5), Err(5));
}
