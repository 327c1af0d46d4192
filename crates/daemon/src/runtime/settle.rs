//! Ending an attempt: its declared files and transcript kept (with the agent's session and usage),
//! its segment completed under the binding's retry policy, its run directory removed.

use std::path::PathBuf;

use conduit_config::Executable;
use conduit_core::execution::SegmentEnd;
use conduit_core::{ArtifactRecord, Declaration, Execution};
use conduit_scheduler::{complete, HostError};
use conduit_server::now;

use super::Runtime;
use crate::executor::rundir::RunDir;
use crate::executor::{agent, artifacts};

impl Runtime {
    /// Completes the segment, then closes its endpoint and removes its run directory.
    pub(super) async fn finish(&self, execution_id: &str, end: SegmentEnd, run: Option<&RunDir>) {
        match self.settle(execution_id, end, run.map(|r| r.workdir.clone())).await {
            Ok(Some(x)) => {
                tracing::info!(execution = %x.id, state = x.state.as_str(), "attempt finished");
                self.remove_finished_work_dirs(Some(&x.work_id)).await;
            }
            Ok(None) => {}
            Err(e) => tracing::error!(execution = %execution_id, error = %e, "could not complete the attempt"),
        }
        if let Some(run) = run {
            run.remove();
        }
        self.kick.notify_one();
    }

    /// Keeps the files the segment's declared outcome names (while its working directory still
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
        let (files, id) = (self.files.clone(), execution_id.to_owned());
        let transcript = tokio::task::spawn_blocking(move || artifacts::transcript(&files, &id, now()))
            .await
            .ok()
            .flatten();
        let (id, config) = (execution_id.to_owned(), self.config.get());
        self.db(move |s| {
            s.write(|tx| {
                for artifact in &kept {
                    tx.put_artifact(artifact)?;
                }
                let Some(mut x) = tx.get_execution(&id)? else {
                    return Ok(None);
                };
                if let Some((record, text)) = &transcript {
                    tx.put_artifact(record)?;
                    if let Some(Executable::Agent(agent, _)) = config.executable(&x.scope, &x.binding) {
                        let summary = agent::summarize(agent, text);
                        (x.agent_session, x.usage) = (summary.session, summary.usage);
                        tx.update_execution(&x)?;
                    }
                }
                complete(tx, &id, end, config.retry(&x.scope, &x.binding), now())
            })
        })
        .await
    }

    /// Removes the working directories of agent Works that have finished (or are gone): of
    /// `work` alone, or, with `None`, of every Work that has one (the retention pass's sweep, which
    /// also catches Works cancelled while they waited).
    pub(super) async fn remove_finished_work_dirs(&self, work: Option<&str>) {
        let names: Vec<String> = match work {
            Some(id) => vec![id.to_owned()],
            None => std::fs::read_dir(&self.works_dir)
                .into_iter()
                .flatten()
                .flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect(),
        };
        for name in names {
            let Some(dir) = self.work_dir(&name).filter(|dir| dir.exists()) else {
                continue;
            };
            let id = name.clone();
            let unfinished = self
                .db(move |s| Ok(s.read(|tx| tx.get_work(&id))?))
                .await
                .map(|w| w.is_some_and(|w| !w.state.is_terminal()));
            if let Ok(false) = unfinished {
                let _ = std::fs::remove_dir_all(&dir);
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
        let Some(Declaration::Outcome { artifacts: names, .. }) = execution.and_then(|x| x.declaration) else {
            return Ok(Vec::new());
        };
        let (files, id) = (self.files.clone(), execution_id.to_owned());
        let keep = move || artifacts::keep(&workdir, &files, &id, &names, now());
        Ok(tokio::task::spawn_blocking(keep).await.unwrap_or_default())
    }
}
