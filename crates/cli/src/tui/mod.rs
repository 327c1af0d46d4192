//! `open-conduit tui`: live Work and its log, approvals with their exact input (approve or deny
//! with one key), the selected Work's events as a causal tree, and doctor's findings, over the
//! same management client and roles as every other command.
//!
//! [`app`] is the state and what keys do (pure), [`view`] draws it; this module is the loop: it
//! reads keys, refreshes from the daemon every second, and carries out decisions.

mod app;
mod view;

use std::io::IsTerminal;
use std::time::{Duration, Instant};

use crate::connection::{Connection, Request};
use crate::management::{self as m, items, send, send_up_to, Locations};
use crate::report::Failure;
use crate::{doctor, runs};
use app::{App, Command, Data, Tab};
use ratatui::crossterm::event::{self, DisableBracketedPaste, EnableBracketedPaste, Event, KeyEventKind};
use ratatui::crossterm::execute;
use ratatui::DefaultTerminal;
use serde_json::Value;

/// How often the views are read again.
const REFRESH: Duration = Duration::from_secs(1);
/// The most Work the view lists (newest first).
const WORK_SHOWN: usize = 200;

pub fn run(locations: &Locations) -> Result<(), Failure> {
    if !std::io::stdout().is_terminal() {
        return Err(Failure::Local(
            "the TUI needs a terminal; for scripts use `runs watch`, `events list --follow` or --json".to_owned(),
        ));
    }
    let connection = locations.connection()?;
    let mut terminal = ratatui::init();
    // A paste arrives as one event, never as keys (a pasted line break would otherwise be Enter).
    let _ = execute!(std::io::stdout(), EnableBracketedPaste);
    let result = event_loop(&mut terminal, locations, &connection);
    let _ = execute!(std::io::stdout(), DisableBracketedPaste);
    ratatui::restore();
    result
}

fn event_loop(terminal: &mut DefaultTerminal, locations: &Locations, connection: &Connection) -> Result<(), Failure> {
    let mut app = App::new();
    let mut due = Instant::now();
    // Whether the next refresh also runs doctor's checks again (they probe the kernel): on a key,
    // not every second.
    let mut asked = true;
    loop {
        if Instant::now() >= due {
            refresh(&mut app, locations, connection, std::mem::take(&mut asked));
            due = Instant::now() + REFRESH;
        }
        terminal
            .draw(|frame| view::draw(frame, &app))
            .map_err(|e| Failure::Local(format!("cannot draw on the terminal: {e}")))?;
        let wait = due.saturating_duration_since(Instant::now());
        if !event::poll(wait).map_err(|e| Failure::Local(format!("cannot read the terminal: {e}")))? {
            continue;
        }
        let key = match event::read() {
            Ok(Event::Key(key)) if key.kind == KeyEventKind::Press => key,
            Ok(Event::Paste(text)) => {
                app.on_paste(&text);
                continue;
            }
            _ => continue,
        };
        match app.on_key(key) {
            Command::Quit => return Ok(()),
            Command::Nothing => {}
            Command::Refresh => (due, asked) = (Instant::now(), true),
            Command::Approve(id) => {
                decide(&mut app, connection, &m::approve(&id));
                due = Instant::now();
            }
            Command::Deny { approval, reason } => {
                decide(&mut app, connection, &m::deny(&approval, &reason));
                due = Instant::now();
            }
        }
    }
}

/// Reads every view's data again; a daemon that cannot be read is said in the status line (and
/// the status cleared once it answers again).
/// Doctor's view is read even then: it works offline and says what is wrong.
fn refresh(app: &mut App, locations: &Locations, connection: &Connection, asked: bool) {
    match read(app, locations, connection, asked) {
        Ok(data) => {
            if std::mem::take(&mut app.unreachable) {
                app.status.clear();
            }
            app.refreshed(data);
        }
        Err(failure) => {
            app.status = describe(&failure);
            app.unreachable = true;
            if app.tab == Tab::Doctor && (asked || app.data.doctor.is_none()) {
                app.data.doctor = Some(doctor::run(locations));
            }
        }
    }
}

fn read(app: &App, locations: &Locations, connection: &Connection, asked: bool) -> Result<Data, Failure> {
    let health = send(connection, &m::health())?;
    let work = items(send_up_to(connection, &m::list_work(None, None), Some(WORK_SHOWN))?);
    // The selected Work by its id while it is listed, else the newest (as `App::refreshed` picks).
    let listed = |id: &String| work.iter().any(|w| w["id"].as_str() == Some(id));
    let selected = app.work.clone().filter(listed);
    let selected = selected.or_else(|| work.first().and_then(|w| w["id"].as_str()).map(str::to_owned));
    let (events, log) = match &selected {
        Some(id) if settled(app, id, &work) => (app.data.events.clone(), app.data.log.clone()),
        Some(id) => (
            items(send_up_to(
                connection,
                &m::list_events(&m::EventQuery::of_work(id), None),
                None,
            )?),
            runs::log(connection, id)?["content"]
                .as_str()
                .unwrap_or_default()
                .to_owned(),
        ),
        None => (Vec::new(), String::new()),
    };
    Ok(Data {
        operator: health["operator"]["name"].as_str().unwrap_or("-").to_owned(),
        role: health["operator"]["role"].as_str().unwrap_or("-").to_owned(),
        generation: health["generation"].clone(),
        work,
        approvals: items(send_up_to(connection, &m::list_approvals(Some("pending")), None)?),
        shown_work: selected,
        events,
        log,
        doctor: match (app.tab, &app.data.doctor) {
            (Tab::Doctor, Some(report)) if !asked => Some(report.clone()),
            (Tab::Doctor, _) => Some(doctor::run(locations)),
            _ => None,
        },
    })
}

/// Whether the Work `id` is the one whose events and log were last read, and was finished then and
/// still is: they do not change any more, so they are kept rather than read every second.
fn settled(app: &App, id: &str, work: &[Value]) -> bool {
    if app.data.shown_work.as_deref() != Some(id) {
        return false;
    }
    let find = |list: &[Value]| list.iter().find(|w| w["id"].as_str() == Some(id)).cloned();
    let state = |work: Option<Value>| work.map(|w| w["state"].clone());
    let now = find(work);
    now.as_ref().is_some_and(runs::is_finished) && state(find(&app.data.work)) == state(now)
}

/// Sends a decision and says how it went.
fn decide(app: &mut App, connection: &Connection, request: &Request) {
    app.status = match send(connection, request) {
        Ok(answer) => crate::render::decided(&answer),
        Err(failure) => describe(&failure),
    };
}

fn describe(failure: &Failure) -> String {
    match failure {
        Failure::Local(message) | Failure::Transport(message) => message.lines().next().unwrap_or_default().to_owned(),
        Failure::Refused { code, message, .. } => format!("{code}: {message}"),
    }
}
