//! Ending an attempt: its declared files and transcript kept (with the agent's session and usage),
//! its segment completed under the binding's retry policy, its run directory removed, and the
//! directories of agent Works that finished.

use std::path::PathBuf;

use conduit_config::Executable;
use conduit_core::execution::SegmentEnd;
use conduit_core::retry::RetryPolicy;
use conduit_core::{ArtifactRecord, Execution, ExecutionState};
use conduit_scheduler::{complete, HostError};
use conduit_server::now;

use super::launch::WORK_MARKER;
use super::Runtime;
use crate::executor::agent::Summary;
use crate::executor::artifacts;
use crate::executor::rundir::RunDir;

impl Runtime {
    /// Completes the segment, then closes its endpoint and removes its run directory.
    pub(super) async fn finish(&self, execution_id: &str, end: SegmentEnd, run: Option<&RunDir>) {
        match self.settle(execution_id, end, run.map(|r| r.workdir.clone())).await {
            Ok(Some(x)) => {
                tracing::info!(execution = %x.id, state = x.state.as_str(), "attempt finished");
                self.remove_finished_work_dirs(Some(self.work_root(&x.work_id))).await;
            }
            Ok(None) => {}
            Err(e) => tracing::error!(execution = %execution_id, error = %e, "could not complete the attempt"),
        }
        if let Some(run) = run {
            run.remove();
        }
        self.kick.notify_one();
    }

    /// Keeps the files the segment's declaration (an outcome or a wait) names (while its working directory still
    /// exists) and records its transcript with the session and usage it reports, then completes
    /// the segment under its binding's current retry policy, all in one transaction.
    pub(super) async fn settle(
        &self,
        execution_id: &str,
        end: SegmentEnd,
        workdir: Option<PathBuf>,
    ) -> Result<Option<Execution>, HostError> {
        let kept = match workdir {
            Some(workdir) => self.keep_artifacts(execution_id, workdir).await?,
            None => Vec::new(),
        };
        let transcript = self.transcript(execution_id).await?;
        let (id, config) = (execution_id.to_owned(), self.config.get());
        self.db(move |s| {
            s.write(|tx| {
                let Some(mut x) = tx.get_execution(&id)? else {
                    return Ok(None);
                };
                // An attempt another daemon took over is that daemon's record now: nothing of this
                // segment is added to it (a cancelled one still keeps what it left).
                if !matches!(x.state, ExecutionState::Running | ExecutionState::Cancelled) {
                    return complete(tx, &id, end, RetryPolicy::default(), now());
                }
                for artifact in &kept {
                    tx.put_artifact(artifact)?;
                }
                if let Some((record, summary)) = &transcript {
                    tx.put_artifact(record)?;
                    (x.agent_session, x.agent_usage) = (summary.session.clone(), summary.usage.clone());
                    tx.update_execution(&x)?;
                }
                complete(tx, &id, end, config.retry(&x.scope, &x.binding), now())
            })
        })
        .await
    }

    /// An agent attempt's transcript record and what it says of the session and usage, read a
    /// line at a time (the binding's agent as the attempt pinned it).
    async fn transcript(&self, execution_id: &str) -> Result<Option<(ArtifactRecord, Summary)>, HostError> {
        let id = execution_id.to_owned();
        let Some(x) = self.db(move |s| Ok(s.read(|tx| tx.get_execution(&id))?)).await? else {
            return Ok(None);
        };
        let Some(Executable::Agent(agent, _)) = self.pinned_executable(&x).await else {
            return Ok(None);
        };
        let files = self.files.clone();
        let read = move || {
            let mut summary = Summary::default();
            let record = artifacts::transcript(&files, &x.id, now(), |line| summary.take(agent, line))?;
            Some((record, summary))
        };
        Ok(tokio::task::spawn_blocking(read).await.ok().flatten())
    }

    /// Removes the directories of agent Works that have finished (or are gone): `root` alone, or,
    /// with `None`, every one there is (the retention pass's sweep, which also catches Works
    /// cancelled while they waited). Each names its Work in its marker.
    pub(super) async fn remove_finished_work_dirs(&self, root: Option<PathBuf>) {
        let works_dir = self.works_dir.clone();
        let roots = move || match root {
            Some(root) => vec![root],
            None => std::fs::read_dir(works_dir)
                .into_iter()
                .flatten()
                .flatten()
                .map(|e| e.path())
                .collect(),
        };
        let roots = tokio::task::spawn_blocking(roots).await.unwrap_or_default();
        for root in roots {
            let Ok(work_id) = std::fs::read_to_string(root.join(WORK_MARKER)) else {
                continue;
            };
            let finished = self
                .db(move |s| Ok(s.read(|tx| tx.get_work(&work_id))?))
                .await
                .map(|w| w.is_none_or(|w| w.state.is_terminal()));
            if let Ok(true) = finished {
                let _ = tokio::task::spawn_blocking(move || std::fs::remove_dir_all(root)).await;
            }
        }
    }

    pub(super) async fn keep_artifacts(
        &self,
        execution_id: &str,
        workdir: PathBuf,
    ) -> Result<Vec<ArtifactRecord>, HostError> {
        let id = execution_id.to_owned();
        let execution = self.db(move |s| Ok(s.read(|tx| tx.get_execution(&id))?)).await?;
        let names = match execution.and_then(|x| x.declaration) {
            Some(declaration) if !declaration.artifacts().is_empty() => declaration.artifacts().to_vec(),
            _ => return Ok(Vec::new()),
        };
        let (files, id, hidden) = (self.files.clone(), execution_id.to_owned(), self.hidden.clone());
        let keep = move || {
            let hidden: Vec<PathBuf> = std::iter::once(&hidden.state_dir)
                .chain(&hidden.private_files)
                .map(|p| p.canonicalize().unwrap_or_else(|_| p.clone()))
                .collect();
            artifacts::keep(&workdir, &hidden, &files, &id, &names, now())
        };
        Ok(tokio::task::spawn_blocking(keep).await.unwrap_or_default())
    }
}
