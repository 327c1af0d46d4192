//! How async code runs blocking store work without holding up the runtime's other tasks.
//!
//! On a multi-thread runtime the work runs in place ([`tokio::task::block_in_place`]): the worker
//! first hands its other tasks to another thread, then blocks, so the runtime keeps serving while
//! the call crosses no thread. Handing the work to a blocking thread and back (`spawn_blocking`)
//! costs two wakeups, each a context switch: on the toolbelt bench that crossing alone was 2.0-2.8x
//! the bare echo, where in place it is 1.0x (docs/performance.md). On a current-thread runtime,
//! where blocking in place would stall every task, the work goes to a blocking thread.

use std::panic::{catch_unwind, AssertUnwindSafe};

use tokio::runtime::{Handle, RuntimeFlavor};

/// The work panicked; what it held is gone, and the caller answers a backend failure.
#[derive(Debug)]
pub struct Panicked;

/// Runs blocking `work` off the runtime's hands and returns what it returns.
pub async fn off_runtime<T: Send + 'static>(work: impl FnOnce() -> T + Send + 'static) -> Result<T, Panicked> {
    if can_block_in_place() {
        return catch_unwind(AssertUnwindSafe(|| tokio::task::block_in_place(work))).map_err(|_| Panicked);
    }
    tokio::task::spawn_blocking(work).await.map_err(|_| Panicked)
}

fn can_block_in_place() -> bool {
    Handle::try_current().is_ok_and(|h| h.runtime_flavor() == RuntimeFlavor::MultiThread)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn runtime(multi: bool, workers: usize) -> tokio::runtime::Runtime {
        let mut builder = match multi {
            true => tokio::runtime::Builder::new_multi_thread(),
            false => tokio::runtime::Builder::new_current_thread(),
        };
        builder.worker_threads(workers).build().expect("a runtime")
    }

    #[test]
    fn work_runs_in_place_on_a_multi_thread_worker_and_on_a_blocking_thread_otherwise() {
        for (multi, in_place) in [(true, true), (false, false)] {
            let ran_on_the_callers_thread = runtime(multi, 2).block_on(async {
                let caller = std::thread::current().id();
                off_runtime(move || std::thread::current().id() == caller)
                    .await
                    .expect("ran")
            });
            assert_eq!(ran_on_the_callers_thread, in_place, "multi-thread: {multi}");
        }
    }

    /// One worker: were it blocked with its tasks, the task that releases the work could not run,
    /// and the work would give up waiting.
    #[test]
    fn the_runtime_keeps_serving_while_work_blocks_in_place() {
        runtime(true, 1).block_on(async {
            let (started, has_started) = tokio::sync::oneshot::channel::<()>();
            let (release, released) = std::sync::mpsc::channel::<()>();
            let blocked = tokio::spawn(off_runtime(move || {
                started.send(()).expect("told");
                released.recv_timeout(Duration::from_secs(10))
            }));
            tokio::spawn(async move {
                has_started.await.expect("the work started");
                release.send(()).expect("released");
            });
            let waited = blocked.await.expect("joined").expect("did not panic");
            assert!(waited.is_ok(), "the releasing task did not run while the work blocked");
        });
    }

    #[test]
    fn a_panic_in_the_work_is_panicked_on_either_runtime() {
        for multi in [true, false] {
            let outcome =
                runtime(multi, 2).block_on(async { tokio::spawn(off_runtime(|| panic!("a broken rule"))).await });
            assert!(matches!(outcome, Ok(Err(Panicked))), "multi-thread: {multi}");
        }
    }
}
