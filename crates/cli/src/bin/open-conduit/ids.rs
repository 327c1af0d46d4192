//! Ids on the command line may be abbreviated to any unique prefix, as git abbreviates commits:
//! before a command is planned, every id it names that is not a full id is looked up once.

use conduit_cli::management::{self, Locations};
use conduit_cli::report::Failure;
use conduit_core::id_prefix::{is_full_id, is_prefix, IdKind};

use crate::cli::{
    ActArgs, ApprovalsCommand, ArtifactsCommand, Command, EmitArgs, EventsCommand, ExecutionsCommand, RouteArgs,
    RunsCommand, WorkCommand,
};

/// One id the command names: of a kind, or an artifact's (`log:<execution>`, `file:<execution>:<n>`).
enum Slot<'a> {
    Id(IdKind, &'a mut String),
    Artifact(&'a mut String),
}

/// `command` with each abbreviated id replaced by the full id it stands for.
pub fn expand(mut command: Command, locations: &Locations) -> Result<Command, Failure> {
    for slot in slots(&mut command) {
        match slot {
            Slot::Id(kind, id) => *id = expanded(locations, kind, id)?,
            Slot::Artifact(id) => expand_artifact(locations, id)?,
        }
    }
    Ok(command)
}

/// The full id `text` stands for: a full id as it is (in lower case, as ids are written), a
/// prefix looked up; anything else is sent as it is, and what names nothing is answered
/// `not_found`.
fn expanded(locations: &Locations, kind: IdKind, text: &str) -> Result<String, Failure> {
    match (is_full_id(text), is_prefix(text)) {
        (true, _) => Ok(text.to_ascii_lowercase()),
        (false, true) => lookup(locations, kind, text),
        (false, false) => Ok(text.to_owned()),
    }
}

fn lookup(locations: &Locations, kind: IdKind, prefix: &str) -> Result<String, Failure> {
    let answer = locations.send(&management::resolve_id(kind.as_str(), prefix))?;
    Ok(answer["id"].as_str().unwrap_or(prefix).to_owned())
}

/// An artifact id's execution part, expanded: `log:0193ab` is `log:<the full id>`.
fn expand_artifact(locations: &Locations, id: &mut String) -> Result<(), Failure> {
    let Some((class @ ("log" | "file"), rest)) = id.split_once(':') else {
        return Ok(());
    };
    let (execution, index) = rest.split_once(':').map_or((rest, None), |(e, n)| (e, Some(n)));
    let full = expanded(locations, IdKind::Execution, execution)?;
    *id = match index {
        Some(index) => format!("{class}:{full}:{index}"),
        None => format!("{class}:{full}"),
    };
    Ok(())
}

/// Every id argument of `command`, by the kind of record it names.
fn slots(command: &mut Command) -> Vec<Slot<'_>> {
    use IdKind::{Approval, Event, Execution, Work};
    let work = |id| Slot::Id(Work, id);
    let mut slots = Vec::new();
    match command {
        Command::Work(command) => slots.extend(work_id(command).map(work)),
        Command::Emit(EmitArgs { parent, .. }) => slots.extend(parent.as_mut().map(|id| Slot::Id(Event, id))),
        Command::Act(ActArgs { work: id, .. }) | Command::Route(RouteArgs { work: id, .. }) => {
            slots.extend(id.as_mut().map(work))
        }
        Command::Events(EventsCommand::List { work: id, .. }) | Command::Waits { work: id } => {
            slots.extend(id.as_mut().map(work))
        }
        Command::Events(EventsCommand::Chain { id }) => slots.push(Slot::Id(Event, id)),
        Command::Runs(RunsCommand::Get { work: id } | RunsCommand::Log { work: id }) => slots.push(work(id)),
        Command::Artifacts(ArtifactsCommand::List { execution }) => {
            slots.extend(execution.as_mut().map(|id| Slot::Id(Execution, id)))
        }
        Command::Artifacts(ArtifactsCommand::Cat { id }) => slots.push(Slot::Artifact(id)),
        Command::Approvals(
            ApprovalsCommand::Show { id } | ApprovalsCommand::Approve { id } | ApprovalsCommand::Deny { id, .. },
        ) => slots.push(Slot::Id(Approval, id)),
        Command::Audit {
            execution, work: id, ..
        } => {
            slots.extend(execution.as_mut().map(|e| Slot::Id(Execution, e)));
            slots.extend(id.as_mut().map(work));
        }
        Command::Executions(ExecutionsCommand::List { work: id }) => slots.extend(id.as_mut().map(work)),
        Command::Executions(ExecutionsCommand::Cancel { id } | ExecutionsCommand::ConfirmStopped { id }) => {
            slots.push(Slot::Id(Execution, id))
        }
        _ => {}
    }
    slots
}

/// The Work a `work` command names, if it names one.
fn work_id(command: &mut WorkCommand) -> Option<&mut String> {
    match command {
        WorkCommand::Create { .. } | WorkCommand::List { .. } => None,
        WorkCommand::Wait { id }
        | WorkCommand::Get { id }
        | WorkCommand::Retry { id }
        | WorkCommand::Cancel { id }
        | WorkCommand::Hold { id }
        | WorkCommand::Release { id }
        | WorkCommand::Rebind { id, .. }
        | WorkCommand::Attach { id, .. }
        | WorkCommand::Wake { id, .. } => Some(id),
    }
}
