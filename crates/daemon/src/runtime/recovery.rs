//! Attempts another daemon left: adopted when this daemon restarts on its state directory, or taken
//! over once their daemon, on a shared store, let their leases lapse.

use conduit_core::execution::SegmentEnd;
use conduit_core::{Execution, ExecutionState};
use conduit_scheduler::{adopt, adopts_on_start, close_unpaired_calls, record_pid, take_over, Claim, HostError};
use conduit_server::now;

use super::launch::Workdir;
use super::{Process, Runtime};
use crate::executor::rundir::{remove_stale_runs, RunDir};
use crate::executor::shell::is_alive;

impl Runtime {
    /// Adopts every attempt an earlier run of this daemon left running: a live process gets the
    /// next epoch, a rotated token and its socket served again; a vanished one is completed as
    /// lost. Then removes every run directory that no live attempt owns.
    pub async fn recover(&self) -> Result<(), HostError> {
        let mut running = self
            .db(|s| Ok(s.read(|tx| tx.executions_in_state(ExecutionState::Running))?))
            .await?;
        running.retain(|x| adopts_on_start(&x.owner, &self.lessee.owner, self.shared_store));
        let mut live = Vec::new();
        for x in running {
            // Nothing the dead daemon's handlers were running can answer now.
            let execution = x.clone();
            let paired = self
                .db(move |s| s.write(|tx| close_unpaired_calls(tx, &execution, now())))
                .await?;
            if paired > 0 {
                tracing::warn!(execution = %x.id, calls = paired, "calls in flight at a crash were recorded lost");
            }
            let pid = x.pid.or_else(|| RunDir::noted_pid(&self.runs_dir, &x.id));
            match pid.filter(|pid| is_alive(*pid)) {
                Some(pid) => {
                    if x.pid.is_none() {
                        // Found by its note: the daemon that spawned it died before the store had it.
                        let id = x.id.clone();
                        self.db(move |s| s.write(|tx| record_pid(tx, &id, pid))).await?;
                    }
                    if let Some((claim, token)) = self.adopt(&x.id).await? {
                        tracing::info!(execution = %x.id, epoch = claim.execution.epoch, "adopted a running attempt");
                        live.push(x.id.clone());
                        tokio::spawn(self.clone().supervise(claim.execution, token, Process::Adopted(pid)));
                    }
                }
                None => {
                    let executable = self.pinned_executable(&x).await;
                    let workdir = Workdir::of(executable.as_ref(), &self.work_root(&x.work_id)).path();
                    let workdir = workdir.unwrap_or_else(|| RunDir::workdir_of(&self.runs_dir, &x.id));
                    self.settle(&x.id, SegmentEnd::Lost, Some(workdir)).await?;
                }
            }
        }
        remove_stale_runs(&self.runs_dir, &live);
        self.remove_finished_work_dirs(None).await;
        Ok(())
    }

    async fn adopt(&self, execution_id: &str) -> Result<Option<(Claim, String)>, HostError> {
        let (lessee, id) = (self.lessee.clone(), execution_id.to_owned());
        self.leased(move |tx, _, at| adopt(tx, &id, &lessee, at)).await
    }

    /// Takes over every running attempt whose daemon let its lease lapse: ended abandoned, its
    /// token revoked, its Work ready for the next epoch (which this tick's claims may take).
    pub(super) async fn take_over_abandoned(&self, running: &[Execution]) -> Result<(), HostError> {
        if !self.shared_store {
            return Ok(());
        }
        let at = now();
        for x in running.iter().filter(|x| x.abandoned_for(&self.lessee.owner, at)) {
            let (id, instance) = (x.id.clone(), self.lessee.owner.clone());
            let retry = self.config.get().retry(&x.scope, &x.binding);
            let taken = self
                .db(move |s| s.write(|tx| take_over(tx, &id, &instance, retry, now())))
                .await?;
            if taken.is_some() {
                tracing::warn!(execution = %x.id, work = %x.work_id, owner = %x.owner, "took over an attempt whose daemon stopped renewing its lease");
            }
        }
        Ok(())
    }
}
