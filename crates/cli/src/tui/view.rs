//! Draws the TUI's state: the views' tabs and who is operating on top, the view in the middle,
//! the status and the keys at the bottom. Highlights use reverse video and bold only, so the TUI
//! reads the same with `NO_COLOR` and on a monochrome terminal.

use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Modifier, Style};
use ratatui::text::Line;
use ratatui::widgets::{Block, Clear, Paragraph, Row, Table, TableState, Tabs, Wrap};
use ratatui::Frame;
use serde_json::Value;

use super::app::{causal_order, App, Mode, Tab};
use crate::render;
use crate::text::field;

const SELECTED: Style = Style::new().add_modifier(Modifier::REVERSED);
const HEADER: Style = Style::new().add_modifier(Modifier::BOLD);

pub fn draw(frame: &mut Frame, app: &App) {
    let [top, middle, bottom] =
        Layout::vertical([Constraint::Length(1), Constraint::Min(3), Constraint::Length(2)]).areas(frame.area());
    draw_tabs(frame, top, app);
    match app.tab {
        Tab::Work => draw_work(frame, middle, app),
        Tab::Approvals => draw_approvals(frame, middle, app),
        Tab::Events => draw_events(frame, middle, app),
        Tab::Doctor => draw_doctor(frame, middle, app),
    }
    draw_footer(frame, bottom, app);
    if app.mode == Mode::Help {
        draw_help(frame, app);
    }
}

fn draw_tabs(frame: &mut Frame, area: Rect, app: &App) {
    let titles = Tab::ALL.iter().enumerate().map(|(n, tab)| match tab {
        Tab::Approvals => format!("{} {} ({})", n + 1, tab.title(), app.data.approvals.len()),
        tab => format!("{} {}", n + 1, tab.title()),
    });
    let selected = Tab::ALL.iter().position(|t| *t == app.tab);
    let [tabs, who] = Layout::horizontal([Constraint::Min(0), Constraint::Length(48)]).areas(area);
    frame.render_widget(Tabs::new(titles).select(selected).highlight_style(SELECTED), tabs);
    let operator = format!(
        "{} ({}) · generation {}",
        app.data.operator, app.data.role, app.data.generation
    );
    frame.render_widget(Line::from(operator).right_aligned(), who);
}

fn draw_work(frame: &mut Frame, area: Rect, app: &App) {
    let [list, detail] = Layout::horizontal([Constraint::Percentage(45), Constraint::Percentage(55)]).areas(area);
    let ids = render::short_ids(app.data.work.iter().map(|w| field(w, "/id")).collect());
    let id_width = widest(&ids);
    let rows = app.data.work.iter().zip(ids).map(|(w, id)| {
        Row::new([
            id,
            field(w, "/state"),
            format!("{}/{}", field(w, "/scope"), field(w, "/binding")),
        ])
    });
    // An id is shown whole (it can be typed back); the other columns give way.
    let widths = [Constraint::Min(id_width), Constraint::Length(10), Constraint::Fill(1)];
    let table = Table::new(rows, widths)
        .header(Row::new(["ID", "STATE", "SCOPE/BINDING"]).style(HEADER))
        .row_highlight_style(SELECTED)
        .block(Block::bordered().title(format!(" Work ({}) ", app.data.work.len())));
    let mut state = TableState::default().with_selected(app.work_row());
    frame.render_stateful_widget(table, list, &mut state);
    let [about, log] = Layout::vertical([Constraint::Length(14), Constraint::Min(3)]).areas(detail);
    let text = app.selected_work().map(render::work_detail).unwrap_or_default();
    frame.render_widget(paragraph(text, " Selected "), about);
    frame.render_widget(paragraph(tail(&app.data.log, log.height), " Log "), log);
}

fn draw_approvals(frame: &mut Frame, area: Rect, app: &App) {
    let [list, detail] = Layout::horizontal([Constraint::Percentage(40), Constraint::Percentage(60)]).areas(area);
    let ids = render::short_ids(app.data.approvals.iter().map(|a| field(a, "/id")).collect());
    let id_width = widest(&ids);
    let rows = app
        .data
        .approvals
        .iter()
        .zip(ids)
        .map(|(a, id)| Row::new([id, field(a, "/operation"), field(a, "/state")]));
    let widths = [Constraint::Min(id_width), Constraint::Fill(1), Constraint::Length(9)];
    let table = Table::new(rows, widths)
        .header(Row::new(["ID", "OPERATION", "STATE"]).style(HEADER))
        .row_highlight_style(SELECTED)
        .block(Block::bordered().title(" Waiting for a decision "));
    let mut state = TableState::default().with_selected(app.approval_row());
    frame.render_stateful_widget(table, list, &mut state);
    let text = match app.selected_approval() {
        Some(approval) => render::approval_detail(approval),
        None if app.data.approvals.is_empty() => "No call is waiting for a decision.".to_owned(),
        None => "Select a call (↑↓) to read it.".to_owned(),
    };
    // An input longer than the pane says so, so nothing of it goes unread: PgDn shows the rest.
    let rows = paragraph(text.clone(), "").line_count(detail.width.saturating_sub(2));
    let hidden = u16::try_from(rows).unwrap_or(u16::MAX).saturating_sub(detail.height);
    let scroll = app.detail_scroll.min(hidden);
    let title = match hidden - scroll {
        0 => " The call, and the exact input it would run with ".to_owned(),
        n => format!(" The call and its input: {n} more lines below (PgDn) "),
    };
    frame.render_widget(paragraph(text, &title).scroll((scroll, 0)), detail);
}

fn draw_events(frame: &mut Frame, area: Rect, app: &App) {
    let lines: Vec<String> = causal_order(&app.data.events)
        .into_iter()
        .map(|(depth, e)| event_line(depth, e))
        .collect();
    let title = match app.selected_work() {
        Some(work) => format!(" Events of Work {} (causal tree) ", field(work, "/id")),
        None => " Events (select a Work in view 1) ".to_owned(),
    };
    frame.render_widget(paragraph(lines.join("\n"), &title), area);
}

fn event_line(depth: usize, event: &Value) -> String {
    let branch = if depth == 0 {
        String::new()
    } else {
        format!("{}└ ", "  ".repeat(depth - 1))
    };
    format!(
        "{branch}{}  {}  #{}  {}",
        field(event, "/type"),
        field(event, "/source"),
        field(event, "/sequence"),
        field(event, "/accepted_at")
    )
}

fn draw_doctor(frame: &mut Frame, area: Rect, app: &App) {
    let text = match &app.data.doctor {
        Some(report) => render::doctor(report),
        None => "Checking...".to_owned(),
    };
    frame.render_widget(paragraph(text, " Doctor "), area);
}

fn draw_footer(frame: &mut Frame, area: Rect, app: &App) {
    let [status, keys] = Layout::vertical([Constraint::Length(1), Constraint::Length(1)]).areas(area);
    let line = match &app.mode {
        Mode::Reason { text, .. } => format!("deny, because: {text}_   (Enter denies, Esc cancels)"),
        _ => app.status.clone(),
    };
    frame.render_widget(Line::from(line), status);
    let offered: Vec<String> = app.keys().iter().map(|(key, what)| format!("{key} {what}")).collect();
    frame.render_widget(Line::from(offered.join("  ")).style(HEADER), keys);
}

fn draw_help(frame: &mut Frame, app: &App) {
    let area = centered(frame.area(), 74, 17);
    let mut lines = vec![
        "1 Work       Work, newest first; the selected one's attempts' log".to_owned(),
        "2 Approvals  calls waiting for a person, with their exact input".to_owned(),
        "3 Events     the selected Work's events, each under its cause".to_owned(),
        "4 Doctor     what is wrong, and what to do about it".to_owned(),
        String::new(),
        "tab, 1-4     switch view      ↑↓ or j k   select".to_owned(),
        "PgUp PgDn    scroll a long input".to_owned(),
        "r            refresh now      q or Esc    quit".to_owned(),
    ];
    lines.push(match app.may_decide() {
        true => "a            approve the selected call (it runs once)\nd            deny it, with a reason the agent is shown".to_owned(),
        false => format!("Your role ({}) can watch; approving takes operate.", app.data.role),
    });
    lines.push("\nAny key closes this help.".to_owned());
    frame.render_widget(Clear, area);
    frame.render_widget(paragraph(lines.join("\n"), " Keys "), area);
}

fn paragraph(text: String, title: &str) -> Paragraph<'static> {
    Paragraph::new(text)
        .wrap(Wrap { trim: false })
        .block(Block::bordered().title(title.to_owned()))
}

/// The widest of `cells`, in characters.
fn widest(cells: &[String]) -> u16 {
    let widest = cells.iter().map(|c| c.chars().count()).max().unwrap_or(2);
    u16::try_from(widest).unwrap_or(u16::MAX)
}

/// The last lines of `text` that fit in a bordered box `height` rows tall.
fn tail(text: &str, height: u16) -> String {
    let lines: Vec<&str> = text.lines().collect();
    let room = usize::from(height.saturating_sub(2));
    lines[lines.len().saturating_sub(room)..].join("\n")
}

/// A `width` × `height` box in the middle of `area` (smaller when `area` is).
fn centered(area: Rect, width: u16, height: u16) -> Rect {
    let (width, height) = (width.min(area.width), height.min(area.height));
    Rect::new(
        area.x + (area.width - width) / 2,
        area.y + (area.height - height) / 2,
        width,
        height,
    )
}
