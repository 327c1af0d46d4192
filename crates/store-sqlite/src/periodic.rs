//! A thread of the store's own that runs one task at a fixed interval until the store closes.

use std::sync::mpsc::{channel, RecvTimeoutError, Sender};
use std::thread::JoinHandle;
use std::time::Duration;

use crate::{Result, StoreError};

/// Runs its task every interval; dropping it stops the thread and waits for it.
pub struct Periodic {
    stop: Option<Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl Periodic {
    /// `name` is the thread's (Linux keeps 15 bytes of it; the benches find threads by it).
    pub fn start(name: &str, every: Duration, mut task: impl FnMut() + Send + 'static) -> Result<Periodic> {
        let (stop, stopped) = channel::<()>();
        let thread = std::thread::Builder::new()
            .name(name.into())
            .spawn(move || {
                while let Err(RecvTimeoutError::Timeout) = stopped.recv_timeout(every) {
                    task();
                }
            })
            .map_err(|e| StoreError::Backend(e.to_string()))?;
        Ok(Periodic {
            stop: Some(stop),
            thread: Some(thread),
        })
    }
}

impl Drop for Periodic {
    fn drop(&mut self) {
        drop(self.stop.take());
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}
