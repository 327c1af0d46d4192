//! An agent attempt's program: the CLI found, its Work's home for it, the prompt (or, after a
//! wait, the resumption of its own session), the playbook as its instructions, and where its
//! transcript goes.

use std::path::Path;

use conduit_config::{Agent, AgentConfig};
use conduit_core::artifact::TRANSCRIPT_INDEX;
use conduit_core::execution::{session_to_resume, SegmentEnd};
use conduit_core::prompt::{render, PromptVars, RESUME};
use conduit_core::{Event, Execution, Work};
use serde_json::Value;

use super::launch::Program;
use super::Runtime;
use crate::executor::agent::{self, AgentLaunch};
use crate::executor::rundir::RunDir;
use crate::executor::shell::append_log;
use crate::state::{create_private_dir, write_private_file};

/// What the store says about the attempt's Work: the Work, the event the attempt continues from,
/// and every attempt so far.
type Context = (Work, Option<Event>, Vec<Execution>);

impl Runtime {
    pub(super) async fn agent_program(
        &self,
        x: &Execution,
        run: &RunDir,
        agent: Agent,
        config: &AgentConfig,
    ) -> Result<Program, SegmentEnd> {
        let log = self.files.log(&x.id);
        let daemon_path = std::env::var("PATH").unwrap_or_default();
        let program = agent::find_program(agent, config, &daemon_path).map_err(|why| {
            append_log(
                &log,
                &format!("open-conduit: executor_unavailable: {why}; the process was not started"),
            );
            SegmentEnd::FailedToStart(Some(rustix::io::Errno::NOENT.raw_os_error()))
        })?;
        let not_started = |what: &str| {
            append_log(
                &log,
                &format!("open-conduit: could not prepare {what}; the process was not started"),
            );
            SegmentEnd::FailedToStart(None)
        };
        let transcript = self.files.declared_file(&x.id, TRANSCRIPT_INDEX);
        let home = self.create_in_work_root(&x.work_id, "home");
        let transcripts = create_private_dir(transcript.parent().unwrap_or(Path::new("/")));
        let (Ok(home), Ok(())) = (home, transcripts) else {
            return Err(not_started("the agent's home and transcript"));
        };
        let (work, event, attempts) = self.context_of(x).await.ok_or_else(|| not_started("the prompt"))?;
        let resume = session_to_resume(&attempts, &x.id);
        let null = Value::Null;
        let vars = PromptVars {
            input: if resume.is_some() { &null } else { &work.input },
            work_id: &work.id,
            scope: &work.scope,
            binding: &work.binding,
            event_type: event.as_ref().map_or("", |e| e.event_type.as_str()),
            event_data: event.as_ref().map_or(&null, |e| &e.data),
        };
        let prompt = render(if resume.is_some() { RESUME } else { &config.prompt }, &vars);
        let instructions = self.pinned_playbook(x).await;
        let argv = agent::argv(&AgentLaunch {
            agent,
            config,
            program: &program,
            os: &self.os_dir.join("os"),
            endpoint: &run.socket,
            token_file: &run.token_file,
            playbook_dir: &self.playbook_dir,
            instructions: instructions.as_deref(),
            resume,
        });
        let mut defaults: Vec<(String, String)> = agent::environment(agent)
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        defaults.push(("HOME".to_owned(), home.to_string_lossy().into_owned()));
        // On stdin, not in argv: an argument is readable by every process (`/proc/<pid>/cmdline`)
        // and limited to 128 KiB.
        let prompt_file = run.dir.join("prompt");
        write_private_file(&prompt_file, prompt.as_bytes()).map_err(|_| not_started("the prompt"))?;
        Ok(Program {
            argv,
            defaults,
            home: Some(home),
            stdin: Some(prompt_file),
            transcript: Some(transcript),
        })
    }

    /// The text of the playbook the attempt's binding names, in the generation it pinned.
    async fn pinned_playbook(&self, x: &Execution) -> Option<String> {
        let (configs, x, playbooks) = (self.configs.clone(), x.clone(), self.playbook_dir.clone());
        let read = move || {
            let pinned = configs.generation(x.generation)?;
            let name = pinned.binding(&x.scope, &x.binding)?.playbook.clone()?;
            crate::playbooks::text(&playbooks, &name)
        };
        tokio::task::spawn_blocking(read).await.ok().flatten()
    }

    async fn context_of(&self, x: &Execution) -> Option<Context> {
        let x = x.clone();
        let read = move |s: &dyn conduit_store::Store| -> Result<Option<Context>, conduit_scheduler::HostError> {
            Ok(s.read(|tx| -> Result<Option<Context>, conduit_store::StoreError> {
                let Some(work) = tx.get_work(&x.work_id)? else {
                    return Ok(None);
                };
                let event = tx.get_event(&x.cause_event)?;
                Ok(Some((work, event, tx.executions_of_work(&x.work_id)?)))
            })?)
        };
        self.db(read).await.ok().flatten()
    }
}
