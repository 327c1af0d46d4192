use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use serde_json::json;

use super::*;

fn press(app: &mut App, code: KeyCode) -> Command {
    app.on_key(KeyEvent::from(code))
}

fn with_approval(role: &str) -> App {
    let mut app = App::new();
    app.refreshed(Data {
        role: role.into(),
        approvals: vec![json!({"id": "a1", "operation": "http.fetch", "input": {"url": "u"}})],
        work: vec![json!({"id": "w1"}), json!({"id": "w2"})],
        ..Data::default()
    });
    app.tab = Tab::Approvals;
    app
}

#[test]
fn an_operator_approves_with_one_key_and_denies_with_a_reason() {
    let mut app = with_approval("operate");
    assert!(app.keys().contains(&("a", "approve")));
    assert_eq!(press(&mut app, KeyCode::Char('a')), Command::Approve("a1".into()));
    assert_eq!(app.selected_approval(), None, "a decided call is not left selected");
    press(&mut app, KeyCode::Down);
    assert_eq!(press(&mut app, KeyCode::Char('d')), Command::Nothing);
    for c in "no.".chars() {
        press(&mut app, KeyCode::Char(c));
    }
    press(&mut app, KeyCode::Backspace);
    assert_eq!(
        press(&mut app, KeyCode::Enter),
        Command::Deny {
            approval: "a1".into(),
            reason: "no".into()
        }
    );
    assert_eq!(app.mode, Mode::Browse);
}

#[test]
fn a_viewer_is_offered_no_decision_and_its_keys_decide_nothing() {
    let mut app = with_approval("view");
    assert!(
        !app.keys().iter().any(|(key, _)| *key == "a" || *key == "d"),
        "{:?}",
        app.keys()
    );
    assert_eq!(press(&mut app, KeyCode::Char('a')), Command::Nothing);
    assert_eq!(press(&mut app, KeyCode::Char('d')), Command::Nothing);
    assert_eq!(app.mode, Mode::Browse, "no reason is asked for");
    assert!(app.status.contains("view role cannot decide"), "{}", app.status);
}

#[test]
fn an_empty_reason_is_not_sent_and_escape_abandons_it() {
    let mut app = with_approval("admin");
    press(&mut app, KeyCode::Char('d'));
    assert_eq!(press(&mut app, KeyCode::Enter), Command::Nothing);
    assert!(matches!(app.mode, Mode::Reason { .. }));
    assert_eq!(press(&mut app, KeyCode::Esc), Command::Nothing);
    assert_eq!(app.mode, Mode::Browse);
}

#[test]
fn views_and_selections_follow_the_keys_and_stay_in_their_lists() {
    let mut app = with_approval("view");
    press(&mut app, KeyCode::Char('1'));
    assert_eq!(app.tab, Tab::Work);
    for _ in 0..5 {
        press(&mut app, KeyCode::Down);
    }
    assert_eq!(app.work_row(), Some(1), "the last row");
    press(&mut app, KeyCode::Up);
    assert_eq!(app.selected_work().unwrap()["id"], "w1");
    press(&mut app, KeyCode::Tab);
    assert_eq!(app.tab, Tab::Approvals);
    assert_eq!(press(&mut app, KeyCode::Char('q')), Command::Quit);
    let control_c = KeyEvent::new(KeyCode::Char('c'), KeyModifiers::CONTROL);
    assert_eq!(app.on_key(control_c), Command::Quit);
}

#[test]
fn a_selection_follows_its_record_and_a_decided_call_leaves_nothing_selected() {
    let mut app = with_approval("operate");
    press(&mut app, KeyCode::Char('1'));
    press(&mut app, KeyCode::Down);
    let newer = Data {
        role: "operate".into(),
        work: vec![json!({"id": "w0"}), json!({"id": "w1"}), json!({"id": "w2"})],
        approvals: vec![json!({"id": "a0"}), json!({"id": "a1"})],
        ..Data::default()
    };
    app.refreshed(newer.clone());
    assert_eq!(
        app.selected_work().unwrap()["id"],
        "w2",
        "newer Work above does not move it"
    );
    assert_eq!(app.selected_approval().unwrap()["id"], "a1");
    let decided = Data {
        approvals: vec![json!({"id": "a0"}), json!({"id": "a2"})],
        ..newer
    };
    app.refreshed(decided);
    assert_eq!(
        app.selected_approval(),
        None,
        "the next call does not slide under the highlight"
    );
    press(&mut app, KeyCode::Char('2'));
    assert_eq!(press(&mut app, KeyCode::Char('a')), Command::Nothing);
    assert!(app.status.contains("select a call first"), "{}", app.status);
    press(&mut app, KeyCode::Down);
    assert_eq!(press(&mut app, KeyCode::Char('a')), Command::Approve("a0".into()));
}

#[test]
fn events_follow_the_event_they_came_from() {
    let event = |id: &str, parent: Option<&str>| json!({"id": id, "causation": {"parent": parent}});
    let events = [
        event("root", None),
        event("a", Some("root")),
        event("other", Some("not-shown")),
        event("b", Some("root")),
        event("a1", Some("a")),
    ];
    let order: Vec<(usize, &str)> = causal_order(&events)
        .into_iter()
        .map(|(depth, e)| (depth, e["id"].as_str().unwrap()))
        .collect();
    assert_eq!(order, [(0, "root"), (1, "a"), (2, "a1"), (1, "b"), (0, "other")]);
    let looped = [event("x", Some("x")), event("x", None)];
    assert_eq!(causal_order(&looped).len(), 1, "a repeated id cannot loop");
}

#[test]
fn a_paste_is_reason_text_or_nothing_never_keys() {
    let mut app = with_approval("operate");
    app.on_paste("q\na");
    assert_eq!(
        (app.tab, app.mode.clone()),
        (Tab::Approvals, Mode::Browse),
        "a paste is not keys"
    );
    press(&mut app, KeyCode::Char('d'));
    app.on_paste("not now\njust ask");
    assert_eq!(
        press(&mut app, KeyCode::Enter),
        Command::Deny {
            approval: "a1".into(),
            reason: "not now just ask".into()
        }
    );
    assert_eq!(
        app.keys()[..2],
        [("a", "approve"), ("d", "deny")],
        "decision keys come first"
    );
}
