//! An unbounded channel for the messages of one run: a queue and the receiver's waker.
//!
//! Every message of a run passes through one or more channels (the courier to a node's inbox,
//! an endpoint's pump to its request stream, a Raft peer's inputs). `futures`' unbounded mpsc
//! allocates a queue node for each message and pays for atomics a run on one thread does not
//! need; this one keeps a `VecDeque` that reuses its buffer.
//!
//! It wakes exactly when `futures`' mpsc wakes (what the schedule of a run, and so its trace
//! hash, depends on): a send wakes the waker the receiver last registered, if that waker has
//! not been woken yet, and so does the drop of the last sender; a receiver registers its
//! waker only when it finds the queue empty, and keeps it registered when the future that
//! polled it is dropped (a receive that timed out is woken by the next send all the same),
//! even after the receiver itself is dropped.

use futures::Stream;
use std::collections::VecDeque;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};

struct State<T> {
    queue: VecDeque<T>,
    /// The waker of the receiver's last poll that found the queue empty, until woken.
    waker: Option<Waker>,
    /// The receiver is gone, or every sender is.
    closed: bool,
    senders: usize,
}

/// The sending half. Cheap to clone.
pub struct Sender<T> {
    state: Arc<Mutex<State<T>>>,
}

/// The receiving half: a [`Stream`] of the messages, in send order; it ends once every sender
/// is dropped and the queue is empty.
pub struct Receiver<T> {
    state: Arc<Mutex<State<T>>>,
}

/// A new channel.
pub fn channel<T>() -> (Sender<T>, Receiver<T>) {
    let state = Arc::new(Mutex::new(State {
        queue: VecDeque::new(),
        waker: None,
        closed: false,
        senders: 1,
    }));
    let receiver = Receiver {
        state: state.clone(),
    };
    (Sender { state }, receiver)
}

fn lock<T>(state: &Mutex<State<T>>) -> MutexGuard<'_, State<T>> {
    state.lock().expect("mailbox lock poisoned")
}

impl<T> Sender<T> {
    /// Queues `msg`; gives it back if the receiver is gone.
    pub fn send(&self, msg: T) -> Result<(), T> {
        let waker = {
            let mut state = lock(&self.state);
            if state.closed {
                return Err(msg);
            }
            state.queue.push_back(msg);
            state.waker.take()
        };
        // Woken outside the lock: the executor may poll the receiver at once.
        if let Some(waker) = waker {
            waker.wake();
        }
        Ok(())
    }
}

impl<T> Clone for Sender<T> {
    fn clone(&self) -> Self {
        lock(&self.state).senders += 1;
        Sender {
            state: self.state.clone(),
        }
    }
}

impl<T> Drop for Sender<T> {
    fn drop(&mut self) {
        let waker = {
            let mut state = lock(&self.state);
            assert!(state.senders > 0, "every sender is counted");
            state.senders -= 1;
            if state.senders > 0 {
                return;
            }
            state.closed = true;
            state.waker.take()
        };
        if let Some(waker) = waker {
            waker.wake();
        }
    }
}

impl<T> Receiver<T> {
    /// The next message already queued, without waiting (`None` if there is none).
    pub fn try_recv(&mut self) -> Option<T> {
        lock(&self.state).queue.pop_front()
    }
}

impl<T> Stream for Receiver<T> {
    type Item = T;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<T>> {
        let mut state = lock(&self.state);
        if let Some(msg) = state.queue.pop_front() {
            return Poll::Ready(Some(msg));
        }
        if state.closed {
            return Poll::Ready(None);
        }
        match &mut state.waker {
            Some(waker) if waker.will_wake(cx.waker()) => {}
            slot => *slot = Some(cx.waker().clone()),
        }
        Poll::Pending
    }
}

impl<T> Drop for Receiver<T> {
    fn drop(&mut self) {
        // The waker stays registered, as in `futures`: the last sender's drop still wakes it.
        let dropped = {
            let mut state = lock(&self.state);
            state.closed = true;
            std::mem::take(&mut state.queue)
        };
        // The messages are dropped outside the lock: dropping one may send on another channel.
        drop(dropped);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::task::{waker, ArcWake};
    use futures::StreamExt;
    use std::sync::atomic::{AtomicUsize, Ordering};

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
}
