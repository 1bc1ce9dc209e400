//! What more than one of relent-embassy's test binaries needs: tasks of one executor inside a
//! single future, each polled only when its own waker was woken, so that a wake-up the code under
//! test fails to make is not made up for by another task's.

use core::future::Future;
use core::pin::Pin;
use core::task::Poll;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Wake, Waker};

/// A task's waker: marks the task to be polled, and wakes the executor (the joined future).
pub(crate) struct Task {
    woken: AtomicBool,
    executor: Mutex<Option<Waker>>,
}

impl Wake for Task {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }
    fn wake_by_ref(self: &Arc<Self>) {
        self.woken.store(true, Ordering::SeqCst);
        if let Some(executor) = self.executor.lock().unwrap().as_ref() {
            executor.wake_by_ref();
        }
    }
}

impl Task {
    /// A task to be polled first.
    pub(crate) fn new() -> Arc<Self> {
        Arc::new(Self { woken: AtomicBool::new(true), executor: Mutex::new(None) })
    }

    /// Polls `future` with this task's own waker if the task was woken (or never polled), and
    /// gives its output once it is ready; `executor` is the joined future's waker, which the
    /// task's wakes.
    pub(crate) fn step<F: Future + ?Sized>(
        self: &Arc<Self>,
        future: Pin<&mut F>,
        executor: &Waker,
    ) -> Option<F::Output> {
        *self.executor.lock().unwrap() = Some(executor.clone());
        if !self.woken.swap(false, Ordering::SeqCst) {
            return None;
        }
        match future.poll(&mut Context::from_waker(&Waker::from(self.clone()))) {
            Poll::Ready(v) => Some(v),
            Poll::Pending => None,
        }
    }
}
