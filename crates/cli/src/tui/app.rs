//! The TUI's state and what each key does to it: no terminal, no socket. The loop in `super`
//! draws this state and carries out the [`Command`] a key answers.

use std::collections::{HashMap, HashSet};

use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use serde_json::Value;

/// The views, in the order their number keys pick them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tab {
    Work,
    Approvals,
    Events,
    Doctor,
}

impl Tab {
    pub const ALL: [Tab; 4] = [Tab::Work, Tab::Approvals, Tab::Events, Tab::Doctor];

    pub fn title(self) -> &'static str {
        match self {
            Tab::Work => "Work",
            Tab::Approvals => "Approvals",
            Tab::Events => "Events",
            Tab::Doctor => "Doctor",
        }
    }

    fn next(self) -> Tab {
        let at = Tab::ALL.iter().position(|t| *t == self).unwrap_or(0);
        Tab::ALL[(at + 1) % Tab::ALL.len()]
    }
}

/// What the daemon said at the last refresh.
#[derive(Debug, Clone, Default)]
pub struct Data {
    /// The caller's name and role, from `/v1/health`.
    pub operator: String,
    pub role: String,
    pub generation: Value,
    /// Work, newest first.
    pub work: Vec<Value>,
    /// Approvals waiting for a decision, oldest first.
    pub approvals: Vec<Value>,
    /// The Work whose events and log these are.
    pub shown_work: Option<String>,
    /// The selected Work's events, in acceptance order.
    pub events: Vec<Value>,
    /// The selected Work's attempt logs.
    pub log: String,
    /// Doctor's report, read while its view is shown.
    pub doctor: Option<Value>,
}

/// What the keyboard is doing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Mode {
    Browse,
    Help,
    /// Typing the reason for denying this approval.
    Reason {
        approval: String,
        text: String,
    },
}

/// What the loop does after a key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    Nothing,
    Quit,
    Refresh,
    Approve(String),
    Deny { approval: String, reason: String },
}

#[derive(Debug, Clone)]
pub struct App {
    pub tab: Tab,
    pub mode: Mode,
    pub data: Data,
    /// The selected Work and approval, by id: a refresh that adds or removes rows never moves the
    /// selection onto another record. When the selected approval goes away (decided here or elsewhere, or expired), nothing is
    /// selected until the operator picks again, so a decision key never lands on an unread call.
    pub work: Option<String>,
    pub approval: Option<String>,
    /// A refresh has been taken.
    loaded: bool,
    /// How many lines the approval's detail is scrolled down, to read a long input whole.
    pub detail_scroll: u16,
    /// The last outcome worth telling: a decision made, a refusal, an unreachable daemon.
    pub status: String,
    /// The last refresh failed, so the status says why.
    pub unreachable: bool,
}

impl App {
    pub fn new() -> App {
        App {
            tab: Tab::Work,
            mode: Mode::Browse,
            data: Data::default(),
            work: None,
            approval: None,
            loaded: false,
            detail_scroll: 0,
            status: String::new(),
            unreachable: false,
        }
    }

    /// Whether this operator's role may approve and deny (`operate` or `admin`).
    pub fn may_decide(&self) -> bool {
        matches!(self.data.role.as_str(), "operate" | "admin")
    }

    pub fn selected_work(&self) -> Option<&Value> {
        self.work_row().map(|row| &self.data.work[row])
    }

    pub fn selected_approval(&self) -> Option<&Value> {
        self.approval_row().map(|row| &self.data.approvals[row])
    }

    pub fn work_row(&self) -> Option<usize> {
        row_of(&self.data.work, self.work.as_deref())
    }

    pub fn approval_row(&self) -> Option<usize> {
        row_of(&self.data.approvals, self.approval.as_deref())
    }

    /// Takes a refresh. The selected Work stays selected while it is listed (else the newest is);
    /// the selected approval stays selected while it waits, and none is once it has gone.
    pub fn refreshed(&mut self, data: Data) {
        let first = !std::mem::replace(&mut self.loaded, true);
        self.data = data;
        if self.work_row().is_none() {
            self.work = first_id(&self.data.work);
        }
        if self.approval.is_some() && self.approval_row().is_none() {
            self.approval = None;
            self.detail_scroll = 0;
            self.status = "the selected call was decided or expired; select another (↑↓)".to_owned();
        }
        // Only the first load picks a call by itself: one arriving later waits to be picked, so a
        // key already on its way never lands on it.
        if first {
            self.approval = first_id(&self.data.approvals);
        }
    }

    /// The keys the footer offers here: a role that cannot decide is offered no decision key.
    pub fn keys(&self) -> Vec<(&'static str, &'static str)> {
        // The decision keys come first, so a narrow terminal still shows them.
        let mut keys = Vec::new();
        if self.tab == Tab::Approvals && self.may_decide() {
            keys.extend([("a", "approve"), ("d", "deny")]);
        }
        keys.push(("↑↓", "select"));
        if self.tab == Tab::Approvals {
            keys.push(("PgDn", "more"));
        }
        keys.extend([("1-4", "view"), ("?", "help"), ("q", "quit")]);
        keys
    }

    pub fn on_key(&mut self, key: KeyEvent) -> Command {
        let control = key.modifiers.contains(KeyModifiers::CONTROL);
        if control && key.code == KeyCode::Char('c') {
            return Command::Quit;
        }
        match std::mem::replace(&mut self.mode, Mode::Browse) {
            Mode::Help => Command::Nothing,
            // A control chord is not part of a reason.
            Mode::Reason { approval, text } if control => {
                self.mode = Mode::Reason { approval, text };
                Command::Nothing
            }
            Mode::Reason { approval, text } => self.on_reason_key(key.code, approval, text),
            Mode::Browse if control => Command::Nothing,
            Mode::Browse => self.on_browse_key(key.code),
        }
    }

    fn on_browse_key(&mut self, key: KeyCode) -> Command {
        match key {
            KeyCode::Char('q') | KeyCode::Esc => return Command::Quit,
            KeyCode::Char('?') => self.mode = Mode::Help,
            KeyCode::Char('r') => return Command::Refresh,
            KeyCode::Tab => self.tab = self.tab.next(),
            KeyCode::Char(n @ '1'..='4') => self.tab = Tab::ALL[n as usize - '1' as usize],
            KeyCode::PageDown | KeyCode::PageUp => {
                self.scroll(key == KeyCode::PageDown);
                return Command::Nothing;
            }
            KeyCode::Down | KeyCode::Char('j') => self.step(1),
            KeyCode::Up | KeyCode::Char('k') => self.step(-1),
            KeyCode::Char('a') if self.tab == Tab::Approvals => return self.approve(),
            KeyCode::Char('d') if self.tab == Tab::Approvals => {
                self.start_denial();
                return Command::Nothing;
            }
            _ => return Command::Nothing,
        }
        // A new view or selection shows that Work's events and log at once.
        Command::Refresh
    }

    fn on_reason_key(&mut self, key: KeyCode, approval: String, mut text: String) -> Command {
        match key {
            KeyCode::Esc => Command::Nothing,
            KeyCode::Enter if !text.trim().is_empty() => {
                self.deselect_decided();
                Command::Deny {
                    approval,
                    reason: text.trim().to_owned(),
                }
            }
            key => {
                match key {
                    KeyCode::Char(c) => text.push(c),
                    KeyCode::Backspace => {
                        text.pop();
                    }
                    _ => {}
                }
                self.mode = Mode::Reason { approval, text };
                Command::Nothing
            }
        }
    }

    /// Scrolls the approval's detail by a page; the view stops it at the end.
    fn scroll(&mut self, down: bool) {
        if self.tab == Tab::Approvals {
            self.detail_scroll = match down {
                true => self.detail_scroll.saturating_add(10),
                false => self.detail_scroll.saturating_sub(10),
            };
        }
    }

    /// Text pasted while typing a reason joins it (its line breaks as spaces); pasted anywhere
    /// else it is ignored, so a paste can never act as keys.
    pub fn on_paste(&mut self, pasted: &str) {
        if let Mode::Reason { text, .. } = &mut self.mode {
            text.extend(pasted.chars().map(|c| if c.is_control() { ' ' } else { c }));
        }
    }

    fn step(&mut self, by: isize) {
        self.detail_scroll = 0;
        let (list, selected) = match self.tab {
            Tab::Approvals => (&self.data.approvals, &mut self.approval),
            _ => (&self.data.work, &mut self.work),
        };
        let row = match row_of(list, selected.as_deref()) {
            Some(row) => row.saturating_add_signed(by).min(list.len().saturating_sub(1)),
            None => 0,
        };
        *selected = list.get(row).and_then(|item| item["id"].as_str()).map(str::to_owned);
    }

    fn approve(&mut self) -> Command {
        match self.decidable() {
            Some(id) => {
                self.deselect_decided();
                Command::Approve(id)
            }
            None => Command::Nothing,
        }
    }

    /// After a decision nothing is selected, so the next call is read before it is decided.
    fn deselect_decided(&mut self) {
        self.approval = None;
        self.detail_scroll = 0;
    }

    fn start_denial(&mut self) {
        if let Some(approval) = self.decidable() {
            self.mode = Mode::Reason {
                approval,
                text: String::new(),
            };
        }
    }

    /// The selected approval's id, when this operator may decide it; else why not, in the status.
    fn decidable(&mut self) -> Option<String> {
        if !self.may_decide() {
            self.status = format!("the {} role cannot decide approvals", self.data.role);
            return None;
        }
        match self.selected_approval() {
            Some(approval) => approval["id"].as_str().map(str::to_owned),
            None => {
                self.status = "select a call first (↑↓)".to_owned();
                None
            }
        }
    }
}

fn row_of(list: &[Value], id: Option<&str>) -> Option<usize> {
    let id = id?;
    list.iter().position(|item| item["id"].as_str() == Some(id))
}

fn first_id(list: &[Value]) -> Option<String> {
    list.first().and_then(|item| item["id"].as_str()).map(str::to_owned)
}

impl Default for App {
    fn default() -> Self {
        App::new()
    }
}

/// The Work's events in causal order: each after the event it follows from, with its depth
/// below the first of its chain shown (events whose parent is not among them start a chain).
pub fn causal_order(events: &[Value]) -> Vec<(usize, &Value)> {
    fn id(e: &Value) -> &str {
        e["id"].as_str().unwrap_or_default()
    }
    let mut children: HashMap<&str, Vec<&Value>> = HashMap::new();
    let mut roots = Vec::new();
    let known: HashSet<&str> = events.iter().map(id).collect();
    for event in events {
        match event["causation"]["parent"].as_str().filter(|p| known.contains(p)) {
            Some(parent) => children.entry(parent).or_default().push(event),
            None => roots.push(event),
        }
    }
    let mut ordered = Vec::with_capacity(events.len());
    let mut seen = HashSet::new();
    let mut stack: Vec<(usize, &Value)> = roots.into_iter().rev().map(|e| (0, e)).collect();
    while let Some((depth, event)) = stack.pop() {
        // Ids are unique in the store; a repeated one is shown once, so no loop can form.
        if !seen.insert(id(event)) {
            continue;
        }
        ordered.push((depth, event));
        let below = children.get(id(event)).into_iter().flatten().rev();
        stack.extend(below.map(|e| (depth + 1, *e)));
    }
    ordered
}

#[cfg(test)]
mod tests;
