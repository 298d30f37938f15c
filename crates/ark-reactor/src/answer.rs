//! [`Answer`]: a value another thread will give once, waited for on a thread or awaited in
//! async code (any runtime) — ark's "answer later" types (`Stopping`, ark-http's `Pending`)
//! are built on it.

use std::collections::VecDeque;
use std::fmt;
use std::future::{Future, IntoFuture};
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll, Wake, Waker};

/// The answerer went away without answering (its thread ended, or it was dropped).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the answer was dropped before it was given")]
pub struct AnswerDropped;

/// A pair: [`Answerer`] gives the value once, from any thread; [`Answer`] receives it.
///
/// ```
/// let (answerer, answer) = ark_reactor::answer();
/// std::thread::spawn(move || answerer.give(42));
/// assert_eq!(answer.wait(), Ok(42));
///
/// // In async code (any executor): `answer.await`.
/// let (answerer, answer) = ark_reactor::answer::<u8>();
/// drop(answerer);
/// assert_eq!(answer.wait(), Err(ark_reactor::AnswerDropped));
/// ```
pub fn answer<T>() -> (Answerer<T>, Answer<T>) {
    let (tx, rx) = oneshot::channel();
    (Answerer(tx), Answer(State::Ready(rx)))
}

/// Gives an [`Answer`] its value (once). Dropping it unanswered gives [`AnswerDropped`].
pub struct Answerer<T>(oneshot::Sender<T>);

impl<T> fmt::Debug for Answerer<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Answerer").finish_non_exhaustive()
    }
}

impl<T> Answerer<T> {
    /// Gives the value; `false` if the answer was dropped (nobody waits for it).
    pub fn give(self, value: T) -> bool {
        self.0.send(value).is_ok()
    }

    /// Whether the answer was dropped: giving would be in vain.
    pub fn is_abandoned(&self) -> bool {
        self.0.is_closed()
    }
}

/// A value to come: [`wait`](Self::wait) on a thread, [`try_take`](Self::try_take) without
/// waiting, or `.await` it (it is a [`Future`], woken by the answerer's thread; no runtime is
/// needed or assumed).
pub struct Answer<T>(State<T>);

enum State<T> {
    /// Not polled as a future yet: a thread may block on it.
    Ready(oneshot::Receiver<T>),
    /// Polled at least once: the receiver's future form.
    Polled(oneshot::AsyncReceiver<T>),
    /// The value was taken.
    Taken,
}

impl<T> fmt::Debug for Answer<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = match self.0 {
            State::Ready(_) | State::Polled(_) => "waiting",
            State::Taken => "taken",
        };
        f.debug_tuple("Answer").field(&state).finish()
    }
}

impl<T> Answer<T> {
    /// Blocks the calling thread until the value comes.
    ///
    /// # Errors
    /// [`AnswerDropped`]: the answerer went away first, or the value was taken already.
    pub fn wait(mut self) -> Result<T, AnswerDropped> {
        match std::mem::replace(&mut self.0, State::Taken) {
            State::Ready(rx) => rx.recv().map_err(|_| AnswerDropped),
            State::Polled(mut fut) => block_on(Pin::new(&mut fut)).map_err(|_| AnswerDropped),
            State::Taken => Err(AnswerDropped),
        }
    }

    /// The value if it is here (`None`: still to come). After `Some`, the answer is spent.
    pub fn try_take(&mut self) -> Option<Result<T, AnswerDropped>> {
        let taken = match &mut self.0 {
            State::Ready(rx) => match rx.try_recv() {
                Ok(value) => Ok(value),
                Err(oneshot::TryRecvError::Empty) => return None,
                Err(oneshot::TryRecvError::Disconnected) => Err(AnswerDropped),
            },
            State::Polled(fut) => {
                match Pin::new(fut).poll(&mut Context::from_waker(Waker::noop())) {
                    Poll::Ready(result) => result.map_err(|_| AnswerDropped),
                    Poll::Pending => return None,
                }
            }
            State::Taken => Err(AnswerDropped),
        };
        self.0 = State::Taken;
        Some(taken)
    }
}

impl<T> Future for Answer<T> {
    type Output = Result<T, AnswerDropped>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = &mut self.0;
        if let State::Ready(_) = this {
            let State::Ready(rx) = std::mem::replace(this, State::Taken) else {
                unreachable!("matched above")
            };
            *this = State::Polled(rx.into_future());
        }
        let State::Polled(fut) = this else {
            return Poll::Ready(Err(AnswerDropped));
        };
        let result = std::task::ready!(Pin::new(fut).poll(cx));
        *this = State::Taken;
        Poll::Ready(result.map_err(|_| AnswerDropped))
    }
}

/// Replies matched to requests in order, for a protocol whose peer answers requests in the
/// order they came (a request/reply protocol over one TCP or WebSocket session, HTTP/1.1
/// pipelining): [`request`](Self::request) sends under the queue's lock, so that the order of
/// the answers waiting is the order on the wire; the session's handler gives each reply to the
/// oldest with [`reply`](Self::reply). Share it (`Arc`) between the senders and the handler;
/// nothing else pays for it.
///
/// ```
/// use std::sync::Arc;
/// use ark_reactor::Replies;
///
/// let replies = Arc::new(Replies::<String>::default());
/// let mut wire = Vec::new(); // stands in for a session handle's `send`
/// let first = replies.request(|| Ok::<_, ()>(wire.push("ping 1")))?;
/// let second = replies.request(|| Ok::<_, ()>(wire.push("ping 2")))?;
/// // The session's handler, as the peer's replies arrive in order:
/// assert!(replies.reply("pong 1".to_string()));
/// assert!(replies.reply("pong 2".to_string()));
/// assert_eq!(first.wait().unwrap(), "pong 1");
/// assert_eq!(second.wait().unwrap(), "pong 2");
/// assert!(!replies.reply("unasked".to_string()), "no request waits");
/// # Ok::<(), ()>(())
/// ```
pub struct Replies<T> {
    waiting: Mutex<VecDeque<Answerer<T>>>,
}

impl<T> Default for Replies<T> {
    fn default() -> Self {
        Replies {
            waiting: Mutex::new(VecDeque::new()),
        }
    }
}

impl<T> fmt::Debug for Replies<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Replies")
            .field("waiting", &self.waiting())
            .finish()
    }
}

impl<T> Replies<T> {
    fn lock(&self) -> std::sync::MutexGuard<'_, VecDeque<Answerer<T>>> {
        self.waiting.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Sends a request with `send` (a session handle's `send`) and returns the answer its
    /// reply will go to. `send` runs under the queue's lock: keep it short, and do not call
    /// this from inside `send`.
    ///
    /// # Errors
    /// `send`'s error: nothing was queued, and no answer waits.
    pub fn request<E>(&self, send: impl FnOnce() -> Result<(), E>) -> Result<Answer<T>, E> {
        let mut waiting = self.lock();
        send()?;
        let (answerer, answer) = answer();
        waiting.push_back(answerer);
        Ok(answer)
    }

    /// Gives `reply` to the oldest request waiting; `false` if none waits (a reply nobody
    /// asked for: a protocol error of the peer's). A request whose answer was dropped (a
    /// caller that gave up) still takes its own reply, which is then discarded: the replies
    /// after it stay matched to their requests.
    pub fn reply(&self, reply: T) -> bool {
        let Some(answerer) = self.lock().pop_front() else {
            return false;
        };
        answerer.give(reply);
        true
    }

    /// Ends every request waiting: each answer gets [`AnswerDropped`] (the session closed).
    pub fn fail_all(&self) {
        self.lock().clear();
    }

    /// Requests waiting for their replies.
    pub fn waiting(&self) -> usize {
        self.lock().len()
    }
}

/// Wakes a parked thread.
struct Unpark(std::thread::Thread);

impl Wake for Unpark {
    fn wake(self: Arc<Self>) {
        self.0.unpark();
    }
}

/// Polls `future` on this thread, parked between wakes, until it is ready.
fn block_on<F: Future + Unpin>(mut future: F) -> F::Output {
    let waker = Waker::from(Arc::new(Unpark(std::thread::current())));
    let mut cx = Context::from_waker(&waker);
    loop {
        if let Poll::Ready(output) = Pin::new(&mut future).poll(&mut cx) {
            return output;
        }
        std::thread::park();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn replies_go_to_requests_in_order_a_dropped_answer_taking_its_own_and_fail_on_close() {
        let replies = Replies::<u32>::default();
        let refused = replies.request(|| Err("queue full"));
        assert_eq!(refused.unwrap_err(), "queue full");
        assert_eq!(replies.waiting(), 0, "a refused send leaves no answer");
        let first = replies.request(|| Ok::<_, ()>(())).unwrap();
        let given_up = replies.request(|| Ok::<_, ()>(())).unwrap();
        let third = replies.request(|| Ok::<_, ()>(())).unwrap();
        assert!(replies.reply(1));
        drop(given_up);
        assert!(replies.reply(2), "the dropped answer's reply, discarded");
        assert!(replies.reply(3));
        assert_eq!((first.wait(), third.wait()), (Ok(1), Ok(3)));
        let last = replies.request(|| Ok::<_, ()>(())).unwrap();
        replies.fail_all();
        assert_eq!(last.wait(), Err(AnswerDropped));
        assert!(!replies.reply(4));
    }

    #[test]
    fn a_thread_waits_a_poller_is_woken_and_try_take_sees_both() {
        let (answerer, mut pending) = answer::<u32>();
        assert_eq!(pending.try_take(), None);
        let giver = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(20));
            answerer.give(7)
        });
        assert_eq!(pending.wait(), Ok(7));
        assert!(giver.join().unwrap());

        // Polled once (pending), then waited on by a thread: the future form blocks.
        let (answerer, mut pending) = answer::<u32>();
        let polled = Pin::new(&mut pending).poll(&mut Context::from_waker(Waker::noop()));
        assert!(polled.is_pending());
        assert_eq!(pending.try_take(), None);
        std::thread::spawn(move || answerer.give(9));
        assert_eq!(pending.wait(), Ok(9));
    }

    #[test]
    fn a_dropped_answerer_is_an_error_and_an_abandoned_answer_is_seen() {
        let (answerer, mut pending) = answer::<u32>();
        drop(answerer);
        assert_eq!(pending.try_take(), Some(Err(AnswerDropped)));
        assert_eq!(pending.try_take(), Some(Err(AnswerDropped)), "spent");
        let (answerer, pending) = answer::<u32>();
        drop(pending);
        assert!(answerer.is_abandoned());
        assert!(!answerer.give(1));
        let (_answerer, pending) = answer::<u32>();
        drop(_answerer);
        assert_eq!(block_on(pending), Err(AnswerDropped));
    }
}
