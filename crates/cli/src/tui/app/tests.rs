use ratatui::crossterm::event::KeyCode;
use serde_json::json;

use super::*;

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
    assert_eq!(app.on_key(KeyCode::Char('a')), Command::Approve("a1".into()));
    assert_eq!(app.on_key(KeyCode::Char('d')), Command::Nothing);
    for c in "no.".chars() {
        app.on_key(KeyCode::Char(c));
    }
    app.on_key(KeyCode::Backspace);
    assert_eq!(
        app.on_key(KeyCode::Enter),
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
    assert_eq!(app.on_key(KeyCode::Char('a')), Command::Nothing);
    assert_eq!(app.on_key(KeyCode::Char('d')), Command::Nothing);
    assert_eq!(app.mode, Mode::Browse, "no reason is asked for");
    assert!(app.status.contains("view role cannot decide"), "{}", app.status);
}

#[test]
fn an_empty_reason_is_not_sent_and_escape_abandons_it() {
    let mut app = with_approval("admin");
    app.on_key(KeyCode::Char('d'));
    assert_eq!(app.on_key(KeyCode::Enter), Command::Nothing);
    assert!(matches!(app.mode, Mode::Reason { .. }));
    assert_eq!(app.on_key(KeyCode::Esc), Command::Nothing);
    assert_eq!(app.mode, Mode::Browse);
}

#[test]
fn views_and_selections_follow_the_keys_and_stay_in_their_lists() {
    let mut app = with_approval("view");
    app.on_key(KeyCode::Char('1'));
    assert_eq!(app.tab, Tab::Work);
    for _ in 0..5 {
        app.on_key(KeyCode::Down);
    }
    assert_eq!(app.work_row, 1, "the last row");
    app.on_key(KeyCode::Up);
    assert_eq!(app.selected_work().unwrap()["id"], "w1");
    app.on_key(KeyCode::Tab);
    assert_eq!(app.tab, Tab::Approvals);
    app.refreshed(Data::default());
    assert_eq!(
        (app.work_row, app.approval_row),
        (0, 0),
        "selections shrink with their lists"
    );
    assert_eq!(app.on_key(KeyCode::Char('q')), Command::Quit);
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
