//! The daemon's moving parts: the scheduler loop, each attempt's supervision, and recovery.

mod agent;
mod launch;
mod recovery;
mod settle;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration as StdDuration;

use crate::secrets::{Resolver, Unresolved};
use conduit_config::{CurrentConfig, Executable, Snapshot};
use conduit_core::artifact::TRANSCRIPT_INDEX;
use conduit_core::execution::SegmentEnd;
use conduit_core::{Duration, Execution, ExecutionState, Timestamp};
use conduit_scheduler::{
    claim_next, fire_due_timers, first_to_start, record_pid, renew_lease, settle_unstarted, Claim, HostError, Lessee,
};
use conduit_server::{
    bind_owner_only, execution_router, now, serve, ArtifactFiles, ConnectionLimits, ExecutionSocket, SharedConnections,
    IDEMPOTENCY_KEPT,
};
use conduit_store::{Store, Tx};
use conduit_toolbelt::gate::{decide_start, StartCall, Verdict};
use conduit_toolbelt::sweep::sweep;
use conduit_toolbelt::{token, Generations, Toolbelt};
use tokio::sync::{watch, Notify};

use crate::config_service::ConfigService;
use crate::confine;
use crate::executor::rundir::RunDir;
use crate::executor::shell::{self, is_alive, kill_group};
use crate::failpoint::{failpoint, pausepoint};
use crate::store_thread::on_store_thread;
use launch::Workdir;

/// How often the loop looks for due timers and ready Work when nothing wakes it sooner.
const IDLE_TICK: StdDuration = StdDuration::from_millis(500);

/// A supervised attempt's execution id, with the signal that stops it.
type Supervised = (String, Arc<Notify>);

/// How often the retention pass runs.
const SWEEP_EVERY: StdDuration = StdDuration::from_secs(3600);
/// How often an attempt's output is measured against `limits.attempt_output_bytes`.
const OUTPUT_CHECK: StdDuration = StdDuration::from_secs(1);
/// How often an adopted process (not our child) is checked for exit.
const ADOPTED_POLL: StdDuration = StdDuration::from_millis(200);

/// Everything the loop and the attempts share.
#[derive(Clone)]
pub struct Runtime {
    pub store: Arc<dyn Store>,
    pub config: CurrentConfig,
    /// Committed generations, for what each attempt pinned.
    pub configs: Arc<ConfigService>,
    pub resolver: Resolver,
    pub toolbelt: Toolbelt,
    /// This daemon's instance id, and how long its leases last (it renews them at a third of that).
    pub lessee: Lessee,
    /// Other daemons may lease attempts on this store: recovery adopts only this instance's, and
    /// the loop takes over theirs when their leases lapse.
    pub shared_store: bool,
    pub runs_dir: PathBuf,
    /// Each unfinished agent Work's directory (`<state>/works/<key>`): its working directory and
    /// its CLI's home.
    pub works_dir: PathBuf,
    /// Where execution logs and kept declared files go (the layout the server reads them from).
    pub files: ArtifactFiles,
    pub playbook_dir: PathBuf,
    pub os_dir: PathBuf,
    /// What no attempt's sandbox reaches: the state directory and the configuration file.
    pub hidden: confine::Hidden,
    /// A token lifetime shorter than the attempt deadline; tokens are then rotated while it runs.
    pub token_lifetime: Option<Duration>,
    /// What every execution's toolbelt socket draws its connections from.
    pub toolbelt_connections: SharedConnections,
    pub kick: Arc<Notify>,
    pub shutdown: watch::Receiver<bool>,
    /// The attempts this daemon supervises, each with the signal that stops it once it is fenced.
    pub supervised: Arc<Mutex<HashMap<String, Arc<Notify>>>>,
}

/// A started process as its supervisor holds it: our child (or none, when adopted), its pid, and the
/// signal that it was fenced.
struct Started {
    child: Option<tokio::process::Child>,
    pid: i32,
    fenced: Arc<Notify>,
}

/// The token an attempt currently holds.
struct Issued {
    plaintext: String,
    expires_at: Timestamp,
}

/// How an attempt's process is watched: our own child, or one adopted from an earlier daemon.
enum Process {
    Spawn,
    Adopted(i32),
}

impl Process {
    /// How the segment ends when its supervision cannot begin: a process not yet started never
    /// starts; an adopted one is killed (it must not run on beside a retry).
    fn abandon(&self) -> SegmentEnd {
        match self {
            Process::Spawn => SegmentEnd::FailedToStart(None),
            Process::Adopted(pid) => {
                kill_group(*pid);
                SegmentEnd::Killed
            }
        }
    }
}

impl Runtime {
    /// Runs a store rule on a blocking thread.
    async fn db<T: Send + 'static>(
        &self,
        f: impl FnOnce(&dyn Store) -> Result<T, HostError> + Send + 'static,
    ) -> Result<T, HostError> {
        on_store_thread(self.store.clone(), f).await
    }

    /// The scheduler loop: fire due wait timers, then claim and launch every ready Work, until shutdown.
    pub async fn scheduler_loop(self) {
        let mut shutdown = self.shutdown.clone();
        loop {
            if let Err(e) = self.tick().await {
                tracing::error!(error = %e, "scheduler tick failed");
            }
            tokio::select! {
                _ = self.kick.notified() => {}
                _ = tokio::time::sleep(IDLE_TICK) => {}
                _ = shutdown.changed() => return,
            }
        }
    }

    /// The retention pass, hourly: settled tokens and finished executions' replay records.
    pub async fn sweep_loop(self) {
        let mut shutdown = self.shutdown.clone();
        let mut hourly = tokio::time::interval(SWEEP_EVERY);
        loop {
            tokio::select! {
                _ = hourly.tick() => {}
                _ = shutdown.changed() => return,
            }
            let idempotency_cutoff = Timestamp(now().0 - IDEMPOTENCY_KEPT.0);
            let kept = self
                .db(move |s| Ok(s.write(|tx| tx.delete_idempotent_before(idempotency_cutoff))?))
                .await;
            if let Err(e) = kept {
                tracing::error!(error = %e, "idempotency retention failed");
            }
            self.remove_finished_work_dirs(None).await;
            match self.db(|s| Ok(sweep(s, now())?)).await {
                Ok(swept) => tracing::debug!(tokens = swept.tokens, requests = swept.requests, "retention pass"),
                Err(e) => tracing::error!(error = %e, "retention pass failed"),
            }
        }
    }

    async fn tick(&self) -> Result<(), HostError> {
        let runs_latest = self.runs_latest_generation().await;
        // Taken first, and only these are checked: an attempt whose supervision begins later is
        // the next tick's. Its `Running` was committed before, so every read of the store made
        // after this finds each attempt taken here that is not fenced.
        let supervised = self.supervised_now();
        let running = self.running_if_needed(&supervised).await?;
        pausepoint("tick:fence").await;
        stop_fenced(&supervised, &running);
        self.take_over_abandoned(&running).await?;
        if !runs_latest {
            return Ok(());
        }
        let config = self.config.get();
        self.db(move |s| s.write(|tx| fire_due_timers(tx, &config, now())))
            .await?;
        while let Some((claim, token)) = self.claim().await? {
            if self.stopped_by_start_gate(&claim).await? {
                continue;
            }
            tracing::info!(execution = %claim.execution.id, work = %claim.work.id, epoch = claim.execution.epoch, "starting attempt");
            tokio::spawn(self.clone().supervise(claim.execution, token, Process::Spawn));
        }
        Ok(())
    }

    /// Asks the start gates about a Work's first attempt before its process starts. When one parks
    /// or refuses, the attempt is settled (the Work waits on the plan, or fails with the gate's
    /// code) and `true` is answered.
    async fn stopped_by_start_gate(&self, claim: &Claim) -> Result<bool, HostError> {
        let gates = self.toolbelt.registry().start_gates();
        if gates.is_empty() {
            return Ok(false);
        }
        let x = claim.execution.clone();
        if !self.db(move |s| s.read(|tx| first_to_start(tx, &x))).await? {
            return Ok(false);
        }
        let call = StartCall {
            scope: claim.work.scope.clone(),
            work_id: claim.work.id.clone(),
            binding: claim.work.binding.clone(),
            input: claim.work.input.clone(),
        };
        let Verdict::Stop(stopped) = decide_start(&gates, &call).await else {
            return Ok(false);
        };
        tracing::info!(work = %call.work_id, "a start gate stopped the Work's first attempt");
        let declaration = stopped.into_declaration();
        let id = claim.execution.id.clone();
        self.db(move |s| s.write(|tx| settle_unstarted(tx, &id, declaration, now())))
            .await?;
        self.kick.notify_one();
        Ok(true)
    }

    /// Whether this daemon runs the store's latest generation (always, on a store of its own): it
    /// claims and fires timers only then, since it could not serve what it started.
    async fn runs_latest_generation(&self) -> bool {
        if !self.shared_store {
            return true;
        }
        let configs = self.configs.clone();
        self.db(move |_| Ok(configs.catch_up().is_ok())).await.unwrap_or(false)
    }

    /// The store's running attempts, read when this tick needs them: to stop the `supervised` ones
    /// it no longer has running, or to take over another daemon's abandoned ones. A read of state
    /// only, so a tick after every toolbelt call does not commit what the calls before it hold.
    async fn running_if_needed(&self, supervised: &[Supervised]) -> Result<Vec<Execution>, HostError> {
        if !self.shared_store && supervised.is_empty() {
            return Ok(Vec::new());
        }
        self.db(|s| Ok(s.read_state(|tx| tx.executions_in_state(ExecutionState::Running))?))
            .await
    }

    /// The attempts supervised now.
    fn supervised_now(&self) -> Vec<Supervised> {
        let supervised = self.supervised();
        supervised.iter().map(|(id, stop)| (id.clone(), stop.clone())).collect()
    }

    fn supervised(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<Notify>>> {
        self.supervised.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Claims the next ready Work and issues its token, in one transaction.
    async fn claim(&self) -> Result<Option<(Claim, String)>, HostError> {
        let lessee = self.lessee.clone();
        self.leased(move |tx, config, at| claim_next(tx, config, &lessee, at))
            .await
    }

    /// Takes a lease with `take` and issues the attempt's token (revoking lower epochs), in one
    /// transaction, so no leased attempt is ever without its current token.
    async fn leased(
        &self,
        take: impl FnOnce(&mut dyn Tx, &Snapshot, Timestamp) -> Result<Option<Claim>, HostError> + Send + 'static,
    ) -> Result<Option<(Claim, String)>, HostError> {
        let (config, lifetime) = (self.config.get(), self.token_lifetime);
        self.db(move |s| {
            s.write(|tx| {
                let at = now();
                let Some(claim) = take(tx, &config, at)? else {
                    return Ok(None);
                };
                let ops = config.granted_to(&claim.work);
                let token = token::issue(tx, &claim.execution, &claim.work, ops, lifetime, at)?;
                Ok(Some((claim, token)))
            })
        })
        .await
    }

    /// Runs one attempt from its run directory to its completion, or until the daemon shuts down (the
    /// run directory then stays for the next daemon to adopt).
    async fn supervise(self, execution: Execution, token: String, process: Process) {
        let id = execution.id.clone();
        let executable = self.pinned_executable(&execution).await;
        let workdir = Workdir::of(executable.as_ref(), &self.work_root(&execution.work_id));
        let run = match self.prepare(&execution, &workdir) {
            Ok(run) => run,
            Err(e) => {
                tracing::error!(execution = %id, error = %e, "toolbelt endpoint unavailable");
                let line = format!("open-conduit: toolbelt endpoint unavailable: {e}; the process was not started");
                shell::append_log(&self.files.log(&id), &line);
                let end = match process {
                    Process::Spawn => SegmentEnd::EndpointUnavailable,
                    adopted => adopted.abandon(),
                };
                return self.finish(&id, end, None).await;
            }
        };
        // An adopted process already started where it works.
        let checked = matches!((&workdir, &process), (Workdir::Binding(_), Process::Spawn))
            .then(|| shell::usable_workdir(&run.workdir, &self.hidden.state_dir));
        if let Some(Err(why)) = checked {
            let line = format!("open-conduit: {why}; the process was not started");
            shell::append_log(&self.files.log(&id), &line);
            return self.finish(&id, SegmentEnd::FailedToStart(None), Some(&run)).await;
        }
        let (stop_socket, socket_stopped) = tokio::sync::oneshot::channel::<()>();
        let socket = match open_endpoint(&run, &token) {
            Ok(listener) => listener,
            Err(e) => {
                tracing::error!(execution = %id, error = %e, "could not open the toolbelt endpoint");
                return self.finish(&id, process.abandon(), Some(&run)).await;
            }
        };
        let router = execution_router(ExecutionSocket {
            toolbelt: self.toolbelt.clone(),
            execution_id: id.clone().into(),
            kick: self.kick.clone(),
        });
        let limits = ConnectionLimits::toolbelt(&self.config.get().limits(), &self.toolbelt_connections);
        tokio::spawn(serve(socket, router, limits, async move {
            let _ = socket_stopped.await;
        }));
        let issued = Issued {
            expires_at: token::expiry(&execution, self.token_lifetime, now()),
            plaintext: token,
        };
        let end = self.watch(&execution, &run, (process, executable), issued).await;
        let _ = stop_socket.send(());
        match end {
            Some(end) => self.finish(&id, end, Some(&run)).await,
            None => tracing::info!(execution = %id, "daemon stopping; the attempt keeps running for the next daemon"),
        }
    }

    fn prepare(&self, execution: &Execution, workdir: &Workdir) -> Result<RunDir, crate::DaemonError> {
        if let Workdir::Work(_) = workdir {
            self.create_in_work_root(&execution.work_id, "work")?;
        }
        let run = RunDir::create(&self.runs_dir, &execution.id, workdir.path())?;
        // A socket left by an earlier daemon for this attempt is stale: we hold the state lock.
        let _ = std::fs::remove_file(&run.socket);
        Ok(run)
    }

    /// Watches the process until it ends (returning how), renewing the lease and enforcing the
    /// deadline; `None` when the daemon shuts down first.
    async fn watch(
        &self,
        execution: &Execution,
        run: &RunDir,
        (process, executable): (Process, Option<Executable>),
        token: Issued,
    ) -> Option<SegmentEnd> {
        let mut child = None;
        let pid = match process {
            Process::Adopted(pid) => pid,
            Process::Spawn => {
                let Some(executable) = executable else {
                    let line = "open-conduit: the binding is gone from the configuration this attempt pinned, or its executor is not one the host runs; the process was not started";
                    shell::append_log(&self.files.log(&execution.id), line);
                    return Some(SegmentEnd::FailedToStart(None));
                };
                let program = match self.program_for(execution, run, &executable).await {
                    Ok(program) => program,
                    Err(end) => return Some(end),
                };
                // The sandbox's ruleset is built while the secrets resolve: both are blocking work,
                // which may take longer than the lease (a `cmd:` may run ten seconds).
                let (secrets, confinement) = self
                    .renewing(execution, async {
                        tokio::join!(
                            self.secrets_for(execution),
                            self.confinement_for(execution, run, program.home.clone())
                        )
                    })
                    .await;
                // On a shared store, another daemon may have taken the attempt over meanwhile (this
                // one froze): a process starts only while the lease is held.
                if self.shared_store && !self.renew(execution).await {
                    tracing::warn!(execution = %execution.id, "lease lost before the process started; not starting it");
                    return Some(SegmentEnd::FailedToStart(None));
                }
                match secrets {
                    Err(Unresolved { name, code, remedy }) => {
                        tracing::warn!(execution = %execution.id, secret = %name, code, "a secret could not be resolved");
                        let line = format!("open-conduit: the secret `{name}` could not be resolved ({code}); the process was not started; {remedy}");
                        shell::append_log(&self.files.log(&execution.id), &line);
                        return Some(SegmentEnd::SecretUnavailable);
                    }
                    Ok(secrets) => match confinement
                        .and_then(|c| self.spawn(execution, run, (&executable, &program), &secrets, c))
                    {
                        Ok(c) => {
                            let pid = c.id().and_then(|p| i32::try_from(p).ok()).unwrap_or(0);
                            child = Some(c);
                            if let Err(e) = run.note_pid(pid) {
                                tracing::warn!(execution = %execution.id, error = %e, "could not note the attempt's pid");
                            }
                            failpoint("attempt:spawned");
                            let id = execution.id.clone();
                            let _ = self.db(move |s| s.write(|tx| record_pid(tx, &id, pid))).await;
                            pid
                        }
                        Err(end) => return Some(end),
                    },
                }
            }
        };
        pausepoint("attempt:supervise").await;
        let fenced = Arc::new(Notify::new());
        self.supervised().insert(execution.id.clone(), fenced.clone());
        let started = Started { child, pid, fenced };
        let end = self.watch_until_end(execution, run, started, token).await;
        self.supervised().remove(&execution.id);
        end
    }

    /// The supervision loop of a started process: exit, lease renewal (and token rotation), fencing,
    /// deadline, or daemon shutdown.
    async fn watch_until_end(
        &self,
        execution: &Execution,
        run: &RunDir,
        started: Started,
        mut token: Issued,
    ) -> Option<SegmentEnd> {
        let Started { mut child, pid, fenced } = started;
        let deadline = tokio::time::Instant::now() + until(execution.deadline_at);
        let mut renew = tokio::time::interval(self.renew_every());
        renew.tick().await;
        let mut measure = tokio::time::interval(OUTPUT_CHECK);
        let mut shutdown = self.shutdown.clone();
        loop {
            tokio::select! {
                end = exited(&mut child, pid) => {
                    kill_group(pid);
                    return Some(end);
                }
                _ = renew.tick() => {
                    if !self.renew(execution).await {
                        tracing::warn!(execution = %execution.id, "lease lost; stopping the attempt");
                        return Some(stop(&mut child, pid).await);
                    }
                    self.rotate_if_due(run, &mut token).await;
                }
                _ = measure.tick() => {
                    if self.output_exceeded(&execution.id) {
                        tracing::warn!(execution = %execution.id, "attempt output over its limit; stopping the attempt");
                        return Some(stop(&mut child, pid).await);
                    }
                }
                _ = fenced.notified() => {
                    tracing::info!(execution = %execution.id, "attempt fenced by an operator; stopping it");
                    return Some(stop(&mut child, pid).await);
                }
                _ = tokio::time::sleep_until(deadline) => {
                    tracing::warn!(execution = %execution.id, "attempt deadline passed; killing its process group");
                    return Some(stop(&mut child, pid).await);
                }
                _ = shutdown.changed() => return None,
            }
        }
    }

    /// With a token lifetime shorter than the attempt, rotates the token once it is within two renewal
    /// periods of expiring: a successor with the same pinned grant, written to the token file by
    /// rename, so the process's next call reads it. The old token stays valid until it expires.
    async fn rotate_if_due(&self, run: &RunDir, token: &mut Issued) {
        let Some(lifetime) = self.token_lifetime else { return };
        let two_renewals = Duration(2 * self.renew_every().as_millis() as i64);
        if now().plus(two_renewals) < token.expires_at {
            return;
        }
        let current = token.plaintext.clone();
        let rotated = self
            .db(move |s| Ok(s.write(|tx| token::rotate(tx, &current, Some(lifetime), now()))?))
            .await;
        match rotated {
            Ok(Some((plaintext, expires_at))) => match run.write_token(&plaintext) {
                Ok(()) => *token = Issued { plaintext, expires_at },
                Err(e) => tracing::warn!(error = %e, "could not write the rotated token"),
            },
            Ok(None) => {}
            Err(e) => tracing::warn!(error = %e, "could not rotate the token"),
        }
    }

    /// Whether the attempt's log and transcript together passed `limits.attempt_output_bytes`
    /// (said in its log).
    fn output_exceeded(&self, execution_id: &str) -> bool {
        let limit = self.config.get().limits().attempt_output_bytes;
        let log = self.files.log(execution_id);
        let written: u64 = [log.clone(), self.files.declared_file(execution_id, TRANSCRIPT_INDEX)]
            .iter()
            .filter_map(|f| std::fs::metadata(f).ok())
            .map(|m| m.len())
            .sum();
        let exceeded = written > limit;
        if exceeded {
            let line = format!("open-conduit: the attempt wrote more than {limit} bytes of output (limits.attempt_output_bytes); its process group was killed");
            shell::append_log(&log, &line);
        }
        exceeded
    }

    /// Runs `work`, renewing the attempt's lease every renewal period until it is done.
    async fn renewing<T>(&self, execution: &Execution, work: impl std::future::Future<Output = T>) -> T {
        let mut renew = tokio::time::interval(self.renew_every());
        renew.tick().await;
        tokio::pin!(work);
        loop {
            tokio::select! {
                done = &mut work => return done,
                _ = renew.tick() => {
                    self.renew(execution).await;
                }
            }
        }
    }

    /// How often a running attempt's lease is renewed: a third of its length, so two renewals
    /// can fail before it lapses.
    fn renew_every(&self) -> StdDuration {
        StdDuration::from_millis(u64::try_from(self.lessee.lease.0 / 3).unwrap_or(1).max(1))
    }

    async fn renew(&self, execution: &Execution) -> bool {
        let (id, epoch, lessee) = (execution.id.clone(), execution.epoch, self.lessee.clone());
        self.db(move |s| s.write(|tx| renew_lease(tx, &id, epoch, &lessee, now())))
            .await
            .unwrap_or(false)
    }
}

/// Signals every attempt in `supervised` that the store's `running` attempts (read after
/// `supervised` was taken) no longer hold: an operator cancelled its Work, or another daemon took
/// it over. It is stopped now rather than at its next lease renewal.
fn stop_fenced(supervised: &[Supervised], running: &[Execution]) {
    for (id, stop) in supervised {
        if !running.iter().any(|x| &x.id == id) {
            stop.notify_one();
        }
    }
}

/// Binds the attempt's socket, then publishes its token: the socket listens first, so a process
/// that sees the new token (an adopted one re-reads it) can always connect with it.
fn open_endpoint(run: &RunDir, token: &str) -> Result<tokio::net::UnixListener, String> {
    let listener = bind_owner_only(&run.socket).map_err(|e| e.to_string())?;
    run.write_token(token).map_err(|e| e.to_string())?;
    Ok(listener)
}

/// Kills the attempt's process group and returns once its process is gone, so the end it reports
/// is an observed stop (what lets a fenced attempt's Work be retried).
async fn stop(child: &mut Option<tokio::process::Child>, pid: i32) -> SegmentEnd {
    kill_group(pid);
    exited(child, pid).await;
    SegmentEnd::Killed
}

/// How a watched process ended: our child's exit status (a death by a signal we did not send is
/// status 128 + the signal, as a shell reports it), or an adopted process's disappearance.
async fn exited(child: &mut Option<tokio::process::Child>, pid: i32) -> SegmentEnd {
    use std::os::unix::process::ExitStatusExt;
    match child {
        Some(c) => match c.wait().await {
            Ok(status) => match (status.code(), status.signal()) {
                (Some(code), _) => SegmentEnd::Exited(code),
                (None, Some(signal)) => SegmentEnd::Exited(128 + signal),
                (None, None) => SegmentEnd::Killed,
            },
            Err(_) => SegmentEnd::Lost,
        },
        None => {
            while is_alive(pid) {
                tokio::time::sleep(ADOPTED_POLL).await;
            }
            SegmentEnd::ExitUnknown
        }
    }
}

/// The time from now until `at` (zero when it has passed).
fn until(at: Timestamp) -> StdDuration {
    StdDuration::from_millis(u64::try_from(at.0 - now().0).unwrap_or(0))
}
