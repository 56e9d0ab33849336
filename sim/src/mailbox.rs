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
